/**
 * The short form of `npm run chaos` (300 requests with seeded faults, a SIGKILL and restart, a window where the
 * store refuses writes; then the host's Redis paused and killed under device traffic): no record lost, none
 * duplicated, none different from what its client saw; no device request failed or was held up by Redis. The
 * figures come from the run's JSON summary; the test asserts the guarantees, and for Redis a generous ceiling. CI
 * (`.ci/run`) runs `npm run chaos -- --short` itself before the tests and names its summary in FHIRGATE_CHAOS_SUMMARY:
 * this test then checks that summary instead of running the chaos a second time.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { hasRedisServer } from './support/own-redis.ts';

const run = promisify(execFile);

interface ChaosSummary {
  requests: number;
  faults: Record<string, number>;
  events: { sigkill: number; storeLockWindows: number; recoveredAfterRestart: number; repliesKeptInOutbox: number; hostStalls: number; instancesLost: number; recoveredByAnotherInstance: number };
  clientEnds: Record<string, number>;
  prompts: number;
  replies: number;
  lost: number;
  duplicates: number;
  mismatches: number;
  mismatchDetails: string[];
  hostExitCode: number;
  sharedJournal: { skipped?: string; streams: number; takenFromLiveInstance: number; lost: number; duplicates: number; mismatches: string[] };
  redisFaults?: {
    phases: { name: string; exchanges: number; writes: number; failed: number; blocked: number; maxMs: number }[];
    failed: number;
    blocked: number;
    hostLogged: { unavailable: number; recovered: number; unhandledRedisErrors: number };
  };
}

test('a short chaos run loses, duplicates and misreports nothing', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'fhirgate-chaos-test-'));
  try {
    const file = process.env.FHIRGATE_CHAOS_SUMMARY ?? join(dir, 'summary.json');
    if (!process.env.FHIRGATE_CHAOS_SUMMARY) {
      await run(process.execPath, ['chaos/run.ts', '--short', '--json', file], { maxBuffer: 16 * 1024 * 1024 }).catch((error: unknown) => error);
    }
    const summary = JSON.parse(await readFile(file, 'utf8')) as ChaosSummary;

    expect(summary.mismatchDetails).toEqual([]);
    expect({ lost: summary.lost, duplicates: summary.duplicates, mismatches: summary.mismatches }).toEqual({ lost: 0, duplicates: 0, mismatches: 0 });
    expect(summary.replies).toBe(summary.prompts);
    expect(summary.hostExitCode).toBe(0);
    // Two instances, each PID 1 of its own namespace, sharing the journal's folder: neither took the other's live
    // journal (where the machine lets the run create namespaces).
    if (!summary.sharedJournal.skipped) {
      expect(summary.sharedJournal).toEqual({ streams: 8, takenFromLiveInstance: 0, lost: 0, duplicates: 0, mismatches: [] });
    }
    // The run met what it is meant to: every kind of fault, the kill, and a store that refused writes.
    expect(Object.keys(summary.faults).sort()).toEqual(
      [
        'client-leaves-during-stall',
        'client-leaves-early',
        'client-leaves-mid-stream',
        'none',
        'provider-429',
        'provider-500',
        'provider-503',
        'provider-cut',
        'provider-hang',
        'provider-malformed',
        'provider-slow-first-token',
        'provider-stream-error',
      ].sort()
    );
    expect(summary.events.sigkill).toBe(1);
    expect(summary.events.storeLockWindows).toBe(1);
    expect(summary.events.hostStalls).toBeGreaterThan(0);
    expect((summary.clientEnds['http 503'] ?? 0) + summary.events.repliesKeptInOutbox).toBeGreaterThan(0);
    expect(summary.prompts).toBeGreaterThan(summary.requests / 2);
    if (hasRedisServer()) {
      // An instance lost for good, its journal with it: its replacement recorded its turns (none lost, above).
      expect(summary.events.instancesLost).toBe(1);
      expect(summary.events.recoveredByAnotherInstance).toBeGreaterThan(0);
      const redis = summary.redisFaults;
      expect(redis?.phases.map((phase) => phase.name)).toEqual(
        expect.arrayContaining(['Redis paused (SIGSTOP)', 'Redis killed (SIGKILL)', 'Redis started again']),
      );
      // The device kept working through both faults: every request answered, none held up (over 2 s).
      expect(redis?.phases.every((phase) => phase.exchanges > 0 && phase.writes > 0)).toBe(true);
      expect({ failed: redis?.failed, blocked: redis?.blocked, unhandled: redis?.hostLogged.unhandledRedisErrors }).toEqual({ failed: 0, blocked: 0, unhandled: 0 });
      // Each fault was noticed, and each outage logged ended in a recovery.
      expect(redis?.hostLogged.unavailable).toBeGreaterThanOrEqual(2);
      expect(redis?.hostLogged.recovered).toBe(redis?.hostLogged.unavailable);
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}, 300_000);
