/**
 * `npm run e2e`: the end-to-end suite (test/e2e/) against a server of the user's, or, without `--base-url`, against
 * a standalone host it starts itself. Sets the suite's environment from the flags and runs it with jest.
 */
import { spawn } from 'node:child_process';
import { readCommandLine, USAGE_EXIT_CODE } from '../../plugin/command-line.ts';

const USAGE = `Usage: npm run e2e -- [--base-url <url> --client-id <id> --client-secret <secret>] [options]

Runs fhirgate's end-to-end suite from the outside: practitioners sign in with email and password and chat with the
openai SDK; a device posts an Observation through /graphql; a ward's device, allowed only from the ward's
address, is refused from outside it and from a caller forging X-Forwarded-For, and answered through a reverse
proxy the suite starts on loopback; in Chromium (/usr/bin/chromium, or CHROMIUM_PATH; skipped without it), a
practitioner signs in to the web app at /fhirgate/app/, chats, reopens the conversation and
signs out, and a reviewer reads it in the review console; what was stored is read back with MedplumClient.
Without --base-url it starts a standalone host of this checkout on the LLM emulator.

With --base-url: a Medplum server with fhirgate mounted, and a project administrator's client credentials
(also MEDPLUM_CLIENT_ID / MEDPLUM_CLIENT_SECRET). The suite runs 'fhirgate provision' on that project first, and
creates two patients, four practitioners and a reviewer's AccessPolicy named for the run; it signs in four
practitioners (Medplum allows 5 sign-ins a minute from one address by default: leave a minute between runs).

Options:
  --device-auth-file <path>   the device_auth file the server reads (FHIRGATE_DEVICE_AUTH); the suite provisions
                              its device there. After the first run, restart the server so it reads the new device.
                              Without it, the device checks are skipped. The suite also provisions the device
                              fhirgate-e2e-ward-monitor there, allowed only from 127.0.0.5
                              (allowed_networks_per_device): on a server on loopback, its proxy reaches the server
                              from 127.0.0.2, the one proxy the server must trust (a server that believes
                              X-Forwarded-For from any caller fails the forged-header case, saying so)
  --device-id <id>            the device the suite uses (default: the first the --device-auth-file holds for the project, else fhirgate-e2e-sensor)
  --model <provider/model>    the model to chat with (default: the first /v1/models lists)
  --repository-operations     the server was mounted with reportRepositoryOperations: check and print what each
                              kind of turn asks of it (reads, searches, writes); always on without --base-url
  -h, --help                  this text
`;

const commandLine = readCommandLine('npm run e2e', USAGE, process.argv.slice(2), {
  options: {
    'base-url': { type: 'string' },
    'client-id': { type: 'string' },
    'client-secret': { type: 'string' },
    'device-auth-file': { type: 'string' },
    'device-id': { type: 'string' },
    model: { type: 'string' },
    'repository-operations': { type: 'boolean', default: false },
  },
});
if ('exitCode' in commandLine) {
  process.exit(commandLine.exitCode);
}
const { values } = commandLine;
const remote = values['base-url'];
const environment: NodeJS.ProcessEnv = { ...process.env };
if (remote) {
  environment.E2E_BASE_URL = remote;
  environment.E2E_CLIENT_ID = values['client-id'] ?? process.env.MEDPLUM_CLIENT_ID;
  environment.E2E_CLIENT_SECRET = values['client-secret'] ?? process.env.MEDPLUM_CLIENT_SECRET;
  if (!environment.E2E_CLIENT_ID || !environment.E2E_CLIENT_SECRET) {
    process.stderr.write(`--base-url needs a project administrator's --client-id and --client-secret.\n\n${USAGE}`);
    process.exit(USAGE_EXIT_CODE);
  }
}
if (values['repository-operations']) {
  environment.E2E_REPOSITORY_OPERATIONS = 'on';
}
for (const [flag, variable] of [['device-auth-file', 'E2E_DEVICE_AUTH_FILE'], ['device-id', 'E2E_DEVICE_ID'], ['model', 'E2E_MODEL']] as const) {
  const value = values[flag];
  if (value) {
    environment[variable] = value;
  }
}
const jest = spawn(process.execPath, ['--experimental-vm-modules', 'node_modules/jest/bin/jest.js', '--runInBand', 'test/e2e/'], { env: environment, stdio: 'inherit' });
jest.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
