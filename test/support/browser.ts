/**
 * Debian's Chromium (`apt-get install chromium`), driven by playwright-core, for the web app's end-to-end tests.
 * CI installs it (.ci/run) and a test there fails without it; elsewhere the tests are skipped, saying why.
 */
import { existsSync } from 'node:fs';
import { chromium, type Browser } from 'playwright-core';

export const CHROMIUM_PATH = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/** Whether the browser tests run here; throws under CI when Chromium is missing. */
export function browserTestsRun(): boolean {
  if (existsSync(CHROMIUM_PATH)) {
    return true;
  }
  if (process.env.CI === 'true') {
    throw new Error(`Chromium is not at ${CHROMIUM_PATH}: .ci/run installs it (apt-get install chromium).`);
  }
  process.stderr.write(`Skipping the web app's browser tests: no Chromium at ${CHROMIUM_PATH} (apt-get install chromium, or set CHROMIUM_PATH).\n`);
  return false;
}

export function launchChromium(): Promise<Browser> {
  return chromium.launch({ executablePath: CHROMIUM_PATH, args: ['--no-sandbox'] });
}
