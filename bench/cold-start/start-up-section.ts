/** The report's start-up section from the cold starts' measurements: medians and worst, and target 5. */
import type { ScenarioSection } from '../lib/section.ts';
import { formatNumber, median } from '../lib/statistics.ts';
import type { StartUpRun } from './start-up-run.ts';

/** Target 5: the host `npm start` runs, idle after start-up. */
const IDLE_RESIDENT_TARGET_MEGABYTES = 250;
/** Target 5: its first `/graphql` answer from a cold start. */
const FIRST_GRAPHQL_TARGET_MS = 2000;

/** The section "0. Start-up and the first /graphql". */
export function buildStartUpSection(runs: readonly StartUpRun[], options: { readonly method: string; readonly moreMutations: number; readonly smoke: boolean }): ScenarioSection {
  const row = (label: string, pick: (run: StartUpRun) => number, decimals: number): (string | number)[] => {
    const values = runs.map(pick);
    return [label, formatNumber(median(values), decimals), formatNumber(Math.max(...values), decimals), values.map((value) => formatNumber(value, decimals)).join(' / ')];
  };
  const idleWorst = Math.max(...runs.map((run) => run.idleResidentMegabytes));
  const firstGraphqlWorst = Math.max(...runs.map((run) => run.firstGraphqlMs));
  return {
    title: '0. Start-up and the first /graphql',
    method: `${options.method}${options.smoke ? ' SMOKE RUN: one start, numbers not meaningful.' : ''}`,
    table: {
      columns: ['measure', 'median', 'worst', 'each start'],
      rows: [
        row('start-up to listening, s', (run) => run.startUpMs / 1000, 2),
        row('RSS idle after start-up, MB', (run) => run.idleResidentMegabytes, 0),
        row('chat turn before any /graphql, p50 ms', (run) => run.chatBeforeP50Ms, 1),
        row('first device key exchange, ms', (run) => run.firstTokenExchangeMs, 0),
        row('first /graphql ObservationCreate, ms', (run) => run.firstGraphqlMs, 0),
        row('slowest chat turn during it, ms', (run) => run.chatDuringFirstGraphqlMaxMs, 0),
        row('RSS after the first /graphql, MB', (run) => run.afterFirstGraphqlResidentMegabytes, 0),
        row(`RSS after ${options.moreMutations} more device mutations, MB`, (run) => run.afterMoreMutationsResidentMegabytes, 0),
        row("first request needing Medplum's whole schema (/fhir/R4/$graphql), ms", (run) => run.firstMedplumGraphqlMs, 0),
        row('RSS after it, MB', (run) => run.afterMedplumGraphqlResidentMegabytes, 0),
        row('RSS of its GraphQL worker process then, MB', (run) => run.afterMedplumGraphqlWorkerResidentMegabytes, 0),
      ],
    },
    targets: [
      {
        description: `RSS of the host as \`npm start\` runs it, idle after start-up ≤ ${IDLE_RESIDENT_TARGET_MEGABYTES} MB (worst start)`,
        measured: `${formatNumber(idleWorst, 0)} MB`,
        target: `≤ ${IDLE_RESIDENT_TARGET_MEGABYTES} MB`,
        met: idleWorst <= IDLE_RESIDENT_TARGET_MEGABYTES,
      },
      {
        description: `its first /graphql request answered within ${FIRST_GRAPHQL_TARGET_MS / 1000} s (worst start)`,
        measured: `${formatNumber(firstGraphqlWorst, 0)} ms`,
        target: `≤ ${FIRST_GRAPHQL_TARGET_MS} ms`,
        met: firstGraphqlWorst <= FIRST_GRAPHQL_TARGET_MS,
      },
    ],
    notes: [
      `Chat turns that overlapped the first /graphql: ${runs.map((run) => run.chatTurnsDuringFirstGraphql).join(' / ')} per start.`,
    ],
  };
}
