#!/usr/bin/env -S node --max-semi-space-size=8 --heap-growing-percent=50
/**
 * `fhirgate` (`npm start`): the standalone host with fhirgate mounted (serve.ts). `fhirgate provision ...` instead
 * sets up a project on a Medplum server with fhirgate mounted (plugin/provision/provision-command.ts).
 *
 * Node runs it with two heap flags (the line above; `npm start` passes the same), each measured with 1,000 open
 * streams on the host as it starts (Medplum's whole GraphQL schema not built) and found no slower
 * (bench/findings.md, "Memory under 1,000 streams" and "The old generation's growth"):
 *   --max-semi-space-size=8     the young generation stays at most 8 MB a half instead of growing to its default
 *                               ceiling under many concurrent requests: ~100 MB off the peak at 16 MB, ~16 MB more
 *                               at 8 MB, with no loss of throughput ("The chat targets on a quiet machine");
 *   --heap-growing-percent=50   after a full collection the old generation may grow by half of what is live before
 *                               the next one, instead of V8's own factor (about 2× here): ~70 MB off the peak.
 */

import { readCommandLine } from '../../command-line.ts';
import { StartUpError } from './start-up-error.ts';

const USAGE = `Usage: fhirgate                 (from the sources: npm start)
       fhirgate provision [options]

fhirgate starts the standalone host: a Medplum-compatible server with fhirgate mounted, on http://127.0.0.1:8103/
(HOST, PORT), storing everything in ./data (FHIRGATE_DATA_DIR). It takes no flags: its settings are environment
variables, among them AI_PROVIDER, AI_MODEL and AI_API_KEY for an LLM provider (docs/configuration.md).

Commands:
  provision    sets up a project on a Medplum server with fhirgate mounted (fhirgate provision --help)
`;

if (process.argv[2] === 'provision') {
  const { runProvisionCommand } = await import('../../provision/provision-command.ts');
  process.exitCode = await runProvisionCommand(process.argv.slice(3));
} else {
  const commandLine = readCommandLine('fhirgate', USAGE, process.argv.slice(2), { options: {} });
  if ('exitCode' in commandLine) {
    process.exit(commandLine.exitCode);
  }
  try {
    await import('./serve.ts');
  } catch (error) {
    // A wrong setting (the host's variables, the plugin's options, device_auth), a data folder another host holds or
    // a port in use is one line saying what to do, not a stack.
    if (error instanceof StartUpError || (error instanceof Error && error.message.startsWith('Invalid '))) {
      process.stderr.write(`fhirgate cannot start: ${error.message}\n`);
      process.exit(1);
    }
    throw error;
  }
}

export {};
