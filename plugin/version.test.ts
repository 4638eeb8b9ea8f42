import { readFile } from 'node:fs/promises';
import { FHIRGATE_VERSION } from './version.ts';

test('the version reported in metrics, traces and /healthcheck is the package version', async () => {
  const manifest = JSON.parse(await readFile(new URL('../package.json', import.meta.url), 'utf8')) as { version: string };
  expect(FHIRGATE_VERSION).toBe(manifest.version);
});
