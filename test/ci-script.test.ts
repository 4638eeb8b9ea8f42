/**
 * CI (`.ci/run`) runs the security suite and the short chaos run as steps of their own, whose exit codes fail it
 * (`set -e`, nothing swallowing them), before the tests that check their results.
 */
import { readFileSync } from 'node:fs';

const lines = readFileSync('.ci/run', 'utf8')
  .split('\n')
  .map((line) => line.trim())
  .filter((line) => line !== '' && !line.startsWith('#'));

/** The index of the one command line that runs `command`, failing when it is missing or its failure is swallowed. */
function stepOf(command: RegExp): number {
  const found = lines.flatMap((line, index) => (command.test(line) ? [index] : []));
  expect(found).toHaveLength(1);
  expect(lines[found[0]]).not.toMatch(/\|\||;\s*true|&\s*$/);
  return found[0];
}

test('CI fails on an attack let through or a record lost: it runs `npm run security` and `npm run chaos` and stops on their failure', () => {
  expect(lines).toContain('set -euo pipefail');
  const security = stepOf(/^npm run security\b/);
  const chaos = stepOf(/^npm run chaos -- --short\b/);
  const tests = stepOf(/\bnpm test$/);
  expect(security).toBeLessThan(tests);
  expect(chaos).toBeLessThan(tests);
  // The tests check the results those runs wrote.
  expect(lines[tests]).toMatch(/FHIRGATE_SECURITY_RESULTS=.*FHIRGATE_CHAOS_SUMMARY=/);
});
