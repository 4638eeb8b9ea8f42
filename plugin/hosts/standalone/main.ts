/**
 * `npm start`: the standalone host with fhirgate mounted, on a SQLite file under the data folder, with the demo
 * project loaded. Binds to loopback by default.
 */
import { mkdirSync } from 'node:fs';
import { readStandaloneConfig } from './standalone-config.ts';
import { createJsonLogger } from './logger.ts';
import { openStandaloneStore } from './open-store.ts';
import { createStandaloneHost } from './create-standalone-host.ts';
import { readProjectFixture, seedProject } from './seed.ts';
import { DEMO_MODEL_ID, startDemoProvider } from './demo-provider.ts';
import { readProviderConfigFromEnvironment } from '../../llm/provider-config.ts';
import { DEMO_DEVICE, readStandaloneDeviceAuth } from './demo-devices.ts';
import { Redis } from 'ioredis';
import { FhirRouter } from '@medplum/fhir-router';
import { warmUpGraphqlSchema } from '../../graphql/execute-graphql.ts';

const config = readStandaloneConfig();
const logger = createJsonLogger(config.logLevel);
mkdirSync(config.dataDir, { recursive: true });
const store = openStandaloneStore(config.dataDir);
const configuredLlm = readProviderConfigFromEnvironment(process.env);
const demoProvider = configuredLlm ? undefined : await startDemoProvider();
if (demoProvider) {
  logger.warn('No LLM provider configured (AI_PROVIDER unset): answering with the offline DEMO provider, which echoes prompts', {
    model: DEMO_MODEL_ID,
  });
}
const demoFixture = config.seedDemo ? await readProjectFixture() : undefined;
const deviceAuth = readStandaloneDeviceAuth({
  configFile: config.deviceAuthFile,
  dataDir: config.dataDir,
  demoProjectId: demoFixture?.entry?.find((entry) => entry.resource?.resourceType === 'Project')?.resource?.id,
});
const redis = config.redisUrl ? new Redis(config.redisUrl, { maxRetriesPerRequest: 1 }) : undefined;
const standalone = await createStandaloneHost({
  store,
  baseUrl: config.baseUrl,
  logger,
  redis,
  plugin: { llm: configuredLlm ?? demoProvider?.llm, device_auth: deviceAuth },
});
// Medplum builds its GraphQL schema on first use; pay for it before the first device waits for it.
await warmUpGraphqlSchema(new FhirRouter(), store);
const demo = demoFixture ? await seedProject(store, demoFixture, { freshIds: false }) : undefined;
const { url } = await standalone.listen(config.port, config.hostname);

logger.info('fhirgate standalone host started', { url, dataDir: config.dataDir, demoProject: demo?.projectId });
if (demo) {
  process.stdout.write(
    [
      '',
      `fhirgate is listening on ${url}`,
      `  FHIR API:        ${url}fhir/R4/`,
      `  Chat API:        ${url}v1/chat/completions   (model ${configuredLlm?.defaultModel ?? `${DEMO_MODEL_ID}: the offline DEMO provider, set AI_PROVIDER for a real one`})`,
      `  Demo project:    ${demo.projectId}   (send it as X-Project-ID)`,
      '  Access token for Dr. Alice Carter:  npm run -s token',
      '  Client credentials of the demo integration:  npm run -s token -- --client',
      ...(deviceAuth && !config.deviceAuthFile ? [`  Demo device ${DEMO_DEVICE.id}, its API key:  npm run -s token -- --device`] : []),
      '',
    ].join('\n')
  );
}

let stopping = false;
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    if (stopping) {
      return;
    }
    stopping = true;
    logger.info('fhirgate standalone host stopping', { signal });
    standalone
      .close()
      .then(() => demoProvider?.emulator.close())
      .then(() => redis?.quit())
      .then(() => store.close())
      .then(() => process.exit(0))
      .catch((error: unknown) => {
        logger.error('Shutdown failed', { error: String(error) });
        process.exit(1);
      });
  });
}
