/**
 * Preloaded like profile-on-signal.ts (`--import ./bench/profile/allocations-on-signal.ts`), for where a turn's
 * garbage comes from: the first SIGUSR2 starts V8's sampling heap profiler in this process (a sample every 4 KB
 * allocated, the objects that minor and major collections freed kept in the profile), the second stops it and
 * writes `<tmp>/fhirgate-allocations-<pid>-<n>.heapprofile`. Summarise with `node bench/allocation-summary.ts`.
 *
 *   npm run bench -- --only 14 --smoke --fhirgate-node-flag=--import=./bench/profile/allocations-on-signal.ts
 *
 * The bench signals fhirgate's host once per load (JSON, then streamed; without the chart, then as `npm start`),
 * so the files are numbered in that order. Both preloads answer the same signal, so the CPU profile of the same
 * window is written too.
 */
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { toggleOnSignal } from './signal-toggle.ts';

let session: Session | undefined;
let written = 0;

toggleOnSignal(
  async () => {
    session = new Session();
    session.connect();
    await session.post('HeapProfiler.enable');
    // The two `include…` flags keep what collections freed: without them the profile holds only what is still alive.
    await session.post('HeapProfiler.startSampling', { samplingInterval: 4096, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true } as never);
  },
  async () => {
    const { profile } = await (session as Session).post('HeapProfiler.stopSampling');
    session?.disconnect();
    session = undefined;
    writeFileSync(join(tmpdir(), `fhirgate-allocations-${process.pid}-${written++}.heapprofile`), JSON.stringify(profile));
  }
);
