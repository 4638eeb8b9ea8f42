/**
 * What a running standalone host tells the commands that work on its data folder: the issuer its access tokens
 * must carry (its base URL) and where it listens, in `<data dir>/host.json` (0600), written at start. The token
 * command reads it, so a token it prints is one the host accepts whatever `PORT` or `FHIRGATE_BASE_URL` the host
 * was started with.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** What `host.json` holds. */
export interface HostInfo {
  /** The `iss` of the host's access tokens (its base URL). */
  readonly issuer: string;
  /** Where it listened. */
  readonly url: string;
  readonly pid: number;
}

const FILE = 'host.json';

/** Records the running host's issuer and address in its data folder. */
export function writeHostInfo(dataDir: string, info: HostInfo): void {
  writeFileSync(join(dataDir, FILE), `${JSON.stringify(info)}\n`, { mode: 0o600 });
}

/** What the last host started on this data folder recorded; undefined when none did (or the file is unreadable). */
export function readHostInfo(dataDir: string): HostInfo | undefined {
  const file = join(dataDir, FILE);
  if (!existsSync(file)) {
    return undefined;
  }
  try {
    const info = JSON.parse(readFileSync(file, 'utf8')) as Partial<HostInfo>;
    return typeof info.issuer === 'string' && typeof info.url === 'string' ? { issuer: info.issuer, url: info.url, pid: Number(info.pid) } : undefined;
  } catch {
    return undefined;
  }
}
