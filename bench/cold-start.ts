#!/usr/bin/env node
/**
 * Start-up: the standalone host as `npm start` runs it, started cold several times (`cold-start/start-up-run.ts`):
 * its resident memory once idle, its first `/graphql` answer, chat alongside it, and memory once devices post.
 *   node bench/cold-start.ts --out <file.json> [--smoke]
 * The host runs on the last core (taskset), this script and its requests on core 0.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { planCoreLayout } from './lib/processes.ts';
import { buildStartUpSection } from './cold-start/start-up-section.ts';
import { measureColdStart, type StartUpRun } from './cold-start/start-up-run.ts';

const { values } = parseArgs({ options: { out: { type: 'string' }, smoke: { type: 'boolean', default: false } } });
if (!values.out) {
  throw new Error('usage: node bench/cold-start.ts --out <file.json> [--smoke]');
}
const outFile = resolve(values.out);
// The host and the token command are started by path from the repository's root.
process.chdir(resolve(dirname(fileURLToPath(import.meta.url)), '..'));

const plan = values.smoke ? { repetitions: 1, moreMutations: 20 } : { repetitions: 3, moreMutations: 100 };
const layout = planCoreLayout();
const runs: StartUpRun[] = [];
for (let repetition = 0; repetition < plan.repetitions; repetition += 1) {
  runs.push(await measureColdStart({ moreMutations: plan.moreMutations, core: layout.contenderCore }));
  process.stderr.write(`cold start ${repetition + 1}: ${JSON.stringify(runs.at(-1))}\n`);
}
const section = buildStartUpSection(runs, {
  method:
    `The standalone host started ${plan.repetitions} time(s) as \`npm start\` starts it (its \`#!\` line's Node flags, the demo project and ` +
    `device, the offline demo provider), each on a fresh data folder; ${layout.description}. Start-up: from the process's start to its ` +
    '"fhirgate standalone host started" line. Idle RSS: VmRSS 2 s later, before any request. Then 10 chat turns (JSON, the demo ' +
    "practitioner), the demo device's key exchanged, and the process's first `/graphql` (the spec's `ObservationCreate`) while chat " +
    'turns run one after another: its time, and the slowest chat turn that overlapped it. VmRSS 1 s after it, then after ' +
    `${plan.moreMutations} more mutations (one after another, within the demo device's rate limit of 10 per second). Last, the same Observation through Medplum's own \`/fhir/R4/$graphql\` ` +
    "(the demo integration's token), the first request that needs Medplum's whole GraphQL schema, which the host builds in its " +
    'GraphQL worker process: VmRSS of the host and of that process 1 s after it.',
  moreMutations: plan.moreMutations,
  smoke: values.smoke ?? false,
});
mkdirSync(dirname(outFile), { recursive: true });
writeFileSync(outFile, `${JSON.stringify(section, null, 2)}\n`);
process.stdout.write(`${section.title}: written to ${outFile}\n`);
