/**
 * fhirgate in the standalone host with everything on, as `npm start` runs it: a Medplum-format RS256 token checked
 * against its Login and membership, the demo practitioner's AccessPolicy, the patient check, the patient context
 * the API gives by default (the chart summary: a chart read with the caller's permissions and a disclosure AuditEvent
 * per turn), prompt and reply stored as Communications in SQLite (WAL, synchronous=FULL: durable), and every
 * measured request continuing a conversation, so it loads the conversation's history. It logs as `npm start` does
 * (LOG_LEVEL unset: info, one JSON line per request), to a file (host-log.ts). Every scenario runs this one host
 * (its `#!` line's flags, `/graphql` served). What differs from `npm start`: the emulator as its provider, the
 * per-caller concurrency limits raised (one caller sends every request), and the repository operations reported.
 */
import { execFile, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { MODEL, PROMPT, type Contender } from './contender.ts';
import { findFreePort, waitUntilAnswering } from '../lib/free-port.ts';
import { openHostLog } from '../lib/host-log.ts';
import { standaloneHostArgs, startNodeProcess, stopProcess } from '../lib/processes.ts';

const run = promisify(execFile);
const DEMO_PROJECT = 'a1f0c0de-0000-4000-8000-000000000001';
/** Maria Lopez, in Dr. Carter's care team: the AccessPolicy lets her chat about this patient. */
const DEMO_PATIENT = 'a1f0c0de-0000-4000-8000-000000000301';
const ISSUER = 'http://fhirgate.bench.test/';
/** Earlier turns of each prepared conversation, so each measured request sends history to the model. */
const EARLIER_TURNS = 3;
const PREPARE_CONCURRENCY = 8;

/** How the bench's host differs from `npm start`, for the report (bench/README.md says the same). */
export const FHIRGATE_HOST_DIFFERENCES =
  "as `npm start` runs it (log level info, a line per request, to a file; the default patient context, the chart summary, on every turn about a patient), except: the emulator as its provider, cleared for patient data; the per-caller limits raised to 2000 (one caller sends everything); `FHIRGATE_REPORT_REPOSITORY_OPERATIONS=on`; `--import` of bench/profile/profile-on-signal.ts, a SIGUSR2 handler that profiles only during scenario 14";

export interface FhirgateOptions {
  readonly emulatorUrl: string;
  readonly core: number | undefined;
  /**
   * How many conversations the measured requests rotate through. Each request adds a turn, so more conversations
   * keep each one nearer its start: the history sent stays within the 50-message cap for most of the run.
   */
  readonly conversations: number;
  /** Where fhirgate's fresh data directory is made (default: the OS temp dir); e.g. /dev/shm to take fsync out. */
  readonly dataRoot?: string;
  /** Extra `node` flags, e.g. `--cpu-prof` for profiling. */
  readonly nodeFlags?: readonly string[];
}

/** The fhirgate contender, and what scenario 8 needs from it. */
export interface FhirgateContender extends Contender {
  /** The demo patient the measured turns are about (in the practitioner's care team). */
  readonly patientId: string;
  /** The file the host's log lines go to while it runs. */
  readonly hostLog: string;
  /**
   * Turns with `patient_context: "none"`: no chart summary and no disclosure AuditEvent, so a turn does what the
   * floor does (the history page, two records) plus fhirgate's own checks (scenario 14). They continue conversations
   * of their own, as many, begun without the chart: a history page of theirs holds only such turns, as the floor's
   * holds only its own, not replies that carry a chart summary.
   */
  bodiesWithoutChart(stream: boolean): readonly string[];
}

/** Whether the contender is the fhirgate host. */
export function isFhirgateContender(contender: Contender): contender is FhirgateContender {
  return contender.name === 'fhirgate' && 'patientId' in contender;
}

/** Starts fhirgate on a fresh data directory and prepares its conversations. */
export async function startFhirgate(options: FhirgateOptions): Promise<FhirgateContender> {
  const dataDir = await mkdtemp(join(options.dataRoot ?? tmpdir(), 'fhirgate-bench-'));
  const host = await startHost(options, dataDir);
  const conversationIds = await prepareConversations(host, options.conversations, 'summary');
  const conversationIdsWithoutChart = await prepareConversations(host, options.conversations, 'none');
  return {
    name: 'fhirgate',
    chatUrl: host.chatUrl,
    headers: host.headers,
    pid: host.child.pid,
    bodies: (stream) =>
      conversationIds.map((conversationId) =>
        // No `patient_context`: the default (the chart summary), as a client that names a patient gets it.
        JSON.stringify({ stream, patient_id: DEMO_PATIENT, conversation_id: conversationId, messages: [{ role: 'user', content: PROMPT }] }),
      ),
    bodiesWithoutChart: (stream) =>
      conversationIdsWithoutChart.map((conversationId) =>
        JSON.stringify({ stream, patient_id: DEMO_PATIENT, patient_context: 'none', conversation_id: conversationId, messages: [{ role: 'user', content: PROMPT }] }),
      ),
    conversations: conversationIds.length,
    patientId: DEMO_PATIENT,
    hostLog: host.logFile,
    stop: async () => {
      await stopProcess(host.child, 15_000);
      await rm(dataDir, { recursive: true, force: true });
      host.removeLog();
    },
  };
}

interface RunningHost {
  readonly baseUrl: string;
  readonly chatUrl: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly child: ChildProcess;
  readonly logFile: string;
  readonly removeLog: () => void;
}

async function startHost(options: FhirgateOptions, dataDir: string): Promise<RunningHost> {
  const port = await findFreePort();
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    // The bench picks the port and polls the health check (the start-up line is in the log file).
    PORT: String(port),
    HOST: '127.0.0.1',
    FHIRGATE_DATA_DIR: dataDir,
    FHIRGATE_BASE_URL: ISSUER,
    AI_PROVIDER: 'openai-compatible',
    AI_API_BASE: `${options.emulatorUrl}/v1`,
    AI_API_KEY: 'bench',
    AI_MODEL: MODEL,
    // The emulator answers on loopback: cleared for patient data (the scenarios' turns name a patient).
    AI_PATIENT_DATA_MODELS: '*',
    // Scenario 4 opens 1,000 streams as one caller, and scenario 2 sends 32 requests at a time as one: the per-caller
    // limits would refuse most of them.
    FHIRGATE_MAX_CONCURRENT_STREAMS: '2000',
    FHIRGATE_MAX_CONCURRENT_TURNS: '2000',
    // Non-streaming answers say what their turn asked of the store (scenario 8 reads it).
    FHIRGATE_REPORT_REPOSITORY_OPERATIONS: 'on',
  };
  // npm start's level: whatever the shell running the bench has set does not apply.
  delete env.LOG_LEVEL;
  const log = openHostLog(`${dataDir}.log`);
  const child = startNodeProcess(standaloneHostArgs(options.nodeFlags), { core: options.core, env, stdio: log.stdio });
  log.started();
  child.stdout?.resume();
  const baseUrl = `http://127.0.0.1:${port}`;
  await waitUntilAnswering(`${baseUrl}/healthcheck`, 120_000, () => child.exitCode !== null, () => log.tail());
  const token = (await run(process.execPath, ['plugin/hosts/standalone/print-token.ts'], { env })).stdout.trim();
  const headers = {
    'content-type': 'application/json',
    authorization: `Bearer ${token}`,
    'x-project-id': DEMO_PROJECT,
  };
  return { baseUrl, chatUrl: `${baseUrl}/v1/chat/completions`, headers, child, logFile: log.path, removeLog: log.remove };
}

