/**
 * Mutation testing (`npm run mutation`) of the code that must never break: the chat turn and its records, governance
 * and de-identification, device authentication and the GraphQL write guard, the store's policy-narrowed search and
 * write path. docs/reliability.md ("Mutation testing") has how to run it and the scores so far.
 *
 * Each module is tried against the tests that guard it (GUARDS below), not the whole suite: about 85 test files reach
 * any one of these modules through the hosts, each loads Medplum's definitions, and jest loads every selected file
 * for every mutant. `npm run mutation -- --mutate <file>` mutates that file and runs only its tests.
 */

/** Each mutated module (a path, or a path with a `:start-end` line range) and the test files that guard it. */
const GUARDS = {
  // The chat turn and its records: the steps that write the prompt and reply Communications, the reply journal.
  'plugin/chat/chat-completion.ts': ['test/chat-gateway.test.ts', 'test/store-outage.test.ts', 'test/idempotency.test.ts', 'test/caller-limits.test.ts', 'test/caller-scopes.test.ts', 'test/turn-admission.test.ts', 'test/observability.test.ts', 'test/chat-providers.test.ts', 'test/client-tools.test.ts', 'test/client-kept-history.test.ts', 'test/conversation-instructions.test.ts', 'test/side-request-labels.test.ts', 'test/turn-subjects.test.ts', 'test/patient-data-egress.test.ts', 'test/responses-api.test.ts', 'test/repository-operations.test.ts', 'test/budgets.test.ts', 'test/patient-context.test.ts', 'test/patient-tools.test.ts', 'test/crash-recovery.test.ts', 'test/patient-data-de-identify.test.ts', 'test/idempotency-instances.test.ts', 'test/graceful-shutdown.test.ts'],
  'plugin/chat/authenticate-caller.ts': ['plugin/chat/authenticate-caller.test.ts', 'test/chat-gateway.test.ts', 'test/refusals-on-the-standalone-host.test.ts'],
  'plugin/chat/record-prompt.ts': ['plugin/chat/record-prompt.test.ts', 'test/chat-gateway.test.ts', 'test/store-outage.test.ts', 'test/forged-records.test.ts'],
  'plugin/chat/chat-turn.ts': ['plugin/chat/chat-turn.test.ts', 'test/chat-gateway.test.ts', 'test/provider-resilience.test.ts', 'test/store-outage.test.ts'],
  'plugin/chat/deliver-json.ts': ['plugin/chat/deliver-json.test.ts', 'test/chat-gateway.test.ts', 'test/provider-resilience.test.ts'],
  'plugin/chat/deliver-stream.ts': ['plugin/chat/deliver-stream.test.ts', 'test/chat-transport.test.ts', 'test/stream-chunk-shapes.test.ts', 'test/provider-resilience.test.ts'],
  'plugin/chat/communication-builders.ts': ['plugin/chat/communication-builders.test.ts', 'plugin/chat/conversation.test.ts', 'plugin/chat/reply-records.test.ts', 'plugin/chat/recorded-messages.test.ts', 'test/chat-gateway.test.ts'],
  'plugin/chat/reply-records.ts': ['plugin/chat/reply-records.test.ts', 'plugin/chat/turn-registry.test.ts', 'test/store-outage.test.ts'],
  'plugin/chat/reply-journal.ts': ['plugin/chat/reply-journal.test.ts', 'plugin/chat/reply-journal-lines.test.ts', 'plugin/chat/reply-journal-files.test.ts', 'plugin/chat/journal-lease.test.ts', 'plugin/chat/reply-records.test.ts', 'test/crash-recovery.test.ts'],
  'plugin/chat/disclosure-audit.ts': ['plugin/chat/disclosure-audit.test.ts', 'test/patient-context.test.ts', 'test/patient-tools.test.ts'],
  'plugin/chat/fhir-tool-loop.ts': ['plugin/chat/fhir-tool-loop.test.ts', 'test/patient-tools.test.ts'],
  'plugin/chat/conversation-ownership.ts': ['plugin/chat/conversation-ownership.test.ts', 'test/conversation-ownership.test.ts'],
  'plugin/chat/agent-device.ts': ['plugin/chat/agent-device.test.ts', 'test/forged-records.test.ts'],
  'plugin/chat/write-permission.ts': ['plugin/chat/write-permission.test.ts', 'test/chat-gateway.test.ts', 'test/forged-records.test.ts'],

  // Governance: which model may see patient data, de-identification and its inverse, who may use which model.
  'plugin/governance/patient-data-egress.ts': ['plugin/governance/patient-data-egress.test.ts', 'test/patient-data-egress.test.ts'],
  'plugin/governance/patient-data-settings.ts': ['plugin/governance/patient-data-settings.test.ts', 'test/patient-data-egress.test.ts'],
  'plugin/governance/patient-data-record.ts': ['plugin/governance/patient-data-record.test.ts', 'test/patient-data-de-identify.test.ts'],
  'plugin/governance/de-identify-model.ts': ['plugin/governance/de-identify-model.test.ts', 'test/patient-data-de-identify.test.ts'],
  'plugin/governance/de-identify-text.ts': ['plugin/governance/de-identify-text.test.ts', 'plugin/governance/de-identify-model.test.ts', 'plugin/governance/de-identify-present.test.ts', 'plugin/governance/re-identify-stream.test.ts'],
  'plugin/governance/de-identify-terms.ts': ['plugin/governance/de-identify-terms.test.ts', 'plugin/governance/de-identify-text.test.ts', 'plugin/governance/de-identify-model.test.ts', 'test/patient-data-de-identify.test.ts'],
  'plugin/governance/de-identify-dates.ts': ['plugin/governance/de-identify-dates.test.ts', 'plugin/governance/de-identify-text.test.ts'],
  'plugin/governance/de-identify-present.ts': ['plugin/governance/de-identify-present.test.ts', 'plugin/governance/de-identify-text.test.ts'],
  'plugin/governance/re-identify-stream.ts': ['plugin/governance/re-identify-stream.test.ts', 'test/patient-data-de-identify.test.ts'],
  'plugin/governance/model-access.ts': ['plugin/governance/model-access.test.ts', 'test/model-access.test.ts', 'test/responses-governance.test.ts'],

  // Device authentication: the key check, the tokens, the exchange route, network and failed-attempt limits.
  'plugin/devices/device-keys.ts': ['plugin/devices/device-keys.test.ts', 'test/device-token.test.ts'],
  'plugin/devices/device-key-strength.ts': ['plugin/devices/device-key-strength.test.ts', 'plugin/devices/device-auth-config.test.ts', 'test/device-auth-start.test.ts'],
  'plugin/devices/device-tokens.ts': ['plugin/devices/device-tokens.test.ts', 'test/device-token.test.ts'],
  'plugin/devices/device-token-route.ts': ['test/device-token.test.ts', 'test/device-networks.test.ts', 'plugin/devices/refusal-audit.test.ts', 'test/device-request-log.test.ts'],
  'plugin/devices/device-networks.ts': ['plugin/devices/device-networks.test.ts', 'test/device-networks.test.ts'],
  'plugin/devices/failed-attempt-limiter.ts': ['plugin/devices/failed-attempt-limiter.test.ts', 'test/device-token.test.ts'],

  // The GraphQL write guard: what a device's document may name and write, and the route that authenticates it.
  'plugin/graphql/graphql-route.ts': ['plugin/graphql/graphql-route.test.ts', 'plugin/graphql/graphql-route-unprunable.test.ts', 'test/device-graphql.test.ts', 'test/device-graphql-limits.test.ts', 'test/device-networks.test.ts', 'test/device-patient-assignment.test.ts', 'test/device-request-log.test.ts'],
  'plugin/graphql/device-write-guard.ts': ['plugin/graphql/device-write-guard.test.ts', 'plugin/graphql/device-observation-rules.test.ts', 'test/device-graphql.test.ts', 'test/device-graphql-limits.test.ts', 'test/device-patient-assignment.test.ts'],
  'plugin/graphql/device-observation-rules.ts': ['plugin/graphql/device-observation-rules.test.ts', 'plugin/graphql/device-write-guard.test.ts', 'test/device-patient-assignment.test.ts'],
  'plugin/graphql/device-document-scope.ts': ['plugin/graphql/device-document-scope.test.ts', 'test/device-graphql.test.ts', 'test/device-graphql-limits.test.ts'],
  'plugin/graphql/device-mutation-budget.ts': ['plugin/graphql/device-mutation-budget.test.ts', 'test/device-graphql.test.ts', 'test/device-graphql-limits.test.ts'],
  'plugin/graphql/mutation-fields.ts': ['plugin/graphql/mutation-fields.test.ts', 'plugin/graphql/device-write-guard.test.ts', 'plugin/graphql/translate-document.test.ts'],

  // The store: the AccessPolicy's narrowing of a search, compiled to SQL, and the write path of the SQLite store.
  'plugin/hosts/standalone/store/search-plan.ts': ['plugin/hosts/standalone/store/search-plan.test.ts', 'plugin/hosts/standalone/store/sqlite-policy-search.test.ts', 'plugin/hosts/standalone/policy-narrowed-search.test.ts'],
  'plugin/hosts/standalone/store/filter-translation.ts': ['plugin/hosts/standalone/store/sqlite-search.test.ts', 'plugin/hosts/standalone/store/search-plan.test.ts', 'plugin/hosts/standalone/store/sqlite-policy-search.test.ts', 'plugin/hosts/standalone/policy-narrowed-search.test.ts'],
  // The write path only (create, update, patch, delete, the transaction and the write queue); the ranges follow the
  // file: move them when its methods move.
  'plugin/hosts/standalone/store/sqlite-repository.ts:187-204': sqliteWriteTests(),
  'plugin/hosts/standalone/store/sqlite-repository.ts:260-302': sqliteWriteTests(),
  'plugin/hosts/standalone/store/sqlite-repository.ts:365-550': sqliteWriteTests(),
};

