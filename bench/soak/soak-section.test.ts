import { parseReferenceSamples, samplesBetween } from '../lib/reference-load.ts';
import { buildSoakSection, type SoakHostWindow } from './soak-section.ts';
import type { SoakLoadPlan, SoakWindow } from './soak-load.ts';

const plan: SoakLoadPlan = {
  url: 'http://127.0.0.1:1',
  projectId: 'p',
  token: 't',
  users: 16,
  streamingUsers: 8,
  patientUsers: 4,
  patientId: 'x',
  device: { device_id: 'd', api_key: 'k' },
  devicePeriodMs: 250,
  durationSeconds: 60,
  windowSeconds: 30,
};

/** Two windows of 3,000 turns: the host's CPU for them, and the reference's unit times beside it. */
function section(hostCpuSeconds: [number, number], referenceMicros: [number, number]) {
  const window = (startSeconds: number): SoakWindow => ({ startSeconds, turns: 3000, turnErrors: 0, latenciesMs: [80, 90, 100], observations: 120, observationErrors: 0 });
  const host = (index: 0 | 1): SoakHostWindow => ({
    eventLoop: { p99Ms: 40, maxMs: 100 } as SoakHostWindow['eventLoop'],
    residentBytes: 300e6,
    cpuSeconds: hostCpuSeconds[index],
    referenceMicros: [referenceMicros[index] - 500, referenceMicros[index], referenceMicros[index] + 500],
  });
  return buildSoakSection({
    plan,
    load: { windows: [window(0), window(30)], turns: 6000, turnErrors: 0, observations: 240, observationErrors: 0 },
    hostWindows: [host(0), host(1)],
    stored: { prompts: 6000, replies: 6000, observations: 240 },
    pinned: true,
    smoke: false,
  });
}

const target = (built: ReturnType<typeof section>, start: string) => built.targets.find((each) => each.description.startsWith(start));

test('a host whose CPU per turn rose with the fixed-cost reference beside it did not do more work a turn', () => {
  // 6 → 9 ms a turn, while the same unit of work went from 15 to 22.5 ms: the machine slowed, not the host.
  const built = section([18, 27], [15_000, 22_500]);
  expect(target(built, 'host CPU per turn, last')?.met).toBe(false);
  const units = target(built, 'host CPU per turn in units');
  expect(units?.met).toBe(true);
  expect(units?.measured).toContain('the reference itself +50.0 %');
});

test('a host whose CPU per turn rose while the reference held misses the target in reference units', () => {
  const built = section([18, 27], [15_000, 15_000]);
  expect(target(built, 'host CPU per turn in units')?.met).toBe(false);
  expect(built.table.rows[1]).toContain(0.6); // 9 ms a turn ÷ 15 ms a unit
});

test('the reference samples of a window are those that ended in it, whatever else the output holds', () => {
  const samples = parseReferenceSamples(['{"at":1000,"cpuMicros":15000}', 'a warning', '{"at":2000,"cpuMicros":16000}', '{"at":30', ''].join('\n'));
  expect(samples).toEqual([
    { at: 1000, cpuMicros: 15000 },
    { at: 2000, cpuMicros: 16000 },
  ]);
  expect(samplesBetween(samples, 1000, 2000)).toEqual([{ at: 1000, cpuMicros: 15000 }]);
});