/** `count` conversations prepared a few at a time: preparing is not measured, only start-up time. */
async function prepareConversations(host: RunningHost, count: number, patientContext: PatientContext): Promise<string[]> {
  const conversationIds: string[] = [];
  while (conversationIds.length < count) {
    const batch = Math.min(PREPARE_CONCURRENCY, count - conversationIds.length);
    conversationIds.push(...(await Promise.all(Array.from({ length: batch }, () => prepareConversation(host.chatUrl, host.headers, patientContext)))));
  }
  return conversationIds;
}

/** The chart summary (the default), or none. */
type PatientContext = 'summary' | 'none';

/** A conversation about the demo patient with a few earlier turns; returns its id. */
async function prepareConversation(chatUrl: string, headers: Record<string, string>, patientContext: PatientContext): Promise<string> {
  let conversationId: string | undefined;
  for (let turn = 0; turn < EARLIER_TURNS; turn += 1) {
    const response = await fetch(chatUrl, {
      method: 'POST',
      headers,
      body: JSON.stringify({
        patient_id: DEMO_PATIENT,
        ...(patientContext === 'none' ? { patient_context: 'none' } : {}),
        conversation_id: conversationId,
        messages: [{ role: 'user', content: `${PROMPT} (turn ${turn})` }],
      }),
    });
    const answer = (await response.json()) as { conversation_id?: string };
    if (!response.ok || !answer.conversation_id) throw new Error(`fhirgate refused a preparing request: ${response.status} ${JSON.stringify(answer)}`);
    conversationId = answer.conversation_id;
  }
  if (!conversationId) throw new Error('no conversation prepared');
  return conversationId;
}
