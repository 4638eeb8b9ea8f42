/**
 * Budgets (docs/governance.md#budgets): getting answers the budgets and the usage report do not count. Each attack
 * runs in a project of its own, with budgets set as the project's settings, so its spend and its refusals touch no
 * other attack:
 * - a stream read to its last word of content and then cut, before `finish_reason` and the usage chunk, on chat
 *   completions and on `/v1/responses`: the provider billed the answer, so `/v1/usage` must count it;
 * - 8 streams at once with 1 token of budget left: the turns still running count against the budget too;
 * - a restart without Redis (a host of its own, on its own SQLite file): the budget spent before it still counts.
 */
import type { Project, ProjectMembership, ProjectSetting } from '@medplum/fhirtypes';
import type { SeededProject } from '../plugin/hosts/standalone/seed.ts';
import { startTestHost, type TestHost } from '../test/support/test-host.ts';
import type { SecurityContext } from './context.ts';
import type { AttackOutcome } from './suite.ts';

const KIND = 'budgets';
/** The answer the emulator gives to a cut stream, word by word. */
const ANSWER = 'Take one tablet twice a day with food, and come back in two weeks for a check.';
const CUT_STREAMS = 4;
const CONCURRENT_STREAMS = 8;

/** A project with budgets, its practitioner's token and its administrator's (for `/v1/usage`). */
interface BudgetedProject {
  readonly project: SeededProject;
  readonly token: string;
  readonly adminToken: string;
}

interface UsageTotals {
  readonly replies: number;
  readonly replies_without_usage: number;
  readonly replies_estimated?: number;
  readonly total_tokens: number;
}

export async function budgetAttacks(context: SecurityContext): Promise<void> {
  const { log } = context;

  await log.run(KIND, `${CUT_STREAMS} chat completion streams cut after their last content chunk`, async () => {
    const budgeted = await budgetedProject(context.host, [{ name: 'AI_BUDGET_USER_DAY_TOKENS', valueInteger: 1_000_000 }]);
    for (let index = 0; index < CUT_STREAMS; index++) {
      await cutAfterContent(context.host, budgeted, 'v1/chat/completions', { stream: true, messages: [{ role: 'user', content: `Dose ${index}? ${behaviour({ reply: ANSWER, tokensPerSecond: 400 })}` }] }, chatContent);
    }
    return countedOrFree(context.host, budgeted, CUT_STREAMS);
  });

  await log.run(KIND, `${CUT_STREAMS} /v1/responses streams cut after their last output_text delta`, async () => {
    const budgeted = await budgetedProject(context.host, [{ name: 'AI_BUDGET_USER_DAY_TOKENS', valueInteger: 1_000_000 }]);
    for (let index = 0; index < CUT_STREAMS; index++) {
      await cutAfterContent(context.host, budgeted, 'v1/responses', { stream: true, input: `Dose ${index}? ${behaviour({ reply: ANSWER, tokensPerSecond: 400 })}` }, responsesContent);
    }
    return countedOrFree(context.host, budgeted, CUT_STREAMS);
  });

  await log.run(KIND, `${CONCURRENT_STREAMS} streams at once with 1 token of a daily budget left`, async () => {
    const budgeted = await budgetedProject(context.host, [{ name: 'AI_BUDGET_USER_DAY_TOKENS', valueInteger: 21 }]);
    const spent = await chat(context.host, budgeted, { messages: [{ role: 'user', content: `Start ${behaviour({ usage: { promptTokens: 10, completionTokens: 10 } })}` }] });
    await spent.arrayBuffer();
    if (spent.status !== 200) {
      throw new Error(`the turn that spends 20 of the 21 tokens answered ${spent.status}`);
    }
    // Each stream takes a second, so they all run at once; each would count 30 tokens.
    const slow = behaviour({ replyTokens: 40, tokensPerSecond: 40, usage: { promptTokens: 10, completionTokens: 20 } });
    const answers = await Promise.all(
      Array.from({ length: CONCURRENT_STREAMS }, (_, index) => chat(context.host, budgeted, { stream: true, messages: [{ role: 'user', content: `Stream ${index} ${slow}` }] })),
    );
    await Promise.all(answers.map((answer) => answer.arrayBuffer()));
    const admitted = answers.filter((answer) => answer.status === 200).length;
    const refused = answers.filter((answer) => answer.status === 429).length;
    return {
      status: admitted > 1 ? 200 : 429,
      letThrough: admitted > 1 || admitted + refused !== CONCURRENT_STREAMS,
      note: admitted > 1 || admitted + refused !== CONCURRENT_STREAMS ? `${admitted} admitted, ${refused} refused with 429, against 1 token left` : undefined,
    };
  });

  await log.run(KIND, 'a restart without Redis forgets the day\'s spend', async () => restartAttack(context));
}

