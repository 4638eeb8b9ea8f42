/**
 * The standalone host with fhirgate mounted (`fhirgate`, `npm start`; main.ts runs it), on a SQLite file under the
 * data folder, with the demo project loaded. Binds to loopback by default.
 *
 * Start-up refuses, in one line (a StartUpError), a start with no LLM provider outside the demo
 * (choose-llm-provider.ts), and a port it cannot listen on, before it touches the data folder,
 * and a data folder another host holds (data-folder-lock.ts). A start that fails after it took the folder puts
 * `host.json` back as it was; one that fails to listen (the port taken after the check) also closes what it
 * opened, its reply journal folder with it. The lock goes with the process.
 */
import { mkdirSync } from 'node:fs';
import { lockDataFolder } from './data-folder-lock.ts';
import { checkPortIsFree, describeListenFailure, type ListenAddress } from './listen-failure.ts';
import { readStandaloneConfig } from './standalone-config.ts';
import { createJsonLogger } from './logger.ts';
import { openStandaloneStore } from './open-store.ts';
import { createStandaloneHost, type StandaloneHost } from './create-standalone-host.ts';
import { readProjectFixture, seedProject } from './seed.ts';
import { DEMO_MODEL_ID, startDemoProvider } from './demo-provider.ts';
import { chooseLlmProvider } from './choose-llm-provider.ts';
import { DEMO_DEVICE, readStandaloneDeviceAuth } from './demo-devices.ts';
import { connectStandaloneRedis } from './redis-client.ts';
import { FhirRouter } from '@medplum/fhir-router';
import type { Project } from '@medplum/fhirtypes';
import { warmUpGraphqlSchema } from '../../graphql/execute-graphql.ts';
import { compactHeap } from './compact-heap.ts';
import { readGeneratedDateShiftKey, readGeneratedMetricsToken } from './secret-files.ts';
import { DEMO_CLINICIAN_EMAIL, DEMO_REVIEWER_EMAIL, giveDemoClinicianPassword, giveDemoReviewerPassword } from './demo-password.ts';
import { WEB_APP_PATH } from '../../web-app-route.ts';

// From the sources (`npm start`) the token command is an npm script; from the package or the image, a command.
const FROM_SOURCES = import.meta.url.endsWith('.ts');
const TOKEN_COMMAND = FROM_SOURCES ? 'npm run -s token' : 'fhirgate-token';
const TOKEN_ARGUMENTS = FROM_SOURCES ? ' -- ' : ' ';

const config = readStandaloneConfig();
// Before anything is opened: outside the demo, no provider is no start (an echo must never answer a clinician).
const llmChoice = chooseLlmProvider(process.env, { seedDemo: config.seedDemo });
const logger = createJsonLogger(config.logLevel);
const address: ListenAddress = { port: config.port, hostname: config.hostname, startCommand: FROM_SOURCES ? 'npm start' : 'fhirgate' };
await checkPortIsFree(address);
// Owner-only: the store holds signing keys, client secrets and PHI (the files inside are 0600 in any case).
mkdirSync(config.dataDir, { recursive: true, mode: 0o700 });
const dataFolder = lockDataFolder(config.dataDir, { shared: config.sharedDataDir });
// Recorded at once, so that a host refused the folder meanwhile can name this one.
dataFolder.recordHost({ issuer: config.baseUrl });
let started = false;
// A start that fails from here on leaves `host.json` as it found it (the lock goes with the process).
process.once('exit', () => {
  if (!started) {
    dataFolder.releaseAfterFailedStart();
  }
});
const store = openStandaloneStore(config.dataDir, { busyTimeoutMs: config.storeBusyTimeoutMs, cacheSizeMiB: config.storeCacheMiB });
const configuredLlm = llmChoice.kind === 'configured' ? llmChoice.config : undefined;
const demoProvider = llmChoice.kind === 'demo' ? await startDemoProvider() : undefined;
if (demoProvider) {
  logger.warn('No LLM provider configured: answering with the offline DEMO provider, which echoes prompts', {
    model: DEMO_MODEL_ID,
    chosenBy: llmChoice.kind === 'demo' ? llmChoice.chosenBy : undefined,
  });
}
const demoFixture = config.seedDemo ? await readProjectFixture() : undefined;
const demoProjectId = demoFixture?.entry?.find((entry) => entry.resource?.resourceType === 'Project')?.resource?.id;
const deviceAuth = readStandaloneDeviceAuth({
  configFile: config.deviceAuthFile,
  dataDir: config.dataDir,
  demoProjectId,
  defaultProjectId: demoProjectId ?? (await onlyProjectId(store)),
});
const redis = config.redisUrl ? connectStandaloneRedis(config.redisUrl, logger) : undefined;
const standalone = await createStandaloneHost({
  store,
  baseUrl: config.baseUrl,
  logger,
  redis,
  metrics: config.metrics ? { bearerToken: config.metricsToken ?? readGeneratedMetricsToken(config.dataDir) } : undefined,
  maxJsonBytes: config.maxJsonBytes,
  maxUnauthenticatedRequests: config.maxUnauthenticatedRequests,
  passwordChecks: { maxConcurrent: config.maxConcurrentPasswordChecks },
  signInLimits: config.signInLimits,
  // Built before listening (below), the whole schema is this thread's already: no worker to build a second one.
  graphqlWorker: config.graphqlWarmUp ? false : undefined,
  allowedOrigins: config.allowedOrigins,
  trustProxy: config.trustProxy,
  plugin: {
    maxUnauthenticatedRequests: config.maxUnauthenticatedRequests,
    llm: configuredLlm ?? demoProvider?.llm,
    device_auth: deviceAuth,
    shutdownGraceMs: config.shutdownGraceMs,
    replyJournalDir: config.journalDir,
    deIdentification: { dateShiftKey: config.dateShiftKey ?? readGeneratedDateShiftKey(config.dataDir) },
    redisKeyPrefix: config.redisKeyPrefix,
    reportRepositoryOperations: config.reportRepositoryOperations,
    chatLimits: { maxConcurrentStreams: config.maxConcurrentStreams, maxConcurrentTurns: config.maxConcurrentTurns, maxPreparingTurns: config.maxPreparingTurns },
    mcpLimits: { requestsPerMinute: config.mcpRequestsPerMinute },
    governance: { prices: config.modelPrices },
  },
});
// Devices' documents run on the partial engine's small schema; Medplum builds its whole GraphQL schema (seconds, and
// ~500 MB of memory) in the GraphQL worker when a request first needs it, or here with FHIRGATE_GRAPHQL_WARMUP=on.
if (config.graphqlWarmUp) {
  await warmUpGraphqlSchema(new FhirRouter(), store);
}
const demo = demoFixture ? await seedProject(store, demoFixture, { freshIds: false }) : undefined;
const demoPassword = demo ? await giveDemoClinicianPassword(store, config.dataDir) : undefined;
const reviewerPassword = demo ? await giveDemoReviewerPassword(store, config.dataDir) : undefined;
// Start-up's garbage (the parsed definition bundles, the schema build) would otherwise stay committed for good.
const heap = compactHeap();
logger.debug('start-up heap compacted', { committedBeforeBytes: heap.committedBeforeBytes, committedAfterBytes: heap.committedAfterBytes });
const url = await listenOrUndo(standalone);
// The token command signs for this host: it reads the issuer here, whatever PORT or base URL it was started with.
dataFolder.recordHost({ issuer: config.baseUrl, url });
started = true;

