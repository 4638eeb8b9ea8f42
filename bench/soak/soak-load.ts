/**
 * The soak's load, run as its own process: `users` clients of one practitioner (one token), each continuing a
 * conversation of its own (started by its first turn) as fast as the host answers, half of them streaming, some
 * about a care-team patient (the chart shared as a summary); and one device posting an Observation through
 * `/graphql` every `devicePeriodMs`. Reads a {@link SoakLoadPlan} (JSON) from argv[2], runs for its duration and
 * prints a {@link SoakLoadResult} (JSON) on stdout: every turn's and every post's end and outcome, per window.
 */
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { Pool } from 'undici';

/** What the load does. */
export interface SoakLoadPlan {
  readonly url: string;
  readonly projectId: string;
  /** The practitioner's access token. */
  readonly token: string;
  readonly users: number;
  /** Users (the first ones) whose turns stream. */
  readonly streamingUsers: number;
  /** Users (the last ones) whose turns are about `patientId`. */
  readonly patientUsers: number;
  readonly patientId: string;
  /** The device's credentials for the token exchange. */
  readonly device: { readonly device_id: string; readonly api_key: string };
  readonly devicePeriodMs: number;
  readonly durationSeconds: number;
  readonly windowSeconds: number;
}

/** One window's counts and latencies (ms, to the last byte). */
export interface SoakWindow {
  readonly startSeconds: number;
  readonly turns: number;
  readonly turnErrors: number;
  readonly latenciesMs: readonly number[];
  readonly observations: number;
  readonly observationErrors: number;
}

/** What the load saw. */
export interface SoakLoadResult {
  readonly windows: readonly SoakWindow[];
  /** Turns answered 200 (a stream: ended with `[DONE]`). */
  readonly turns: number;
  readonly turnErrors: number;
  /** Observations the device posted that `/graphql` answered with an id. */
  readonly observations: number;
  readonly observationErrors: number;
  readonly firstError?: string;
}

const planArgument = process.argv[2];
if (!planArgument) {
  throw new Error('usage: node bench/soak/soak-load.ts <plan JSON>');
}
const plan = JSON.parse(planArgument) as SoakLoadPlan;
const origin = new URL(plan.url).origin;
const pool = new Pool(origin, { connections: plan.users + 2, pipelining: 1, keepAliveTimeout: 60_000, bodyTimeout: 120_000, headersTimeout: 120_000 });
const started = performance.now();
const endsAt = started + plan.durationSeconds * 1000;
const windowCount = Math.ceil(plan.durationSeconds / plan.windowSeconds);
const windows = Array.from({ length: windowCount }, (_, index) => ({
  startSeconds: index * plan.windowSeconds,
  turns: 0,
  turnErrors: 0,
  latenciesMs: [] as number[],
  observations: 0,
  observationErrors: 0,
}));
let firstError: string | undefined;
// Over the whole run: a turn that ends after the last window still counts here (its records are stored).
const totals = { turns: 0, turnErrors: 0, observations: 0, observationErrors: 0 };

/** The window an event that ended now belongs to; undefined after the last one. */
function windowNow(): (typeof windows)[number] | undefined {
  return windows[Math.floor((performance.now() - started) / 1000 / plan.windowSeconds)];
}

function recordError(error: unknown): void {
  firstError ??= String(error).slice(0, 500);
}

async function user(index: number): Promise<void> {
  const stream = index < plan.streamingUsers;
  const aboutPatient = index >= plan.users - plan.patientUsers;
  let conversationId: string | undefined;
  for (let turn = 0; performance.now() < endsAt; turn++) {
    const body = {
      stream,
      conversation_id: conversationId,
      ...(aboutPatient ? { patient_id: plan.patientId } : {}),
      messages: [{ role: 'user', content: `Soak user ${index}, turn ${turn}: what should I check next?` }],
    };
    const turnStarted = performance.now();
    try {
      const response = await pool.request({
        path: '/v1/chat/completions',
        method: 'POST',
        headers: { authorization: `Bearer ${plan.token}`, 'x-project-id': plan.projectId, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      const text = await response.body.text();
      if (response.statusCode !== 200) throw new Error(`turn answered ${response.statusCode}: ${text.slice(0, 300)}`);
      if (stream && !text.includes('[DONE]')) throw new Error(`stream ended without [DONE]: ${text.slice(-300)}`);
      conversationId ??= stream ? /"conversation_id":"([^"]+)"/.exec(text)?.[1] : (JSON.parse(text) as { conversation_id?: string }).conversation_id;
      totals.turns++;
      const window = windowNow();
      if (window) {
        window.turns++;
        window.latenciesMs.push(performance.now() - turnStarted);
      }
    } catch (error) {
      recordError(error);
      totals.turnErrors++;
      const window = windowNow();
      if (window) window.turnErrors++;
      await sleep(100);
    }
  }
}

async function deviceToken(): Promise<string> {
  const response = await pool.request({
    path: '/account/api/token/device/',
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(plan.device),
  });
  const text = await response.body.text();
  if (response.statusCode !== 200) throw new Error(`device token answered ${response.statusCode}: ${text.slice(0, 300)}`);
  return (JSON.parse(text) as { access: string }).access;
}

const MUTATION =
  'mutation CreateObservation($input: ObservationInput!) { ObservationCreate(resource: $input) { id } }';

async function device(): Promise<void> {
  const token = await deviceToken();
  // One post every period, as a monitor sends its readings: a late answer delays the next post, never bunches them.
  for (let index = 0, due = started; performance.now() < endsAt; index++, due = Math.max(due + plan.devicePeriodMs, performance.now())) {
    await sleep(Math.max(0, due - performance.now()));
    if (performance.now() >= endsAt) break;
    const input = {
      status: 'final',
      code: { coding: [{ system: 'http://loinc.org', code: '8867-4' }] },
      valueQuantity: { value: 60 + (index % 40), unit: 'beats/minute' },
      device: { identifier: { system: 'urn:fhirgate:demo:device', value: plan.device.device_id } },
    };
    try {
      const response = await pool.request({
        path: '/graphql',
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ query: MUTATION, variables: { input } }),
      });
      const result = (await response.body.json()) as { data?: { ObservationCreate?: { id?: string } }; errors?: unknown };
      if (response.statusCode !== 200 || !result.data?.ObservationCreate?.id) throw new Error(`/graphql answered ${response.statusCode}: ${JSON.stringify(result).slice(0, 300)}`);
      totals.observations++;
      const window = windowNow();
      if (window) window.observations++;
    } catch (error) {
      recordError(error);
      totals.observationErrors++;
      const window = windowNow();
      if (window) window.observationErrors++;
    }
  }
}

process.stderr.write('soak load started\n');
await Promise.all([...Array.from({ length: plan.users }, (_, index) => user(index)), device()]);
await pool.close();
const result: SoakLoadResult = { windows, ...totals, firstError };
process.stdout.write(`${JSON.stringify(result)}\n`);