/** Spends past a budget on a host without Redis, restarts it on the same SQLite file, and asks again. */
async function restartAttack(context: SecurityContext): Promise<AttackOutcome> {
  const plugin = {
    llm: {
      providers: { openai: { kind: 'openai' as const, apiKey: 'sk-budget-restart-0123456789', baseUrl: `${context.emulator.url}/v1`, models: ['gpt-4o-mini'], retries: { maxRetries: 0 } } },
      defaultModel: 'openai/gpt-4o-mini',
    },
  };
  const first = await startTestHost({ plugin });
  let second: TestHost | undefined;
  try {
    const budgeted = await budgetedProject(first, [{ name: 'AI_BUDGET_USER_DAY_TOKENS', valueInteger: 100 }]);
    const spend = await chat(first, budgeted, { messages: [{ role: 'user', content: `Spend ${behaviour({ usage: { promptTokens: 80, completionTokens: 40 } })}` }] });
    await spend.arrayBuffer();
    const before = await chat(first, budgeted, { messages: [{ role: 'user', content: 'Before the restart' }] });
    await before.arrayBuffer();
    if (spend.status !== 200 || before.status !== 429) {
      throw new Error(`before the restart: the spending turn answered ${spend.status}, the next ${before.status} (expected 200, then 429)`);
    }
    await first.close({ keepData: true });
    second = await startTestHost({ plugin, dataDir: first.dataDir });
    const after = await chat(second, { ...budgeted, token: await second.accessTokenFor(budgeted.project.ids['practitioner-membership']) }, { messages: [{ role: 'user', content: 'After the restart' }] });
    await after.arrayBuffer();
    return after.status === 429 ? { status: 429, letThrough: false } : { status: after.status, letThrough: true, note: 'the turn over the budget was admitted after the restart: 120 of 100 tokens spent' };
  } finally {
    await (second ?? first).close();
  }
}

/** A project of the attack's own with `settings`, its practitioner's token, and its client made an administrator. */
async function budgetedProject(host: TestHost, settings: ProjectSetting[]): Promise<BudgetedProject> {
  const project = await host.seedProject();
  const stored = await host.store.readResource<Project>('Project', project.projectId);
  await host.store.updateResource<Project>({ ...stored, setting: [...(stored.setting ?? []), ...settings] });
  const membership = await host.store.readResource<ProjectMembership>('ProjectMembership', project.ids['client-membership']);
  await host.store.updateResource<ProjectMembership>({ ...membership, admin: true });
  return {
    project,
    token: await host.accessTokenFor(project.ids['practitioner-membership']),
    adminToken: await host.accessTokenFor(project.ids['client-membership']),
  };
}

function chat(host: TestHost, budgeted: Pick<BudgetedProject, 'project' | 'token'>, body: unknown, path = 'v1/chat/completions', signal?: AbortSignal): Promise<Response> {
  return fetch(`${host.url}${path}`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${budgeted.token}`, 'X-Project-ID': budgeted.project.projectId },
    body: JSON.stringify(body),
    signal,
  });
}

function behaviour(knobs: Record<string, unknown>): string {
  return `[emulator-behaviour ${JSON.stringify(knobs)}]`;
}

/** The content text a chat completion chunk carries. */
function chatContent(data: Record<string, unknown>): string {
  const choices = data.choices as { delta?: { content?: string } }[] | undefined;
  return choices?.[0]?.delta?.content ?? '';
}

/** The text a Responses API event carries. */
function responsesContent(data: Record<string, unknown>): string {
  return data.type === 'response.output_text.delta' ? String(data.delta) : '';
}

/**
 * Reads a stream's events until their content is the whole answer, then closes the connection at once: the client
 * has its answer and never reads `finish_reason`, the usage or the end.
 */
async function cutAfterContent(host: TestHost, budgeted: BudgetedProject, path: string, body: unknown, contentOf: (data: Record<string, unknown>) => string): Promise<void> {
  const controller = new AbortController();
  const response = await chat(host, budgeted, body, path, controller.signal);
  if (response.status !== 200 || !response.body) {
    throw new Error(`the stream answered ${response.status}`);
  }
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffered = '';
  let content = '';
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) {
        throw new Error('the stream ended before the answer was whole');
      }
      buffered += decoder.decode(value, { stream: true });
      const lines = buffered.split('\n');
      buffered = lines.pop() ?? '';
      for (const line of lines) {
        if (line.startsWith('data: ') && line !== 'data: [DONE]') {
          content += contentOf(JSON.parse(line.slice(6)) as Record<string, unknown>);
          if (content === ANSWER) {
            return;
          }
        }
      }
    }
  } finally {
    controller.abort();
    await reader.cancel().catch(() => undefined);
  }
}

/** Let through when the usage report counts a cut stream's answer as nothing. */
async function countedOrFree(host: TestHost, budgeted: BudgetedProject, streams: number): Promise<AttackOutcome> {
  // The replies of cut streams are recorded once the server has seen the client leave: wait for them.
  let total: UsageTotals | undefined;
  for (const deadline = Date.now() + 15_000; Date.now() < deadline; ) {
    const report = await fetch(`${host.url}v1/usage?group_by=`, { headers: { Authorization: `Bearer ${budgeted.adminToken}`, 'X-Project-ID': budgeted.project.projectId } });
    if (report.status !== 200) {
      throw new Error(`the usage report answered ${report.status}`);
    }
    total = ((await report.json()) as { total: UsageTotals }).total;
    if (total.replies >= streams) {
      break;
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  if (total === undefined || total.replies < streams) {
    throw new Error(`only ${total?.replies ?? 0} of the ${streams} replies were recorded`);
  }
  const free = total.replies_without_usage;
  return free > 0 || total.total_tokens === 0
    ? { status: 200, letThrough: true, note: `${free} of ${streams} complete answers counted 0 tokens (${total.total_tokens} tokens in all)` }
    : { status: 200, letThrough: false, note: `${total.total_tokens} tokens counted, ${total.replies_estimated} of ${streams} replies estimated` };
}
