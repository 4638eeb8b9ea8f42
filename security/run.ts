/**
 * `npm run security`: attacks on a standalone host (a real SQLite file, real HTTP on loopback, the LLM emulator):
 * forged and misused tokens, reaching another project's records, forged records of what the AI said, resource
 * consumption, bodies that do not parse or are too large or too deep, work before authentication, what is exposed
 * (search pages, file modes, `/metrics`), device key guessing and timing, floods of wrong keys and unknown device
 * ids, weak configured keys, device keys and tokens from outside their networks (on a host of its own, trusting one
 * proxy), device writes into charts, sign-in floods and guessing, a data folder shared, taken
 * or deleted (on a host process of its own), GraphQL costs on fresh hosts of their own (Medplum's whole schema built
 * for a device, or holding others; a device's mutations beyond its rate limit), and fuzzing; then the host's logs
 * are scanned for secrets.
 * Prints the attacks tried by kind, how many were let through and how many 5xx answers were seen: both must be 0
 * (exit 1 otherwise).
 *
 *   npm run security
 *   npm run security -- --fuzz-runs 3000 --json results.json
 *   npm run security -- --only isolation,consumption    (some modules only: to try a change quickly; not a full run)
 */
import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { loadSigningKeys } from '../plugin/hosts/standalone/auth/signing-keys.ts';
import { createJsonLogger } from '../plugin/hosts/standalone/logger.ts';
import { startLlmEmulator } from '../test/emulator/index.ts';
import { startTestHost } from '../test/support/test-host.ts';
import type { SeededProject } from '../plugin/hosts/standalone/seed.ts';
import { budgetAttacks } from './budget-attacks.ts';
import { consumptionAttacks } from './consumption-attacks.ts';
import { DATE_SHIFT_KEY, deIdentificationAttacks } from './de-identification-attacks.ts';
import { GATEWAY, UNCLEARED_MODEL, type SecurityContext } from './context.ts';
import { DEVICE_ID, DEVICE_KEY, DEVICE_SYSTEM, deviceAttacks, weakKeyAttacks } from './device-attacks.ts';
import { deviceFloodAttacks } from './device-flood-attacks.ts';
import { deviceNetworkAttacks } from './device-network-attacks.ts';
import { deviceWriteAttacks } from './device-write-attacks.ts';
import { chartInjectionAttack, forgeryAttacks } from './forgery-attacks.ts';
import { exposureAttacks } from './exposure-attacks.ts';
import { fuzzAttacks } from './fuzz-attacks.ts';
import { hostAttacks } from './host-attacks.ts';
import { graphqlAttacks } from './graphql-attacks.ts';
import { inputAttacks, SECRET_IN_BODY } from './input-attacks.ts';
import { isolationAttacks } from './isolation-attacks.ts';
import { subjectAttacks } from './subject-attacks.ts';
import { surfaceAttacks } from './surface-attacks.ts';
import { AttackLog } from './suite.ts';
import { clientKeyAttacks } from './client-key-attacks.ts';
import { tokenAttacks } from './token-attacks.ts';

const { values: args } = parseArgs({ options: { 'fuzz-runs': { type: 'string', default: '2000' }, json: { type: 'string' }, only: { type: 'string' } } });
const PROVIDER_KEY = 'sk-security-suite-provider-key-0123456789';
const DEVICE_SECRET = 'security-suite-device-signing-secret-0123456789abcdef';
const PROMPT_TEXT = 'A private question of project B.';
const DEVICE_FAILURE_WINDOW_SECONDS = 2;

const log = new AttackLog();
const logLines: string[] = [];
const emulator = await startLlmEmulator();
const host = await startTestHost({
  metrics: true,
  logger: createJsonLogger('info', (line) => logLines.push(line)),
  pluginFor: (project) => ({
    llm: {
      providers: {
        openai: { kind: 'openai', apiKey: PROVIDER_KEY, baseUrl: `${emulator.url}/v1`, models: ['gpt-4o-mini', UNCLEARED_MODEL], retries: { maxRetries: 0 } },
        // A gateway behind fhirgate (the request-field and retry attacks): no fields passed through, fhirgate's retries.
        [GATEWAY.provider]: { kind: 'openai-compatible', baseUrl: `${emulator.url}/v1`, models: [GATEWAY.model], retries: { maxRetries: GATEWAY.maxRetries, baseDelayMs: 10 } },
      },
      defaultModel: 'openai/gpt-4o-mini',
      // The default model is cleared for patient data (the attacks chat about patients); the other is not, for the
      // attacks that try to carry patient data to a model without an agreement.
      patientDataModels: ['openai/gpt-4o-mini'],
    },
    // For the projects whose AI_PATIENT_DATA_POLICY is de-identify (subject-attacks.ts, de-identification-attacks.ts).
    deIdentification: { dateShiftKey: DATE_SHIFT_KEY },
    device_auth: {
      valid_keys: { [DEVICE_ID]: DEVICE_KEY },
      jwt_secret: DEVICE_SECRET,
      identifier_system: DEVICE_SYSTEM,
      project_id: project.projectId,
      rate_limit_per_second: 20,
      // Short windows, so that refusal summaries are written within the run; a lockout that outlasts the attacks.
      failed_attempts_window_seconds: DEVICE_FAILURE_WINDOW_SECONDS,
      lockout_seconds: 30,
      auto_register: true,
    },
  }),
});
const projectA = host.project as SeededProject;
const projectB = await host.seedProject();
const tokenA = await host.accessTokenFor(projectA.ids['practitioner-membership']);
const tokenB = await host.accessTokenFor(projectB.ids['practitioner-membership']);
const exchanged = await fetch(`${host.url}account/api/token/device/`, {
  method: 'POST',
  headers: { 'Content-Type': 'application/json' },
  body: JSON.stringify({ device_id: DEVICE_ID, api_key: DEVICE_KEY }),
});
const deviceTokenA = ((await exchanged.json()) as { access: string }).access;

