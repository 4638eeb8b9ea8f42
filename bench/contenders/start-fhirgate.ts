/**
 * fhirgate in the standalone host with everything on: a Medplum-format RS256 token checked against its Login and
 * membership, the demo practitioner's AccessPolicy, the patient check, prompt and reply stored as Communications
 * in SQLite (WAL, synchronous=FULL: durable), and every measured request continuing a conversation, so it loads
 * the conversation's history. The chart is not shared with the model (`patient_context: none`): issue 6's
 * "everything on" is the audit trail, not the patient summary, which adds a chart read and an AuditEvent per turn.
 * Every scenario runs this one host, as `npm start` runs it (its `#!` line's flags, `/graphql` served).
 */
import { execFile, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { keepTail, MODEL, PROMPT, type Contender } from './contender.ts';
import { findFreePort, waitUntilAnswering } from '../lib/free-port.ts';
import { standaloneHostArgs, startNodeProcess, stopProcess } from '../lib/processes.ts';

const run = promisify(execFile);
const DEMO_PROJECT = 'a1f0c0de-0000-4000-8000-000000000001';
/** Maria Lopez, in Dr. Carter's care team: the AccessPolicy lets her chat about this patient. */
const DEMO_PATIENT = 'a1f0c0de-0000-4000-8000-000000000301';
const ISSUER = 'http://fhirgate.bench.test/';
/** Earlier turns of each prepared conversation, so each measured request sends history to the model. */
const EARLIER_TURNS = 3;
const PREPARE_CONCURRENCY = 8;

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
}

/** Whether the contender is the fhirgate host. */
export function isFhirgateContender(contender: Contender): contender is FhirgateContender {
  return contender.name === 'fhirgate' && 'patientId' in contender;
}

/** Starts fhirgate on a fresh data directory and prepares its conversations. */
export async function startFhirgate(options: FhirgateOptions): Promise<FhirgateContender> {
  const dataDir = await mkdtemp(join(options.dataRoot ?? tmpdir(), 'fhirgate-bench-'));
  const host = await startHost(options, dataDir);
  const conversationIds: string[] = [];
  // A few at a time: preparing is not measured, only start-up time.
  while (conversationIds.length < options.conversations) {
    const batch = Math.min(PREPARE_CONCURRENCY, options.conversations - conversationIds.length);
    conversationIds.push(...(await Promise.all(Array.from({ length: batch }, () => prepareConversation(host.chatUrl, host.headers)))));
  }
  return {
    name: 'fhirgate',
    chatUrl: host.chatUrl,
    headers: host.headers,
    pid: host.child.pid,
    bodies: (stream) =>
      conversationIds.map((conversationId) =>
        JSON.stringify({ stream, patient_id: DEMO_PATIENT, patient_context: 'none', conversation_id: conversationId, messages: [{ role: 'user', content: PROMPT }] }),
      ),
    patientId: DEMO_PATIENT,
    stop: async () => {
      await stopProcess(host.child, 15_000);
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

interface RunningHost {
  readonly baseUrl: string;
  readonly chatUrl: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly child: ChildProcess;
}

async function startHost(options: FhirgateOptions, dataDir: string): Promise<RunningHost> {
  const port = await findFreePort();
  const env = {
    ...process.env,
    // LOG_LEVEL=warn hides the start-up line that names the port: the bench picks the port and polls instead.
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
    LOG_LEVEL: 'warn',
    // Scenario 4 opens 1,000 streams as one caller, and scenario 2 sends 32 requests at a time as one: the per-caller
    // limits would refuse most of them.
    FHIRGATE_MAX_CONCURRENT_STREAMS: '2000',
    FHIRGATE_MAX_CONCURRENT_TURNS: '2000',
    // Non-streaming answers say what their turn asked of the store (scenario 8 reads it).
    FHIRGATE_REPORT_REPOSITORY_OPERATIONS: 'on',
  };
  const child = startNodeProcess(standaloneHostArgs(options.nodeFlags), { core: options.core, env });
  const stderrTail = keepTail(child.stderr);
  child.stdout?.resume();
  const baseUrl = `http://127.0.0.1:${port}`;
  await waitUntilAnswering(`${baseUrl}/healthcheck`, 120_000, () => child.exitCode !== null, stderrTail);
  const token = (await run(process.execPath, ['plugin/hosts/standalone/print-token.ts'], { env })).stdout.trim();
  const headers = {
    'content-type': 'application/json',
    authorization: `Bearer ${token}`,
    'x-project-id': DEMO_PROJECT,
  };
  return { baseUrl, chatUrl: `${baseUrl}/v1/chat/completions`, headers, child };
}

/** A conversation about the demo patient with a few earlier turns; returns its id. */
async function prepareConversation(chatUrl: string, headers: Record<string, string>): Promise<string> {
  let conversationId: string | undefined;
  for (let turn = 0; turn < EARLIER_TURNS; turn += 1) {
    const response = await fetch(chatUrl, {
      method: 'POST',
      headers,
      body: JSON.stringify({ patient_id: DEMO_PATIENT, patient_context: 'none', conversation_id: conversationId, messages: [{ role: 'user', content: `${PROMPT} (turn ${turn})` }] }),
    });
    const answer = (await response.json()) as { conversation_id?: string };
    if (!response.ok || !answer.conversation_id) throw new Error(`fhirgate refused a preparing request: ${response.status} ${JSON.stringify(answer)}`);
    conversationId = answer.conversation_id;
  }
  if (!conversationId) throw new Error('no conversation prepared');
  return conversationId;
}
