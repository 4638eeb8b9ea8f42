/** Where a contender preloaded with profile-on-signal.ts writes its profile, and how finely it samples. */
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** µs between samples: fine enough that a part of 20 µs a turn is a few hundred samples over a 6 s window. */
export const SAMPLING_INTERVAL_US = 250;

export function profileFile(pid: number): string {
  return join(tmpdir(), `fhirgate-bench-profile-${pid}.cpuprofile`);
}

/**
 * The `node` flag that preloads profile-on-signal.ts: given to the SDK relay, the floor and fhirgate's host, so
 * scenario 14 can profile each of them for exactly the load it sends. Until signalled it only holds a handler.
 */
export const PROFILE_ON_SIGNAL = `--import=${new URL('./profile-on-signal.ts', import.meta.url).pathname}`;
