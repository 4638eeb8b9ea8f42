import type { MachineFacts } from './machine-facts.ts';
import type { OtherProcessesCpu } from './other-processes.ts';
import { renderReport, type ReportInput } from './render-report.ts';

const machine: MachineFacts = { cpuModel: 'AMD EPYC', cores: 2, memoryGigabytes: 23.5, operatingSystem: 'Linux', nodeVersion: 'v24', portkeyVersion: '1.15.2' };

function report(otherProcesses: OtherProcessesCpu | undefined, reruns: ReportInput['reruns'] = []): string {
  return renderReport({ startedAt: '2026-11-29T04:00:00.000Z', durationSeconds: 2000, reruns, smoke: false, machine, otherProcesses, layout: 'taskset', fhirgateNodeFlags: [], sections: [], missing: [] });
}

const quiet: OtherProcessesCpu = { outsideSeconds: 40, outsidePercent: 1, peakWindowPercent: 12 };
const busy: OtherProcessesCpu = { outsideSeconds: 1200, outsidePercent: 30, peakWindowPercent: 50 };

describe("the report's word on what else ran on the machine", () => {
  test('a run beside another job is said not to be quiet, with what the other processes used', () => {
    const text = report(busy);
    expect(text).toContain('| CPU used by other processes on the machine during the run | 30.0 % of the cores (1200 core-seconds; the busiest 10 s: 50 %) |');
    expect(text).toContain('**Not a quiet run.**');
  });

  test('a quiet run says what little else ran, and no warning', () => {
    const text = report(quiet);
    expect(text).toContain('| CPU used by other processes on the machine during the run | 1.0 % of the cores (40 core-seconds; the busiest 10 s: 12 %) |');
    expect(text).not.toContain('Not a quiet run');
  });

  test('a burst is enough: a build of 10 s at full load in a quiet run of half an hour', () => {
    expect(report({ outsideSeconds: 20, outsidePercent: 0.5, peakWindowPercent: 100 })).toContain('**Not a quiet run.**');
  });

  test('a scenario run again beside another job makes the report say so, with its own figures', () => {
    const text = report(quiet, [{ ids: ['11'], at: '2026-11-29T05:00:00.000Z', durationSeconds: 80, otherProcesses: busy }]);
    expect(text).toContain('| the same, during the rerun of 11 | 30.0 % of the cores');
    expect(text).toContain('**Not a quiet run.**');
  });

  test('where /proc cannot be read, the report says it was not measured', () => {
    expect(report(undefined)).toContain('| CPU used by other processes on the machine during the run | not measured |');
  });
});

describe("the report's word on how the contenders were started", () => {
  test("the floor's Node flags are listed beside fhirgate's", () => {
    const text = renderReport({
      startedAt: '2026-11-29T04:00:00.000Z',
      durationSeconds: 2000,
      smoke: false,
      machine,
      layout: 'taskset',
      fhirgateNodeFlags: ['--max-semi-space-size=8', '--expose-gc'],
      floorNodeFlags: ['--max-semi-space-size=8'],
      sections: [],
      missing: [],
    });
    expect(text).toContain("| fhirgate's Node flags | `--max-semi-space-size=8` `--expose-gc` |");
    expect(text).toContain("| the floor's (SDK relay + store) Node flags | `--max-semi-space-size=8` |");
  });
});
