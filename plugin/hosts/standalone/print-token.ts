#!/usr/bin/env node
/**
 * `npm run -s token`: prints an access token for the demo practitioner (Dr. Alice Carter), signed with the
 * host's keys in the data folder, for curl and the openai SDK. `--client` prints the demo integration's client
 * credentials instead (for `MedplumClient.startClientLogin`), `--admin-client` those of the demo project's
 * administrator client (made on first use; for `fhirgate provision` and `npm run e2e`), `--admin` an access token of
 * that administrator (for the usage report and the project's settings), `--device` the demo
 * device's id and API key (for `POST /account/api/token/device/`), `--metrics` the bearer token of `/metrics` (the
 * one the host generated, or `FHIRGATE_METRICS_TOKEN`). `--membership <id>` picks another membership.
 *
 * It works on the data folder the host uses (`FHIRGATE_DATA_DIR`, as for `npm start`) and signs with the issuer
 * the host last recorded there (`host.json`), so its token is one the host accepts whatever `PORT` or base URL the
 * host runs with; `FHIRGATE_BASE_URL` overrides it. A data folder without a store is an error that says what to
 * pass, never a new store.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { ProjectMembership } from '@medplum/fhirtypes';
import { createAccessTokenService } from './auth/access-tokens.ts';
import { startLogin } from './auth/logins.ts';
import { loadSigningKeys } from './auth/signing-keys.ts';
import { loadFhirDefinitions } from './fhir-definitions.ts';
import { openStandaloneStore, STORE_FILE_NAME } from './open-store.ts';
import { readHostInfo } from './host-info.ts';
import { readProjectFixture, seedProject } from './seed.ts';
import { readStandaloneConfig } from './standalone-config.ts';
import { DEMO_DEVICE, readDemoDeviceKey } from './demo-devices.ts';
import { ensureAdminClient } from './admin-client.ts';
import { readGeneratedMetricsToken } from './secret-files.ts';
import { readCommandLine, USAGE_EXIT_CODE } from '../../command-line.ts';
import { isOutcomeStatus } from '../../medplum-errors.ts';

const USAGE = `Usage: npm run -s token -- [option]      (installed: fhirgate-token [option])

Prints an access token of the standalone host's demo practitioner, Dr. Alice Carter (valid one hour), signed with
the host's keys. It reads the host's data folder (./data, or FHIRGATE_DATA_DIR as for npm start) and signs for the
address the host recorded there (FHIRGATE_BASE_URL overrides it).

Options (one at a time):
  --client             the demo integration's client credentials, as JSON (for MedplumClient.startClientLogin)
  --admin-client       the demo project administrator's client credentials, as JSON (for fhirgate provision and
                       npm run e2e)
  --admin              an access token of that administrator (for the usage report and the project's settings)
  --device             the demo device's id and API key, as JSON (for POST /account/api/token/device/)
  --metrics            the bearer token of /metrics
  --membership <id>    an access token of another ProjectMembership of the demo project
  -h, --help           this text
`;

const commandLine = readCommandLine('fhirgate-token', USAGE, process.argv.slice(2), {
  options: {
    client: { type: 'boolean', default: false },
    'admin-client': { type: 'boolean', default: false },
    admin: { type: 'boolean', default: false },
    device: { type: 'boolean', default: false },
    metrics: { type: 'boolean', default: false },
    membership: { type: 'string' },
  },
});
if ('exitCode' in commandLine) {
  process.exit(commandLine.exitCode);
}
const { values } = commandLine;
const config = readStandaloneConfig();
if (!existsSync(join(config.dataDir, STORE_FILE_NAME))) {
  process.stderr.write(
    `No fhirgate data in ${config.dataDir}. Start the host first (npm start), or give this command the data folder ` +
      `the host uses: FHIRGATE_DATA_DIR=<folder> npm run -s token\n`
  );
  process.exit(2);
}
// The issuer the host's tokens carry: the one it recorded when it started, unless the caller names one.
const issuer = process.env.FHIRGATE_BASE_URL ? config.baseUrl : (readHostInfo(config.dataDir)?.issuer ?? config.baseUrl);
if (values.metrics) {
  // Needs no store: the token is configuration, or a file of the data folder.
  process.stdout.write(`${config.metricsToken ?? readGeneratedMetricsToken(config.dataDir)}\n`);
} else {
  await printDemoCredentials().catch((error: unknown) => {
    // A --membership the store does not hold is a wrong flag too: one line, not Medplum's stack.
    if (values.membership !== undefined && isOutcomeStatus(error, 404)) {
      process.stderr.write(`fhirgate-token: no ProjectMembership '${values.membership}' in ${config.dataDir}; --help lists the options.\n`);
      process.exit(USAGE_EXIT_CODE);
    }
    throw error;
  });
}

async function printDemoCredentials(): Promise<void> {
  loadFhirDefinitions();
  const store = openStandaloneStore(config.dataDir);
  try {
    const demo = await seedProject(store, await readProjectFixture(), { freshIds: false });
    if (values.device) {
      process.stdout.write(`${JSON.stringify({ device_id: DEMO_DEVICE.id, api_key: readDemoDeviceKey(config.dataDir) })}\n`);
    } else if (values['admin-client']) {
      const admin = await ensureAdminClient(store, demo.projectId);
      process.stdout.write(`${JSON.stringify({ client_id: admin.id, client_secret: admin.secret, project_id: demo.projectId })}\n`);
    } else if (values.client) {
      process.stdout.write(`${JSON.stringify({ client_id: demo.client?.id, client_secret: demo.client?.secret, project_id: demo.projectId })}\n`);
    } else {
      const admin = values.admin ? await ensureAdminClient(store, demo.projectId) : undefined;
      const membershipId = values.membership ?? admin?.membershipId ?? demo.ids['practitioner-membership'];
      const membership = await store.readResource<ProjectMembership>('ProjectMembership', membershipId);
      const tokens = createAccessTokenService({ keys: await loadSigningKeys(store), issuer });
      const issued = await startLogin(store, tokens, { membership, authMethod: 'pre-authorized' });
      process.stdout.write(`${issued.accessToken}\n`);
    }
  } finally {
    store.close();
  }
}