function sqliteWriteTests() {
  return [
    'plugin/hosts/standalone/store/sqlite-repository.test.ts',
    'plugin/hosts/standalone/store/sqlite-write-refusals.test.ts',
    'plugin/hosts/standalone/store/sqlite-group-commit.test.ts',
    'plugin/hosts/standalone/store/sqlite-persistence.test.ts',
    'plugin/hosts/standalone/store/version-storage.test.ts',
  ];
}

/** The modules named after `--mutate` on the command line (one, or several comma-separated), else the whole scope. */
function modulesToMutate() {
  const index = process.argv.findIndex((argument) => argument === '--mutate' || argument === '-m');
  const inline = process.argv.find((argument) => argument.startsWith('--mutate='));
  const named = inline?.slice('--mutate='.length) ?? (index >= 0 ? process.argv[index + 1] : undefined);
  return named === undefined ? Object.keys(GUARDS) : named.split(',');
}

/** The guarding tests of the modules mutated in this run; a module outside GUARDS gets the test beside it. */
function guardingTests(modules) {
  const tests = new Set();
  for (const module of modules) {
    const path = module.replace(/:[\d:-]+$/, '');
    const named = Object.entries(GUARDS).filter(([key]) => key.replace(/:[\d:-]+$/, '') === path);
    const files = named.length > 0 ? named.flatMap(([, guards]) => guards) : [path.replace(/\.ts$/, '.test.ts')];
    for (const file of files) tests.add(`<rootDir>/${file}`);
  }
  return [...tests];
}

