/**
 * Secrets the standalone host generates for itself when none is configured (the demo device's key and signing
 * secret, the `/metrics` bearer token, the key of de-identified turns' date shifts): random, written once into `<data dir>/secrets/` (the folder 0700, each
 * file 0600), and read from there by the host, the token command and whatever the operator points at the file.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** The path of the generated secret `name` of a data folder, created (`bytes` random bytes, base64url) if missing. */
export function ensureSecretFile(dataDir: string, name: string, bytes: number): string {
  const folder = join(dataDir, 'secrets');
  mkdirSync(folder, { recursive: true, mode: 0o700 });
  const file = join(folder, name);
  if (!existsSync(file)) {
    try {
      writeFileSync(file, `${randomBytes(bytes).toString('base64url')}\n`, { mode: 0o600, flag: 'wx' });
    } catch (error) {
      // Another process (the token command, a second instance) wrote it first: theirs is kept.
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') {
        throw error;
      }
    }
  }
  return file;
}

/** The file of the `/metrics` bearer token the host generates when `FHIRGATE_METRICS_TOKEN` is unset. */
export const METRICS_TOKEN_FILE_NAME = 'metrics-token';

/** The generated `/metrics` bearer token of a data folder (created on first use). */
export function readGeneratedMetricsToken(dataDir: string): string {
  return readFileSync(ensureSecretFile(dataDir, METRICS_TOKEN_FILE_NAME, 32), 'utf8').trim();
}

/** The file of the date shift key the host generates when `FHIRGATE_DATE_SHIFT_KEY` is unset. */
export const DATE_SHIFT_KEY_FILE_NAME = 'date-shift-key';

/** The generated key of de-identified turns' date shifts (created on first use); instances sharing a data folder share it. */
export function readGeneratedDateShiftKey(dataDir: string): string {
  return readFileSync(ensureSecretFile(dataDir, DATE_SHIFT_KEY_FILE_NAME, 32), 'utf8').trim();
}
