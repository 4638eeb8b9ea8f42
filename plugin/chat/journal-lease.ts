/**
 * The lease in a reply journal's `LOCK` file: who writes the journal and until when. A journal's folder may be shared
 * by instances on several machines or containers, where a pid says nothing (every container's first process is PID
 * 1), so a writer is known by a random instance id, and it is alive while it renews its lease:
 * - the writer rewrites the lease every `heartbeatMs`, expiring `ttlMs` later (by its clock: the machines sharing a
 *   folder are assumed to keep time within a few seconds, as NTP does);
 * - a reader in the same PID namespace of the same boot (`scope`) knows at once: the writer is gone when its pid is
 *   not running, or is the reader's own (an earlier life of the reader's process, as after a restart);
 * - a reader anywhere else waits for the lease to expire.
 * A `LOCK` of an earlier version holds only a pid: it is read as that version did (gone when that pid is not alive
 * here, or is this process's own).
 */
import { randomUUID } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, readlinkSync, renameSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { hostname } from 'node:os';

/** How a journal's lease is kept; the defaults are the production ones, tests give short times and simulated pids. */
export interface JournalLeaseOptions {
  /** How often the writer renews its lease (default 2 s). */
  readonly heartbeatMs?: number;
  /** How long a lease lasts without renewal (default 10 s). */
  readonly ttlMs?: number;
  /** This writer's pid (default `process.pid`). */
  readonly pid?: number;
  /** Where pids mean the same process (default: this machine's boot and PID namespace). */
  readonly scope?: string;
  /** The clock (default `Date.now`). */
  readonly now?: () => number;
}

/** This process's lease: what it writes, and how it judges the leases of others. */
export interface JournalLease {
  readonly instanceId: string;
  readonly pid: number;
  readonly heartbeatMs: number;
  /** The lease's text as of now. */
  render(): string;
  /**
   * True when the `LOCK` text names a writer that is gone. `whileRunning`: asked at a beat, not at start, when a
   * journal of this same process is never gone (a process holds one journal; tests hold several, and only a start
   * takes the journals its own pid left, as after a restart).
   */
  isGone(lockText: string, whileRunning: boolean): boolean;
  /** This journal is closed: its lease is no longer this process's. */
  release(): void;
}

/** The instance ids of the journals this process holds open. */
const HELD_HERE = new Set<string>();

interface LeaseRecord {
  readonly instance: string;
  readonly pid: number;
  readonly scope: string;
  readonly expires: number;
}

/** The lease's file in each journal directory (its name from when it held a pid). */
export const LOCK = 'LOCK';
/**
 * The start of the name of a journal folder being opened: made whole under this name, then renamed into place, it is
 * never adopted. One left by a process that died opening it holds nothing but its lease.
 */
export const STAGING_PREFIX = '.staging-';
/**
 * A staging folder is removed only once this old: its opener writes the lease and renames the folder into place
 * right after making it, and a lease being written may be read half written (as no lease at all).
 */
export const STAGING_GRACE_MS = 60_000;
const DEFAULT_HEARTBEAT_MS = 2_000;
const DEFAULT_TTL_MS = 10_000;

/** The lease of this process's journal. */
export function journalLease(options: JournalLeaseOptions = {}): JournalLease {
  const instanceId = randomUUID();
  const pid = options.pid ?? process.pid;
  const scope = options.scope ?? pidScope();
  const ttlMs = options.ttlMs ?? DEFAULT_TTL_MS;
  const now = options.now ?? Date.now;
  HELD_HERE.add(instanceId);
  return {
    instanceId,
    pid,
    heartbeatMs: options.heartbeatMs ?? DEFAULT_HEARTBEAT_MS,
    render: () => JSON.stringify({ instance: instanceId, pid, scope, expires: now() + ttlMs } satisfies LeaseRecord),
    release: () => HELD_HERE.delete(instanceId),
    isGone: (lockText, whileRunning) => {
      const record = parseLease(lockText);
      if (!record) {
        // An earlier version's lock: a bare pid, judged here as it judged it.
        const holder = Number(lockText.trim());
        return !(Number.isInteger(holder) && holder > 0 && holder !== process.pid && isAlive(holder));
      }
      if (record.instance === instanceId || (whileRunning && HELD_HERE.has(record.instance))) {
        return false;
      }
      if (record.scope === scope) {
        return record.pid === pid || !isAlive(record.pid);
      }
      return now() > record.expires;
    },
  };
}

/**
 * Moves into `dir` every sibling journal whose process is gone; returns their new paths. A staging folder left by a
 * process that died opening its journal holds no turn (only its lease): it is removed.
 */
export function adoptOrphans(root: string, dir: string, lease: JournalLease, whileRunning: boolean): string[] {
  const adopted: string[] = [];
  for (const name of readdirSync(root)) {
    const sibling = join(root, name);
    if (name.startsWith(STAGING_PREFIX)) {
      removeIfAbandoned(sibling, lease, whileRunning);
      continue;
    }
    if (sibling === dir || !isOrphan(sibling, lease, whileRunning)) {
      continue;
    }
    const target = join(dir, `adopted-${name}`);
    try {
      renameSync(sibling, target);
      adopted.push(target);
    } catch {
      // Another instance adopted it first.
    }
  }
  return adopted;
}

/**
 * Removes a staging folder whose opener is gone: older than STAGING_GRACE_MS, and its lease names no live writer or
 * it never got one (an opener stopped for longer, but alive, keeps it).
 */
function removeIfAbandoned(path: string, lease: JournalLease, whileRunning: boolean): void {
  try {
    if (Date.now() - statSync(path).mtimeMs > STAGING_GRACE_MS && isOrphan(path, lease, whileRunning)) {
      rmSync(path, { recursive: true, force: true });
    }
  } catch {
    // Renamed into place by its opener, or removed by another instance, meanwhile.
  }
}

/** A journal directory whose lease names no live writer (journal-lease.ts). */
function isOrphan(path: string, lease: JournalLease, whileRunning: boolean): boolean {
  const lock = join(path, LOCK);
  try {
    if (!statSync(path).isDirectory()) {
      return false;
    }
    if (!existsSync(lock)) {
      // Closed cleanly (the lock goes last), or never fully opened.
      return true;
    }
    return lease.isGone(readFileSync(lock, 'utf8'), whileRunning);
  } catch {
    // Adopted by another instance meanwhile.
    return false;
  }
}

/**
 * Where a pid names one process: this boot of this machine and this PID namespace (two containers on one machine
 * differ in their namespace; two machines in their boot id). Without /proc, the host name.
 */
function pidScope(): string {
  try {
    return `${readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim()}/${readlinkSync('/proc/self/ns/pid')}`;
  } catch {
    return `host:${hostname()}`;
  }
}

function parseLease(text: string): LeaseRecord | undefined {
  try {
    const value = JSON.parse(text) as Partial<LeaseRecord> | null;
    return typeof value === 'object' && value !== null && typeof value.instance === 'string' && typeof value.pid === 'number' && typeof value.scope === 'string' && typeof value.expires === 'number'
      ? (value as LeaseRecord)
      : undefined;
  } catch {
    return undefined;
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
