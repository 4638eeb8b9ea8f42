/**
 * The chaos run's Redis faults. The host shares its device limits through a Redis of the run's own (never the
 * shared one); while the demo device renews its token and writes Observations through `/graphql`, that Redis is
 * paused (SIGSTOP: connections stay open, nothing answers), resumed, killed (SIGKILL: connections refused) and
 * started again on the same port. Every device request is timed: none may fail or take longer than
 * `BLOCKED_AFTER_MS` because of Redis (the host's deadline per Redis call is 250 ms), and the host must log the
 * outage and the recovery without ioredis's stack traces.
 */
import { DEMO_DEVICE } from '../plugin/hosts/standalone/demo-devices.ts';
import type { OwnRedis } from '../test/support/own-redis.ts';

/** A request that takes longer than this is counted as blocked. */
export const BLOCKED_AFTER_MS = 2000;

const CREATE_OBSERVATION =
  'mutation CreateObservation($input: ObservationInput!) { ObservationCreate(resource: $input) { id status code { coding { system code } } device { identifier { system value } } } }';

/** One phase of the run: what Redis was doing, and how the device's requests fared meanwhile. */
export interface RedisPhase {
  readonly name: string;
  readonly exchanges: number;
  readonly writes: number;
  /** Requests answered other than 200 with data (or not answered at all). */
  readonly failed: number;
  /** Requests that took longer than BLOCKED_AFTER_MS. */
  readonly blocked: number;
  readonly medianMs: number;
  readonly maxMs: number;
  /** The first few failures, for the report. */
  readonly failures: readonly string[];
}

/** What the Redis faults came to. */
export interface RedisFaultSummary {
  readonly phases: readonly RedisPhase[];
  readonly failed: number;
  readonly blocked: number;
  /** Host log lines: the outage warnings, the recoveries, and ioredis's own unhandled-error reports (must be 0). */
  readonly hostLogged: { readonly unavailable: number; readonly recovered: number; readonly unhandledRedisErrors: number };
}

/** Runs the faults against the host at `baseUrl`, whose Redis is `redis`; `hostLogs` reads what the host logged so far. */
export async function runRedisFaults(options: {
  readonly baseUrl: string;
  readonly redis: OwnRedis;
  readonly deviceKey: string;
  readonly phaseMs: number;
  readonly hostLogs: () => string;
  readonly log: (message: string) => void;
}): Promise<RedisFaultSummary> {
  const { baseUrl, redis, deviceKey, phaseMs, log } = options;
  const device = new DemoDevice(baseUrl, deviceKey);
  // The first write builds Medplum's GraphQL schema (seconds): not a Redis matter, so not measured.
  await device.exchange();
  await device.write();

  const phases: RedisPhase[] = [];
  const phase = async (name: string, before?: () => Promise<void> | void): Promise<void> => {
    await before?.();
    log(`redis: ${name}`);
    phases.push(await device.run(name, phaseMs));
  };
  await phase('Redis up');
  await phase('Redis paused (SIGSTOP)', () => redis.pause());
  await phase('Redis resumed', () => redis.resume());
  await phase('Redis killed (SIGKILL)', () => redis.kill());
  await phase('Redis started again', () => redis.restart());
  // Recovery: the host asks Redis again within a second of it answering.
  await phase('Redis up again');

  const logs = options.hostLogs();
  return {
    phases,
    failed: phases.reduce((sum, item) => sum + item.failed, 0),
    blocked: phases.reduce((sum, item) => sum + item.blocked, 0),
    hostLogged: {
      unavailable: count(logs, '"msg":"fhirgate: Redis did not answer'),
      recovered: count(logs, '"msg":"fhirgate: Redis answers again'),
      unhandledRedisErrors: count(logs, '[ioredis] Unhandled error event'),
    },
  };
}

function count(text: string, needle: string): number {
  return text.split(needle).length - 1;
}

/** The demo device: renews its token every third tick and writes an Observation every tick, within its 10 per second. */
class DemoDevice {
  private access = '';
  private readonly baseUrl: string;
  private readonly key: string;

  constructor(baseUrl: string, key: string) {
    this.baseUrl = baseUrl;
    this.key = key;
  }

  async run(name: string, milliseconds: number): Promise<RedisPhase> {
    const durations: number[] = [];
    const failures: string[] = [];
    let exchanges = 0;
    let writes = 0;
    const ends = Date.now() + milliseconds;
    for (let tick = 0; Date.now() < ends; tick++) {
      const requests: [string, () => Promise<string | undefined>][] = tick % 3 === 0 ? [['token', () => this.exchange()]] : [];
      requests.push(['write', () => this.write()]);
      for (const [kind, send] of requests) {
        const started = performance.now();
        const failure = await send().catch((error: unknown) => `no answer (${String(error)})`);
        durations.push(performance.now() - started);
        if (kind === 'token') exchanges++;
        else writes++;
        if (failure) failures.push(`${kind}: ${failure}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    const sorted = [...durations].sort((left, right) => left - right);
    return {
      name,
      exchanges,
      writes,
      failed: failures.length,
      blocked: durations.filter((duration) => duration > BLOCKED_AFTER_MS).length,
      medianMs: Math.round(sorted[Math.floor(sorted.length / 2)] ?? 0),
      maxMs: Math.round(sorted.at(-1) ?? 0),
      failures: failures.slice(0, 5),
    };
  }

  /** A token exchange; resolves to why it failed, or undefined. */
  async exchange(): Promise<string | undefined> {
    const response = await fetch(`${this.baseUrl}account/api/token/device/`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ device_id: DEMO_DEVICE.id, api_key: this.key }),
      signal: AbortSignal.timeout(60_000),
    });
    const body = (await response.json()) as { access?: string };
    if (response.status !== 200 || !body.access) return `${response.status} ${JSON.stringify(body).slice(0, 200)}`;
    this.access = body.access;
    return undefined;
  }

  /** An Observation through `/graphql`; resolves to why it failed, or undefined. */
  async write(): Promise<string | undefined> {
    const response = await fetch(`${this.baseUrl}graphql`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${this.access}` },
      body: JSON.stringify({
        query: CREATE_OBSERVATION,
        variables: {
          input: {
            status: 'final',
            code: { coding: [{ system: 'http://loinc.org', code: '8867-4' }] },
            device: { identifier: { system: DEMO_DEVICE.identifierSystem, value: DEMO_DEVICE.id } },
          },
        },
      }),
      signal: AbortSignal.timeout(60_000),
    });
    const body = (await response.json()) as { data?: { ObservationCreate?: { id?: string } }; errors?: unknown };
    if (response.status !== 200 || body.errors || !body.data?.ObservationCreate?.id) return `${response.status} ${JSON.stringify(body).slice(0, 200)}`;
    return undefined;
  }
}
