/** The LLM emulator as its own process (test/emulator/main.ts), shared by every contender of a run. */
import type { ChildProcess } from 'node:child_process';
import { startNodeProcess, stopProcess, waitForOutput } from './processes.ts';

/** The emulator's knobs the bench uses (see test/emulator/README.md). */
export interface EmulatorBehaviour {
  readonly latencyMs?: number;
  readonly tokensPerSecond?: number;
  readonly replyTokens?: number;
  readonly reply?: string;
}

export interface EmulatorProcess {
  readonly url: string;
  readonly pid: number;
  /** Sets the default behaviour of every request after it (all contenders see the same upstream). */
  setBehaviour(behaviour: EmulatorBehaviour): Promise<void>;
  stop(): Promise<void>;
}

/** Starts the emulator on a free loopback port and waits for the `{"url":...}` line. */
export async function startEmulator(core: number | undefined): Promise<EmulatorProcess> {
  // A small record limit: the emulator keeps a record per request, and a long run must not grow its memory.
  const child: ChildProcess = startNodeProcess(['test/emulator/main.ts', '--port', '0', '--record-limit', '10'], { core });
  const match = await waitForOutput(child, 'stdout', /\{"url":"([^"]+)"\}/, 30_000);
  const url = match[1];
  return {
    url,
    pid: child.pid ?? -1,
    setBehaviour: async (behaviour) => {
      const response = await fetch(`${url}/_emulator/behaviour`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(behaviour),
      });
      if (!response.ok) throw new Error(`emulator refused behaviour ${JSON.stringify(behaviour)}: ${response.status} ${await response.text()}`);
    },
    stop: () => stopProcess(child),
  };
}