const context: SecurityContext = {
  host,
  emulator,
  log,
  projectA,
  projectB,
  tokenA,
  tokenB,
  deviceTokenA,
  hostKeys: await loadSigningKeys(host.store),
  secrets: [PROVIDER_KEY, DEVICE_KEY, DEVICE_SECRET, tokenA, tokenB, deviceTokenA, PROMPT_TEXT, SECRET_IN_BODY, projectA.client?.secret ?? '', projectB.client?.secret ?? ''].filter(Boolean),
  storedCommunications: async () => (await host.store.search({ resourceType: 'Communication', total: 'accurate', count: 0 })).total ?? 0,
  providerCalls: () => emulator.received.length,
  chat: (token, body, headers = { 'X-Project-ID': projectA.projectId }) =>
    fetch(`${host.url}v1/chat/completions`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', ...(token === undefined ? {} : { Authorization: `Bearer ${token}` }), ...headers },
      body: typeof body === 'string' ? body : JSON.stringify(body),
    }),
};

const startedAt = Date.now();
// In the order they run; `--only` names some of them.
const modules: [string, () => Promise<void>][] = [
  ['tokens', () => tokenAttacks(context)],
  ['client-keys', () => clientKeyAttacks(context)],
  ['isolation', () => isolationAttacks(context)],
  ['forgery', () => forgeryAttacks(context)],
  ['chart-injection', () => chartInjectionAttack(context)],
  ['subject', () => subjectAttacks(context)],
  ['de-identification', () => deIdentificationAttacks(context)],
  ['consumption', () => consumptionAttacks(context)],
  ['surface', () => surfaceAttacks(context)],
  ['budget', () => budgetAttacks(context)],
  ['input', () => inputAttacks(context)],
  ['exposure', () => exposureAttacks(context)],
  ['device', () => deviceAttacks(context)],
  ['device-write', () => deviceWriteAttacks(context)],
  ['device-flood', () => deviceFloodAttacks(context, DEVICE_FAILURE_WINDOW_SECONDS)],
  ['weak-keys', () => weakKeyAttacks(context)],
  ['device-network', () => deviceNetworkAttacks(log)],
  ['host', () => hostAttacks(context)],
  ['graphql', () => graphqlAttacks(context)],
  ['fuzz', () => fuzzAttacks(context, Number(args['fuzz-runs']))],
];
const only = args.only?.split(',').map((name) => name.trim());
const unknownModules = only?.filter((name) => !modules.some(([known]) => known === name)) ?? [];
if (unknownModules.length > 0) {
  process.stderr.write(`unknown attack module(s) ${unknownModules.join(', ')}; known: ${modules.map(([name]) => name).join(', ')}\n`);
  process.exit(2);
}
for (const [name, attacks] of modules) {
  if (!only || only.includes(name)) await attacks();
}
for (const secret of context.secrets) {
  const leaked = logLines.filter((line) => line.includes(secret)).length;
  await log.run('secrets in logs', `${secret === PROMPT_TEXT ? 'message text' : `a secret of ${secret.length} characters`} in ${logLines.length} log lines`, async () => ({
    status: 0,
    letThrough: leaked > 0,
    note: leaked ? `${leaked} lines` : undefined,
  }));
}
await host.close();
await emulator.close();

const summary = log.summary();
process.stdout.write(`\nfhirgate security suite, ${((Date.now() - startedAt) / 1000).toFixed(1)} s\n\n${log.print()}`);
if (args.json) writeFileSync(args.json, `${JSON.stringify({ ...summary, figures: log.figures, results: log.results }, null, 2)}\n`);
process.exit(summary.letThrough === 0 && summary.fiveHundreds === 0 ? 0 : 1);
