/** Section 6 of the report from the devices benchmark's medians: the table, the target, the notes. */
import type { ScenarioSection } from '../lib/section.ts';
import { formatNumber, formatRatio } from '../lib/statistics.ts';
import { OPTIMISATION_NOTES } from './optimisation-notes.ts';
import type { EngineOnlyResult } from './engine-only.ts';
import type { ResultComparison } from './observation-mutations.ts';

/** The medians of one measured endpoint. */
export interface EndpointSummary {
  readonly requestsPerSecond: number;
  readonly latencyP50Ms: number;
  readonly latencyP99Ms: number;
  /** Transport errors, timeouts and non-2xx answers over all repetitions. */
  readonly errors: number;
  /** Requests per second of each repetition. */
  readonly runs: readonly number[];
}

/** What the benchmark measured. */
export interface DevicesMeasurements {
  readonly method: string;
  readonly tokens: EndpointSummary;
  readonly fhirgate: EndpointSummary;
  readonly medplum: EndpointSummary;
  readonly comparison: ResultComparison;
  readonly engineOnly: EngineOnlyResult;
}

const TARGET_RATIO = 10;

/** The report section "6. Devices". */
export function buildDevicesSection(measured: DevicesMeasurements): ScenarioSection {
  const ratio = measured.fhirgate.requestsPerSecond / measured.medplum.requestsPerSecond;
  const engine = measured.engineOnly;
  const engineRatio = engine.medplumMsPerRequest / engine.fhirgateMsPerRequest;
  const engineRow = (label: string, msPerRequest: number): (string | number)[] => [label, formatNumber(1000 / msPerRequest, 0), formatNumber(msPerRequest, 2), '', 0, ''];
  const row = (label: string, summary: EndpointSummary): (string | number)[] => [
    label,
    formatNumber(summary.requestsPerSecond, 0),
    formatNumber(summary.latencyP50Ms, 1),
    formatNumber(summary.latencyP99Ms, 1),
    summary.errors,
    summary.runs.map((value) => formatNumber(value, 0)).join(' / '),
  ];
  return {
    title: '6. Devices',
    method: measured.method,
    table: {
      // For the two "engine alone" rows, p50 is the mean time per request (one request at a time).
      columns: ['endpoint', 'requests/s (median)', 'p50 ms', 'p99 ms', 'errors', 'requests/s per repetition'],
      rows: [
        row('POST /account/api/token/device/ (token issuances)', measured.tokens),
        row("POST /graphql: ObservationCreate, spec dialect (fhirgate)", measured.fhirgate),
        row("POST /fhir/R4/$graphql: ObservationCreate, Medplum dialect (Medplum's handler)", measured.medplum),
        engineRow('engine alone, in-process, in-memory repository: fhirgate (translate, guard, fast path)', engine.fhirgateMsPerRequest),
        engineRow("engine alone, in-process, in-memory repository: Medplum's $graphql handler", engine.medplumMsPerRequest),
      ],
    },
    targets: [
      {
        description: "repeated device ObservationCreate: fhirgate's /graphql ≥ 10 × Medplum's /fhir/R4/$graphql, same results",
        measured: `${formatRatio(measured.fhirgate.requestsPerSecond, measured.medplum.requestsPerSecond)} (results ${measured.comparison.identical ? 'identical' : 'DIFFERENT'})`,
        target: `≥ ${TARGET_RATIO} ×`,
        met: ratio >= TARGET_RATIO && measured.comparison.identical,
      },
      {
        description: "the same, GraphQL engines alone (no HTTP, no SQLite): fhirgate's pipeline ≥ 10 × Medplum's $graphql handler",
        measured: `${formatNumber(engineRatio, 2)} × (${formatNumber(engine.fhirgateMsPerRequest, 2)} ms vs ${formatNumber(engine.medplumMsPerRequest, 2)} ms per request)`,
        target: `≥ ${TARGET_RATIO} ×`,
        met: engineRatio >= TARGET_RATIO,
      },
    ],
    chart: {
      title: 'ObservationCreate requests/s',
      bars: [
        { label: 'fhirgate /graphql', value: Math.round(measured.fhirgate.requestsPerSecond), unit: 'requests/s' },
        { label: 'Medplum /fhir/R4/$graphql', value: Math.round(measured.medplum.requestsPerSecond), unit: 'requests/s' },
      ],
    },
    notes: [
      `Identical results: ${measured.comparison.detail}.`,
      'Token issuances include what the spec asks of each: the key check (SHA-256, constant time), the Device lookup, the AuditEvent written before the token is handed out, and signing.',
      ...OPTIMISATION_NOTES,
    ],
  };
}
