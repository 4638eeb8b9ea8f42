import { spawn, type ChildProcess } from 'node:child_process';
import { cpuBetween, parseProcessStat, readProcessSnapshot, sampleOtherProcesses, type ProcessReading } from './other-processes.ts';

const snapshot = (entries: Record<number, ProcessReading>): Map<number, ProcessReading> => new Map(Object.entries(entries).map(([pid, reading]) => [Number(pid), reading]));

describe('the CPU processes outside the bench used during its run', () => {
  it('reads the parent and utime + stime of /proc/PID/stat, whatever the command name holds', () => {
    // pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime ...
    const stat = '4242 (node (jest) worker) R 17 4242 4242 0 -1 4194304 100 0 0 0 250 50 0 0 20 0 11 0 1000';
    expect(parseProcessStat(stat)).toEqual({ parent: 17, ticks: 300 });
  });

  it("counts a descendant of the bench's process as the bench's, any other process as outside", () => {
    const before = snapshot({ 1: { parent: 0, ticks: 0 }, 10: { parent: 1, ticks: 100 }, 11: { parent: 10, ticks: 50 }, 12: { parent: 11, ticks: 0 }, 20: { parent: 1, ticks: 400 } });
    const after = snapshot({ 1: { parent: 0, ticks: 0 }, 10: { parent: 1, ticks: 130 }, 11: { parent: 10, ticks: 60 }, 12: { parent: 11, ticks: 5 }, 20: { parent: 1, ticks: 470 } });
    // The bench is 10: itself, its child 11 and grandchild 12 used 30 + 10 + 5; 20, a sibling, used 70.
    expect(cpuBetween(before, after, 10)).toEqual({ bench: 45, outside: 70 });
  });

  it('counts nothing of a process first seen in the later reading, or of an id given to another process', () => {
    const before = snapshot({ 10: { parent: 1, ticks: 100 }, 30: { parent: 1, ticks: 900 } });
    const after = snapshot({ 10: { parent: 1, ticks: 100 }, 30: { parent: 7, ticks: 20 }, 31: { parent: 1, ticks: 500 } });
    expect(cpuBetween(before, after, 10)).toEqual({ bench: 0, outside: 0 });
  });

  it('finds a busy process outside the tree it is told is the bench, and not one inside it', async () => {
    const busy = (): ChildProcess => spawn(process.execPath, ['-e', 'const end = Date.now() + 4000; while (Date.now() < end) {}'], { stdio: 'ignore' });
    const idle = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 5000)'], { stdio: 'ignore' });
    // One busy process under the "bench" (the idle one's tree holds nothing busy): this test's own process is outside.
    const outsideChild = busy();
    try {
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(readProcessSnapshot().get(outsideChild.pid ?? -1)?.parent).toBe(process.pid);
      const sampler = sampleOtherProcesses(idle.pid ?? -1, 2, 500);
      await new Promise((resolve) => setTimeout(resolve, 2_600));
      const found = sampler.stop();
      // The busy loop holds a core: near 2 core-seconds over 2.6 s, half of a 2-core machine. Other jobs on the
      // machine only add to it.
      expect(found?.outsideSeconds).toBeGreaterThan(1.2);
      expect(found?.outsidePercent).toBeGreaterThan(20);
      // Told that this test's process is the bench, its busy child is the bench's own.
      const inside = sampleOtherProcesses(process.pid, 2, 500, () => new Map([...readProcessSnapshot()].filter(([pid]) => pid === outsideChild.pid || pid === process.pid)));
      await new Promise((resolve) => setTimeout(resolve, 1_100));
      expect(inside.stop()?.outsideSeconds).toBe(0);
    } finally {
      outsideChild.kill();
      idle.kill();
    }
  });
});
