/**
 * `fhirgate provision` (`npm run provision --` from the sources): provisions the project of a project
 * administrator's client (provision-project.ts) on a Medplum server with fhirgate mounted, and prints what it did
 * as JSON. Credentials come from the flags or from `MEDPLUM_BASE_URL`, `MEDPLUM_CLIENT_ID`,
 * `MEDPLUM_CLIENT_SECRET`; the secret is never printed.
 */
import { MedplumClient } from '@medplum/core';
import { readCommandLine, USAGE_EXIT_CODE } from '../command-line.ts';
import { provisionProject, type ProvisionOptions, type ProvisionReport } from './provision-project.ts';

const USAGE = `Usage: fhirgate provision --base-url <url> --client-id <id> --client-secret <secret> [options]

Sets up the project of a project administrator's client for fhirgate: the AI agent Device, the ready-made
AccessPolicies, and optionally a device (with its key in a device_auth file) and the project's models.
Safe to run again. Credentials may also come from MEDPLUM_BASE_URL, MEDPLUM_CLIENT_ID, MEDPLUM_CLIENT_SECRET.

Options:
  --device-id <id>              register a device (its Device, and its key in the device_auth file)
  --identifier-system <uri>     the Device.identifier system of devices (default urn:fhirgate:device)
  --device-auth-file <path>     the device_auth file to add the device to (default ./fhirgate-device-auth.json);
                                start the server with FHIRGATE_DEVICE_AUTH=<path> to use it
  --models <a/b,c/d>            Project.setting AI_MODELS: the provider/model ids the project offers
  --default-model <a/b>         Project.setting AI_MODEL: the project's default model
  --agent-device-name <name>    the AI agent Device's name (the plugin's agentDeviceName)
  -h, --help                    this text
`;

/** Runs the command with `args` (after `provision`); resolves the process's exit code. */
export async function runProvisionCommand(args: readonly string[], environment: NodeJS.ProcessEnv = process.env): Promise<number> {
  const commandLine = readCommandLine('fhirgate provision', USAGE, args, {
    options: {
      'base-url': { type: 'string' },
      'client-id': { type: 'string' },
      'client-secret': { type: 'string' },
      'device-id': { type: 'string' },
      'identifier-system': { type: 'string', default: 'urn:fhirgate:device' },
      'device-auth-file': { type: 'string', default: './fhirgate-device-auth.json' },
      models: { type: 'string' },
      'default-model': { type: 'string' },
      'agent-device-name': { type: 'string' },
    },
  });
  if ('exitCode' in commandLine) {
    return commandLine.exitCode;
  }
  const { values } = commandLine;
  const baseUrl = values['base-url'] ?? environment.MEDPLUM_BASE_URL;
  const clientId = values['client-id'] ?? environment.MEDPLUM_CLIENT_ID;
  const clientSecret = values['client-secret'] ?? environment.MEDPLUM_CLIENT_SECRET;
  if (!baseUrl || !clientId || !clientSecret) {
    process.stderr.write(`fhirgate provision needs the server and a project administrator's client credentials.\n\n${USAGE}`);
    return USAGE_EXIT_CODE;
  }
  const options: ProvisionOptions = {
    agentDeviceName: values['agent-device-name'],
    device: values['device-id'] ? { id: values['device-id'], identifierSystem: values['identifier-system'], authFile: values['device-auth-file'] } : undefined,
    models: values.models?.split(',').map((model) => model.trim()).filter(Boolean),
    defaultModel: values['default-model'],
  };
  try {
    const report = await provision(baseUrl, clientId, clientSecret, options);
    process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
    return 0;
  } catch (error) {
    process.stderr.write(`fhirgate provision failed: ${describe(error)}\n`);
    return 1;
  }
}

/** Signs in with the client's credentials and provisions its project. */
export async function provision(baseUrl: string, clientId: string, clientSecret: string, options: ProvisionOptions): Promise<ProvisionReport> {
  const medplum = new MedplumClient({ baseUrl, fetch });
  await medplum.startClientLogin(clientId, clientSecret);
  return provisionProject(medplum, options);
}

// Medplum's errors carry an OperationOutcome: its text says what the server refused (never a credential).
function describe(error: unknown): string {
  const outcome = typeof error === 'object' && error !== null && 'outcome' in error ? (error as { outcome?: { issue?: { details?: { text?: string } }[] } }).outcome : undefined;
  const text = outcome?.issue?.map((issue) => issue.details?.text).filter(Boolean).join('; ');
  return text || (error instanceof Error ? error.message : String(error));
}
