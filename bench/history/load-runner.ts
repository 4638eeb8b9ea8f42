/**
 * The load of the history benchmark, run as its own process: one client, one request at a time. Reads a
 * {@link LoadPlan} (JSON) from argv[2] and prints {@link LoadResult} (JSON) on stdout. Each case is warmed up,
 * then measured in repetitions; within a repetition the cases take turns request by request, so that noise from
 * the machine (other processes, disk flushes) hits every case alike.
 */

/** One kind of request on one host: continuing the long conversation, or a fresh one (a new root per request). */
export interface LoadCase {
  readonly name: string;
  readonly url: string;
  readonly token: string;
  /** Conversation ids used in turn; a case with one id continues the same conversation every time. */
  readonly conversationIds: readonly string[];
  /** Fields of every request body besides the conversation and the message; `{"patient_context": "none"}` unless given. */
  readonly body?: Readonly<Record<string, unknown>>;
}

/** What the load runner does. */
export interface LoadPlan {
  readonly projectId: string;
  readonly cases: readonly LoadCase[];
  readonly warmUp: number;
  readonly repetitions: number;
  readonly requestsPerRepetition: number;
}

/** Latencies in milliseconds: per case, one array per repetition. */
export interface LoadResult {
  readonly samples: Readonly<Record<string, readonly (readonly number[])[]>>;
}

async function chat(plan: LoadPlan, loadCase: LoadCase, conversationId: string, turn: number): Promise<number> {
  const started = performance.now();
  const response = await fetch(`${loadCase.url}v1/chat/completions`, {
    method: 'POST',
    headers: {
      Authorization: `Bearer ${loadCase.token}`,
      'X-Project-ID': plan.projectId,
      'Content-Type': 'application/json',
    },
    // By default the chart is not shared (patient_context none): what is measured is the history, not the patient summary.
    body: JSON.stringify({ ...(loadCase.body ?? { patient_context: 'none' }), conversation_id: conversationId, messages: [{ role: 'user', content: `Benchmark question ${turn}: anything new?` }] }),
  });
  const body = await response.text();
  const elapsed = performance.now() - started;
  if (response.status !== 200) {
    throw new Error(`chat request failed with ${response.status}: ${body}`);
  }
  return elapsed;
}

async function runLoad(plan: LoadPlan): Promise<LoadResult> {
  const used = new Map<string, number>();
  const nextConversation = (loadCase: LoadCase): string => {
    const index = used.get(loadCase.name) ?? 0;
    used.set(loadCase.name, index + 1);
    const id = loadCase.conversationIds[loadCase.conversationIds.length === 1 ? 0 : index];
    if (id === undefined) {
      throw new Error(`case ${loadCase.name} ran out of conversations`);
    }
    return id;
  };
  let turn = 0;
  for (let index = 0; index < plan.warmUp; index++) {
    for (const loadCase of plan.cases) {
      await chat(plan, loadCase, nextConversation(loadCase), turn++);
    }
  }
  const samples: Record<string, number[][]> = Object.fromEntries(plan.cases.map((loadCase) => [loadCase.name, []]));
  for (let repetition = 0; repetition < plan.repetitions; repetition++) {
    const latencies = new Map(plan.cases.map((loadCase) => [loadCase.name, [] as number[]]));
    for (let index = 0; index < plan.requestsPerRepetition; index++) {
      for (const loadCase of plan.cases) {
        latencies.get(loadCase.name)?.push(await chat(plan, loadCase, nextConversation(loadCase), turn++));
      }
    }
    for (const [name, values] of latencies) {
      samples[name].push(values);
    }
  }
  return { samples };
}

const planArgument = process.argv[2];
if (!planArgument) {
  throw new Error('usage: node bench/history/load-runner.ts <plan JSON>');
}
const result = await runLoad(JSON.parse(planArgument) as LoadPlan);
process.stdout.write(`${JSON.stringify(result)}\n`);
