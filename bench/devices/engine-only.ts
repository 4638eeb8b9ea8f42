/**
 * The GraphQL engines alone, in one process (the orchestrator pins it to the contender's core), no HTTP and no
 * SQLite: what a device's `ObservationCreate` costs in fhirgate's `/graphql` pipeline (translation, the device
 * guard, then the fast path) and in Medplum's `$graphql` handler (the same mutation in Medplum's dialect), on an
 * in-memory repository. Isolates what `plugin/graphql` controls from the store's cost per write.
 * Prints one JSON object: milliseconds per request, the median of the repetitions, for each engine.
 */
import { FhirRouter, MemoryRepository, makeSimpleRequest } from '@medplum/fhir-router';
import { guardDeviceWrites } from '../../plugin/graphql/device-write-guard.ts';
import { executeGraphql, warmUpGraphqlSchema } from '../../plugin/graphql/execute-graphql.ts';
import { FastGraphqlPath } from '../../plugin/graphql/fast-graphql-path.ts';
import { DocumentTranslator } from '../../plugin/graphql/translate-document.ts';
import { loadFhirDefinitions } from '../../plugin/hosts/standalone/fhir-definitions.ts';
import { median } from '../lib/statistics.ts';
import { DEMO_DEVICE_ID, DEMO_DEVICE_RESOURCE_ID, DEMO_IDENTIFIER_SYSTEM } from './device-host.ts';
import { medplumBody, specBody } from './observation-mutations.ts';

/** What this process prints. */
export interface EngineOnlyResult {
  readonly fhirgateMsPerRequest: number;
  readonly medplumMsPerRequest: number;
  readonly requests: number;
  readonly repetitions: number;
}

const requests = Number(process.argv[2] ?? 500);
const repetitions = 3;
loadFhirDefinitions();
const router = new FhirRouter();
const repo = new MemoryRepository();
await warmUpGraphqlSchema(router, repo);
const fastPath = new FastGraphqlPath(router);
const translator = new DocumentTranslator();
const device = { deviceId: DEMO_DEVICE_ID, deviceResourceId: DEMO_DEVICE_RESOURCE_ID, identifierSystem: DEMO_IDENTIFIER_SYSTEM };
const spec = JSON.parse(specBody()) as { query: string; variables: Record<string, unknown> };
const medplum = JSON.parse(medplumBody()) as { query: string; variables: Record<string, unknown> };

async function fhirgateOnce(): Promise<void> {
  const response = await executeGraphql(router, repo, guardDeviceWrites(translator.translate(spec), device), fastPath);
  if (response.errors) throw new Error(JSON.stringify(response.errors));
}

async function medplumOnce(): Promise<void> {
  const [outcome] = await router.handleRequest(makeSimpleRequest('POST', '$graphql', medplum), repo);
  if (outcome.issue?.[0]?.severity !== 'information') throw new Error(JSON.stringify(outcome));
}

async function msPerRequest(once: () => Promise<void>, count: number): Promise<number> {
  const started = performance.now();
  for (let index = 0; index < count; index += 1) {
    await once();
  }
  return (performance.now() - started) / count;
}

const timings = { fhirgate: [] as number[], medplum: [] as number[] };
// Warm-up: the JIT, and the fast path's first (validating) run of the document.
await msPerRequest(fhirgateOnce, Math.ceil(requests / 5));
await msPerRequest(medplumOnce, Math.ceil(requests / 20));
for (let repetition = 0; repetition < repetitions; repetition += 1) {
  timings.fhirgate.push(await msPerRequest(fhirgateOnce, requests));
  // Medplum's handler is an order of magnitude slower: fewer requests measure it as precisely.
  timings.medplum.push(await msPerRequest(medplumOnce, Math.ceil(requests / 10)));
}
const result: EngineOnlyResult = {
  fhirgateMsPerRequest: median(timings.fhirgate),
  medplumMsPerRequest: median(timings.medplum),
  requests,
  repetitions,
};
process.stdout.write(`${JSON.stringify(result)}\n`);