logger.info('fhirgate standalone host started', { url, dataDir: config.dataDir, demoProject: demo?.projectId });
if (demo) {
  process.stdout.write(
    [
      '',
      `fhirgate is listening on ${url}`,
      `  Web app:         ${url}${WEB_APP_PATH.slice(1)}/`,
      ...(demoPassword ? [`    sign in as Dr. Alice Carter: ${DEMO_CLINICIAN_EMAIL}, password ${demoPassword}`] : []),
      ...(reviewerPassword ? [`    sign in as Rosa Reyes, compliance officer (review console, ${url}${WEB_APP_PATH.slice(1)}/review): ${DEMO_REVIEWER_EMAIL}, password ${reviewerPassword}`] : []),
      `  FHIR API:        ${url}fhir/R4/`,
      `  Chat API:        ${url}v1/chat/completions   (model ${configuredLlm?.defaultModel ?? `${DEMO_MODEL_ID}: the offline DEMO provider, set AI_PROVIDER for a real one`})`,
      `  Demo project:    ${demo.projectId}   (send it as X-Project-ID)`,
      `  Access token for Dr. Alice Carter:  ${TOKEN_COMMAND}`,
      `  Client credentials of the demo integration:  ${TOKEN_COMMAND}${TOKEN_ARGUMENTS}--client`,
      `  Access token of the project's administrator (usage report, settings):  ${TOKEN_COMMAND}${TOKEN_ARGUMENTS}--admin`,
      ...(deviceAuth && !config.deviceAuthFile ? [`  Demo device ${DEMO_DEVICE.id}, its API key:  ${TOKEN_COMMAND}${TOKEN_ARGUMENTS}--device`] : []),
      ...(config.metrics && !config.metricsToken ? [`  Bearer token of ${url}metrics:  ${TOKEN_COMMAND}${TOKEN_ARGUMENTS}--metrics`] : []),
      '',
    ].join('\n')
  );
}

// SIGTERM or SIGINT: stop accepting, let chat turns finish within the grace period, stop the rest (their replies
// recorded as `stopped`), close the store and exit 0. A second signal, or a stop that hangs, exits at once.
const HARD_STOP_AFTER_GRACE_MS = 15_000;
let stopping = false;
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    if (stopping) {
      logger.warn('fhirgate standalone host stopped without draining', { signal });
      process.exit(1);
    }
    stopping = true;
    logger.info('fhirgate standalone host stopping', { signal, graceMs: config.shutdownGraceMs });
    setTimeout(() => {
      logger.error('fhirgate standalone host did not stop in time');
      process.exit(1);
    }, config.shutdownGraceMs + HARD_STOP_AFTER_GRACE_MS).unref();
    standalone
      .close()
      .then(() => demoProvider?.emulator.close())
      .then(() => redis?.quit())
      .then(() => store.close())
      .then(() => dataFolder.release())
      .then(() => process.exit(0))
      .catch((error: unknown) => {
        logger.error('Shutdown failed', { error: String(error) });
        process.exit(1);
      });
  });
}

/**
 * Listens; when that fails (the port was taken after the check), what this start opened is closed (the plugin's
 * empty journal folder goes with it) and the reason is one line.
 */
async function listenOrUndo(host: StandaloneHost): Promise<string> {
  try {
    return (await host.listen(config.port, config.hostname)).url;
  } catch (error) {
    await host.close({ graceMs: 0 });
    await demoProvider?.emulator.close();
    await redis?.quit();
    store.close();
    throw describeListenFailure(error, address) ?? error;
  }
}

/** The id of the store's one project; undefined when it has none or several. */
async function onlyProjectId(repo: typeof store): Promise<string | undefined> {
  const projects = await repo.searchResources<Project>({ resourceType: 'Project', count: 2 });
  return projects.length === 1 ? projects[0].id : undefined;
}