export default {
  $schema: './node_modules/@stryker-mutator/core/schema/stryker-schema.json',
  testRunner: 'jest',
  // The tests are ES modules (jest.config.js): jest needs Node's VM modules in the runner process too.
  testRunnerNodeArgs: ['--experimental-vm-modules'],
  jest: {
    projectType: 'custom',
    configFile: 'jest.config.js',
    // Only the guarding tests are test files for this run; findRelatedTests then picks, among them, those that
    // reach the mutated file.
    config: { testMatch: guardingTests(modulesToMutate()) },
    enableFindRelatedTests: true,
  },
  coverageAnalysis: 'perTest',
  mutate: Object.keys(GUARDS),
  // Each run keeps its results; the next run tests only the mutants of changed code and changed tests.
  incremental: true,
  incrementalFile: 'reports/stryker-incremental.json',
  concurrency: 1,
  // A busy machine (2 cores, shared) makes a test run's time vary: give a mutant that much more before calling it a
  // timeout.
  timeoutMS: 20000,
  dryRunTimeoutMinutes: 20,
  ignorePatterns: ['/data', '/dist', '/coverage', '/bench/results', '/docs/images', '/reports'],
  reporters: ['clear-text', 'progress', 'html', 'json'],
  htmlReporter: { fileName: 'reports/mutation/mutation.html' },
  jsonReporter: { fileName: 'reports/mutation/mutation.json' },
  tempDirName: '.stryker-tmp',
  cleanTempDir: true,
};
