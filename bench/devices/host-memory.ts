#!/usr/bin/env node
/**
 * The standalone host's resident memory with the devices' `/graphql`:
 *   node bench/devices/host-memory.ts [mutations]
 * Starts the host as the devices benchmark does (its own process, a fresh store, the demo device), reads its
 * VmRSS and VmHWM from /proc once it is up, posts the spec's `ObservationCreate` `mutations` times (2,000 by
 * default, 8 at a time; all but the first run on the fast path) and reads them again. Prints one JSON object, in
 * kB. Linux only (it reads /proc).
 */
import { deviceToken, startDeviceHost } from './device-host.ts';
import { specBody } from './observation-mutations.ts';
import { readProcessMemory, type ProcessMemory } from './process-memory.ts';

/** What this script prints. */
export interface HostMemory {
  readonly afterStart: ProcessMemory | undefined;
  readonly afterMutations: ProcessMemory | undefined;
  readonly mutations: number;
}

const CONCURRENCY = 8;
const mutations = Number(process.argv[2] ?? 2000);
const host = await startDeviceHost(undefined);
try {
  const afterStart = await readProcessMemory(host.process.pid);
  const token = await deviceToken(host);
  let sent = 0;
  const post = async (): Promise<void> => {
    while (sent < mutations) {
      sent += 1;
      const response = await fetch(`${host.url}graphql`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${token}` },
        body: specBody(),
      });
      const body = (await response.json()) as { errors?: unknown };
      if (!response.ok || body.errors) {
        throw new Error(`POST /graphql: HTTP ${response.status} ${JSON.stringify(body).slice(0, 500)}`);
      }
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, post));
  const result: HostMemory = { afterStart, afterMutations: await readProcessMemory(host.process.pid), mutations };
  process.stdout.write(`${JSON.stringify(result)}\n`);
} finally {
  await host.close();
}
