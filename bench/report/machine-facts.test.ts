import { parseCpuTimes, stolenPercent } from './machine-facts.ts';

const procStat = (user: number, idle: number, steal: number): string =>
  [`cpu  ${user} 0 100 ${idle} 10 0 5 ${steal} 0 0`, `cpu0 ${user / 2} 0 50 ${idle / 2} 5 0 2 ${steal / 2} 0 0`, 'intr 12345', 'ctxt 678'].join('\n');

describe('the CPU time the hypervisor took during a run', () => {
  it('is the steal ticks over all ticks between two readings of /proc/stat', () => {
    const start = parseCpuTimes(procStat(1_000, 9_000, 0));
    const end = parseCpuTimes(procStat(1_600, 9_200, 200));
    // 600 user + 200 idle + 200 steal ticks passed: a fifth of them stolen.
    expect(stolenPercent(start, end)).toBeCloseTo(20, 5);
  });

  it('is not given when /proc/stat cannot be read or nothing passed', () => {
    expect(parseCpuTimes('intr 1\nctxt 2')).toBeUndefined();
    const reading = parseCpuTimes(procStat(1_000, 9_000, 0));
    expect(stolenPercent(undefined, reading)).toBeUndefined();
    expect(stolenPercent(reading, reading)).toBeUndefined();
  });
});
