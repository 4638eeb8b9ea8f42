/**
 * Turns scenario 12's measurements into its report section: each tool call's latency and answers per second, per
 * protocol era and concurrency, beside the same read on `/fhir/R4` (what the MCP layer adds at the median), and
 * the profiled run's CPU per call split by step.
 */
import type { ScenarioSection } from '../lib/section.ts';
import { formatNumber } from '../lib/statistics.ts';
import type { McpLoadResult } from './mcp-load.ts';
import { OTHER, STEPS, type WindowSplit } from './profile-split.ts';

/** One measured request at one concurrency. */
export interface LoadRow {
  readonly request: string;
  /** `/fhir/R4 (floor)` or `/mcp <era>`. */
  readonly route: string;
  readonly concurrency: number;
  readonly result: McpLoadResult;
}

/** One window of the profiled host: what ran, how many calls, where their CPU went. */
export interface ProfiledCall {
  readonly label: string;
  readonly calls: number;
  readonly errors: number;
  readonly split: WindowSplit;
}

/** What the section is built from. */
export interface McpMeasurements {
  readonly plan: { readonly concurrencies: readonly number[]; readonly warmupSeconds: number; readonly durationSeconds: number; readonly profileSeconds: number };
  readonly layout: string;
  readonly smoke: boolean;
  readonly rows: readonly LoadRow[];
  readonly profiled: readonly ProfiledCall[];
  /** Whether another tree (before a change) was measured beside this one, its rows marked "(before: <commit>)". */
  readonly compared: boolean;
}

/** The section "12. MCP server". */
export function buildMcpSection(measured: McpMeasurements): ScenarioSection {
  const floorOf = (row: LoadRow): LoadRow | undefined =>
    measured.rows.find((candidate) => candidate.route.endsWith('(floor)') && candidate.request === row.request && candidate.concurrency === row.concurrency);
  const rows = measured.rows.map((row) => {
    const floor = row.route.endsWith('(floor)') ? undefined : floorOf(row);
    return [
      row.request,
      row.route,
      row.concurrency,
      formatNumber(row.result.p50Ms),
      formatNumber(row.result.p95Ms),
      formatNumber(row.result.p99Ms),
      Math.round(row.result.requestsPerSecond),
      floor ? formatNumber(row.result.p50Ms - floor.result.p50Ms) : '—',
      row.result.errors,
    ];
  });
  const { plan } = measured;
  const perCall = (call: ProfiledCall, ms: number | undefined): string => {
    if (ms === undefined || call.calls === 0) return '—';
    return `${formatNumber((ms * 1000) / call.calls, 0)} µs (${formatNumber((100 * ms) / Math.max(call.split.busyMs, 1e-9), 0)} %)`;
  };
  const labels = [...STEPS.map((step) => step.label), OTHER].filter((label) => measured.profiled.some((call) => (call.split.steps[label] ?? 0) > 0));
  const profileRows = [
    ['host CPU per call (all steps)', ...measured.profiled.map((call) => (call.calls === 0 ? '—' : `${formatNumber((call.split.busyMs * 1000) / call.calls, 0)} µs`))],
    ...labels.map((label) => [label, ...measured.profiled.map((call) => perCall(call, call.split.steps[label]))]),
    ['calls in the window (errors)', ...measured.profiled.map((call) => `${call.calls} (${call.errors})`)],
  ];
  const firstErrors = measured.rows.filter((row) => row.result.firstError).map((row) => `${row.request} ${row.route} at ${row.concurrency}: ${row.result.firstError ?? ''}`);
  return {
    title: '12. MCP server',
    method:
      `Standalone host (${'`npm start`'}'s entry point) on a fresh SQLite store, ${measured.layout}; the demo project with ` +
      `AI_MCP_PATIENT_DATA=allow and a chart for Maria Lopez (a problem, a prescription, an allergy, three heart rates), Redis not used ` +
      `(sessions and the per-caller counter in the instance's memory; the limits raised so none answers 429). Every request carries Dr. Carter's ` +
      `token. Each tool's tools/call is replayed as the MCP SDK's own client sent it (2026-07-28: the per-request envelope; 2025-11-25: ` +
      `after initialize, with its Mcp-Session-Id), then the same read on /fhir/R4 with the same token (the floor; the summary has no single ` +
      `request), and tools/list (an MCP exchange that runs no tool and reads no store). A load process on the other core keeps N requests in flight (undici, keep-alive), ` +
      `${plan.warmupSeconds} s warm-up then ${plan.durationSeconds} s measured per row, one run each; latency to the answer's last byte. Every answer ` +
      `is checked: 200, and for MCP a JSON-RPC result that is no tool error. Each MCP call that answers with a patient's records first writes ` +
      `its disclosure AuditEvent (durable: SQLite WAL, group commit). "added" is the row's p50 minus the floor's at the same concurrency.` +
      `${measured.smoke ? ' SMOKE RUN: counts too small to quote.' : ''}`,
    table: { columns: ['request', 'route', 'clients', 'p50 ms', 'p95 ms', 'p99 ms', 'answers/s', 'added p50 ms', 'errors'], rows },
    tables: [
      {
        title:
          `**Where a call's CPU goes** (hosts started again under \`node --cpu-prof\`, the same run; each request ${plan.profileSeconds} s at 4 clients, ` +
          `one after the other; the host's samples of each window given to the first step on their stack, in the order of the rows):`,
        columns: ['step', ...measured.profiled.map((call) => call.label)],
        rows: profileRows,
      },
    ],
    targets: [],
    chart: {
      title: 'MCP server: answers/s at the highest concurrency',
      bars: measured.rows
        .filter((row) => row.concurrency === Math.max(...plan.concurrencies))
        .map((row) => ({ label: `${row.request} ${row.route}`, value: Math.round(row.result.requestsPerSecond), unit: '/s' })),
    },
    notes: [
      'A step is what its functions run while they are on the stack: work resumed after an await (the store finishing a read or a commit) shows ' +
        `under the function it resumed in, so it falls in "${OTHER}"; compare that row with the floor's, which does the same read.`,
      ...(measured.compared
        ? [
            'Rows marked "(before: <commit>)" are a host started from that checkout (the tree before the change this run measures), ' +
              'on the same core, run beside this tree\'s host request by request (the idle one waits), with the same chart and token.',
          ]
        : []),
      ...firstErrors.map((error) => `First error: ${error}`),
    ],
  };
}
