/**
 * What the host that holds a data folder tells the commands that work on it, in `<data dir>/host.json` (0600): the
 * issuer its access tokens must carry (its base URL), its process and, once it listens, its address. The token
 * command reads the issuer, so a token it prints is one the host accepts whatever `PORT` or `FHIRGATE_BASE_URL` the
 * host was started with; a host refused the folder names the holder from it. Only the holder of the folder
 * writes it (data-folder-lock.ts).
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/** What `host.json` holds. */
export interface HostInfo {
  /** The `iss` of the host's access tokens (its base URL). */
  readonly issuer: string;
  /** Where it listens; absent while it is starting. */
  readonly url?: string;
  readonly pid: number;
  /** The machine (or container) the process runs on: a pid means something only there. */
  readonly hostname?: string;
  /** True for one of several instances sharing the folder (`FHIRGATE_SHARED_DATA_DIR=on`). */
  readonly shared?: boolean;
}

/** The file's name inside a data folder. */
export const HOST_INFO_FILE_NAME = 'host.json';

/** What the host holding (or that last held) this data folder recorded; undefined when none did or it is unreadable. */
export function readHostInfo(dataDir: string): HostInfo | undefined {
  const file = join(dataDir, HOST_INFO_FILE_NAME);
  if (!existsSync(file)) {
    return undefined;
  }
  try {
    const info = JSON.parse(readFileSync(file, 'utf8')) as Partial<HostInfo>;
    if (typeof info.issuer !== 'string') {
      return undefined;
    }
    return {
      issuer: info.issuer,
      url: typeof info.url === 'string' ? info.url : undefined,
      pid: Number(info.pid),
      hostname: typeof info.hostname === 'string' ? info.hostname : undefined,
      shared: info.shared === true,
    };
  } catch {
    return undefined;
  }
}
