/**
 * Where a benchmarked standalone host's log goes: a file, as a deployment's log does (journald, a container's log
 * driver), written line by line at the host's default level (info: the start-up line and one line per request, as
 * `npm start` writes them). The orchestrator never reads it while the host runs; its tail explains a failed start.
 */
import { closeSync, openSync, readFileSync, rmSync } from 'node:fs';
import type { StdioOptions } from 'node:child_process';

/** A host's log file. */
export interface HostLog {
  readonly path: string;
  /** The child's stdio: stdout piped (the banner), stderr (the JSON log lines) appended to the file. */
  readonly stdio: StdioOptions;
  /** Closes this process's copy of the file's descriptor once the child has its own. */
  started(): void;
  /** The file's last characters, for an error message. */
  tail(limit?: number): string;
  remove(): void;
}

/** Opens (creates) `path` for the host's stderr. */
export function openHostLog(path: string): HostLog {
  const fd = openSync(path, 'a', 0o600);
  return {
    path,
    stdio: ['ignore', 'pipe', fd],
    started: () => closeSync(fd),
    tail: (limit = 4_000) => {
      try {
        return readFileSync(path, 'utf8').slice(-limit);
      } catch {
        return '';
      }
    },
    remove: () => rmSync(path, { force: true }),
  };
}
