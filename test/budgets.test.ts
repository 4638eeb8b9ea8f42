/**
 * Budgets and the usage report end to end, on one standalone host: a project administrator sets token and cost
 * budgets in Project.setting; the openai SDK sees a turn that runs past a budget finish and the next one refused
 * with 429, the budget's code and `Retry-After` (the SDK does not retry it), nothing stored and nothing sent; a turn
 * the provider fails counts nothing; each reply records its cost; and the administrator's usage report adds up,
 * row for row, to the usage the stored replies record, read back with MedplumClient. A stream its client cuts is
 * charged what it cost (the provider's usage, or an estimate marked so, and shown so in the report); turns still
 * running hold their likely cost (a continued conversation's, its history too), so concurrent turns cannot overrun a
 * budget; and a restart (no Redis) keeps the day's spend. (Two instances sharing Redis: budgets-instances.test.ts.)
 */
import type { MedplumClient } from '@medplum/core';
import type { Communication, Extension, ProjectMembership, ProjectSetting } from '@medplum/fhirtypes';
import OpenAI from 'openai';
import { EXTENSION } from '../plugin/chat/fhir-vocabulary.ts';
import type { SeededProject } from '../plugin/hosts/standalone/seed.ts';
import { startLlmEmulator, type LlmEmulator } from './emulator/index.ts';
import { projectAdministrator } from './support/project-administrator.ts';
import { startTestHost, type TestHost } from './support/test-host.ts';
import { waitFor } from './support/wait-for.ts';

const MINI = 'openai/gpt-4o-mini';
const LOCAL = 'local/llama3.2';

describe('budgets and the usage report', () => {
  let emulator: LlmEmulator;
  let host: TestHost;

  beforeAll(async () => {
    emulator = await startLlmEmulator();
    host = await startTestHost({
      plugin: {
        llm: {
          providers: {
            openai: { kind: 'openai', apiKey: 'sk-test', baseUrl: `${emulator.url}/v1`, models: ['gpt-4o-mini'], retries: { maxRetries: 0 } },
            local: { kind: 'openai-compatible', baseUrl: `${emulator.url}/v1`, models: ['llama3.2'], retries: { maxRetries: 0 } },
          },
          defaultModel: MINI,
        },
        // The operator's price of the one priced model: $0.15 and $0.60 per 1M tokens.
        governance: { prices: { [MINI]: { input: 0.15, output: 0.6 } } },
      },
    });
  });

  afterAll(async () => {
    await host.close();
    await emulator.close();
  });

  beforeEach(() => {
    emulator.reset();
  });

  interface Budgeted {
    readonly project: SeededProject;
    /** The demo practitioner. */
    readonly alice: OpenAI;
    /** A second practitioner, invited with the same policy. */
    readonly bob: OpenAI;
    readonly bobProfile: string;
    /** The integration client, made a project administrator: sets the budgets, reads the records and the report. */
    readonly admin: MedplumClient;
    readonly adminToken: string;
  }

  async function budgetedProject(settings: ProjectSetting[]): Promise<Budgeted> {
    const project = await host.seedProject();
    const admin = await projectAdministrator(host, project);
    await admin.post(`admin/projects/${project.projectId}/settings`, settings);
    const invited: ProjectMembership = await admin.post(`admin/projects/${project.projectId}/invite`, {
      resourceType: 'Practitioner',
      firstName: 'Bob',
      lastName: 'Stone',
      membership: { accessPolicy: { reference: `AccessPolicy/${project.ids['policy-own-conversations']}` } },
    });
    const clientOf = async (membershipId: string, options: { maxRetries?: number; fetch?: typeof fetch } = {}): Promise<OpenAI> =>
      new OpenAI({ baseURL: `${host.url}v1`, apiKey: await host.accessTokenFor(membershipId), defaultHeaders: { 'X-Project-ID': project.projectId }, maxRetries: 0, ...options });
    return {
      project,
      alice: await clientOf(project.ids['practitioner-membership']),
      bob: await clientOf(invited.id as string),
      bobProfile: invited.profile?.reference as string,
      admin,
      adminToken: admin.getAccessToken() as string,
    };
  }

  function behaviour(knobs: Record<string, unknown>): string {
    return `[emulator-behaviour ${JSON.stringify(knobs)}]`;
  }

  async function ask(openai: OpenAI, content: string, model = MINI): Promise<OpenAI.ChatCompletion> {
    return openai.chat.completions.create({ model, messages: [{ role: 'user', content }] });
  }

  /** Streams a whole reply, as a client reading to the end does. */
  async function stream(openai: OpenAI, content: string, model = MINI): Promise<string> {
    let text = '';
    for await (const chunk of await openai.chat.completions.create({ model, stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content }] })) {
      text += chunk.choices[0]?.delta.content ?? '';
    }
    return text;
  }

  async function stored(admin: MedplumClient): Promise<Communication[]> {
    return admin.searchResources('Communication', { _count: '1000' }, { cache: 'no-cache' });
  }

  async function usageReport(budgeted: Budgeted, query: string, token = budgeted.adminToken): Promise<Response> {
    return fetch(`${host.url}v1/usage?${query}`, { headers: { Authorization: `Bearer ${token}`, 'X-Project-ID': budgeted.project.projectId } });
  }

  test("a stream past the user's daily budget finishes and is counted; the next turn is 429 with the budget's code, nothing stored or sent", async () => {
    const budgeted = await budgetedProject([{ name: 'AI_BUDGET_USER_DAY_TOKENS', valueInteger: 50 }]);
    emulator.setBehaviour({ usage: { promptTokens: 30, completionTokens: 40 } });
    expect(await stream(budgeted.alice, 'Summarise the guideline')).toBe('Echo: Summarise the guideline');
    const afterFirst = await stored(budgeted.admin);
    const reply = afterFirst.find((record) => record.category?.[0]?.coding?.[0]?.code === 'ai-response');
    expect(reply?.status).toBe('completed');

    // The SDK retries a 429 on its own unless told not to: one request reaches the host.
    let requests = 0;
    const counting: typeof fetch = (input, init) => {
      requests++;
      return fetch(input, init);
    };
    const retrying = new OpenAI({ baseURL: `${host.url}v1`, apiKey: budgeted.alice.apiKey, defaultHeaders: { 'X-Project-ID': budgeted.project.projectId }, fetch: counting });
    const refused = await retrying.chat.completions.create({ model: MINI, messages: [{ role: 'user', content: 'And the next step?' }] }).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(OpenAI.RateLimitError);
    expect(refused).toMatchObject({
      status: 429,
      error: { code: 'budget_exceeded_user_day', type: 'rate_limit_error', message: expect.stringMatching(/^Your daily token budget \(50 tokens, AI_BUDGET_USER_DAY_TOKENS\) is used up; it resets at \d{4}-\d{2}-\d{2}T00:00:00Z\.$/) },
    });
    const headers = (refused as InstanceType<typeof OpenAI.RateLimitError>).headers;
    const untilMidnight = Math.ceil((Date.UTC(new Date().getUTCFullYear(), new Date().getUTCMonth(), new Date().getUTCDate() + 1) - Date.now()) / 1000);
    expect(Math.abs(Number(headers.get('retry-after')) - untilMidnight)).toBeLessThanOrEqual(5);
    expect(headers.get('x-should-retry')).toBe('false');
    expect(requests).toBe(1);
    await expect(stream(budgeted.alice, 'Streamed?')).rejects.toMatchObject({ status: 429, error: { code: 'budget_exceeded_user_day' } });
    expect(emulator.received).toHaveLength(1);
    expect(await stored(budgeted.admin)).toHaveLength(afterFirst.length);

    // Another user's budget is their own.
    expect((await ask(budgeted.bob, 'Hello')).choices[0].message.content).toBe('Echo: Hello');
  });

  test('a turn the provider fails counts nothing; the project budget counts every user; cost is recorded on each reply', async () => {
    const budgeted = await budgetedProject([
      { name: 'AI_BUDGET_PROJECT_DAY_TOKENS', valueInteger: 100 },
      { name: 'AI_BUDGET_PROJECT_MONTH_COST', valueDecimal: 1 },
    ]);
    emulator.setBehaviour({ usage: { promptTokens: 1000, completionTokens: 500 } });
    const failed = `Fail [emulator-behaviour ${JSON.stringify({ errorStatus: 500 })}]`;
    await expect(ask(budgeted.alice, failed)).rejects.toMatchObject({ status: 500 });
    await expect(ask(budgeted.bob, failed)).rejects.toMatchObject({ status: 500 });
    // Nothing counted yet: the budget of 100 tokens still lets a turn in; this one takes 1,500.
    await ask(budgeted.alice, 'Priced');
    await expect(ask(budgeted.bob, 'Over')).rejects.toMatchObject({ status: 429, error: { code: 'budget_exceeded_project_day', message: expect.stringContaining("The project's daily token budget (100 tokens") } });

    const replies = (await stored(budgeted.admin)).filter((record) => record.category?.[0]?.coding?.[0]?.code === 'ai-response');
    expect(replies.map((reply) => reply.status).sort()).toEqual(['completed', 'not-done', 'not-done']);
    const priced = replies.find((reply) => reply.status === 'completed');
    expect(priced?.extension?.find((extension) => extension.url === EXTENSION.usage)?.extension).toEqual([
      { url: 'prompt-tokens', valueInteger: 1000 },
      { url: 'completion-tokens', valueInteger: 500 },
      { url: 'total-tokens', valueInteger: 1500 },
      // 1,000 × $0.15/1M + 500 × $0.60/1M
      { url: 'cost', valueMoney: { value: 0.00045, currency: 'USD' } },
    ]);
    for (const reply of replies.filter((record) => record.status === 'not-done')) {
      expect(reply.extension?.some((extension) => extension.url === EXTENSION.usage)).toBe(false);
    }
  });

  test("the usage report counts what the caller may read (the administrator: everything), and reconciles exactly with the stored replies' recorded usage", async () => {
    const budgeted = await budgetedProject([]);
    const turns: [OpenAI, string, string, boolean, { promptTokens: number; completionTokens: number } | undefined][] = [
      [budgeted.alice, 'one', MINI, false, { promptTokens: 11, completionTokens: 7 }],
      [budgeted.alice, 'two', MINI, true, { promptTokens: 13, completionTokens: 5 }],
      [budgeted.alice, 'three', LOCAL, false, { promptTokens: 100, completionTokens: 200 }],
      [budgeted.bob, 'four', MINI, true, { promptTokens: 1234, completionTokens: 4321 }],
      [budgeted.bob, 'five', LOCAL, true, undefined],
    ];
    for (const [client, content, model, streamed, usage] of turns) {
      const behaviour = usage ? { usage } : { errorStatus: 500 };
      const message = `${content} [emulator-behaviour ${JSON.stringify(behaviour)}]`;
      await (streamed ? stream(client, message, model) : ask(client, message, model)).catch(() => undefined);
    }

    // A practitioner's report counts the replies she may read: her own three, not Bob's.
    const own = await usageReport(budgeted, '', budgeted.alice.apiKey as string);
    expect(own.status).toBe(200);
    expect(await own.json()).toMatchObject({ scope: 'readable', total: { replies: 3, prompt_tokens: 11 + 13 + 100, completion_tokens: 7 + 5 + 200 } });

    const response = await usageReport(budgeted, 'group_by=user,model,day');
    expect(response.status).toBe(200);
    const report = (await response.json()) as { data: Record<string, unknown>[]; total: Record<string, number>; group_by: string[] };
    expect(report.group_by).toEqual(['user', 'model', 'day']);

    // The same sums, computed here from the replies MedplumClient reads back.
    const [agent] = await budgeted.admin.searchResources('Device', { identifier: 'urn:fhirgate:agent|fhirgate-ai-agent' }, { cache: 'no-cache' });
    const replies = (await stored(budgeted.admin)).filter((record) => record.category?.[0]?.coding?.[0]?.code === 'ai-response' && record.sender?.reference === `Device/${agent.id}`);
    expect(replies).toHaveLength(5);
    const expected = new Map<string, Record<string, unknown>>();
    for (const reply of replies) {
      const usage = reply.extension?.find((extension) => extension.url === EXTENSION.usage)?.extension;
      const part = (url: string): number => usage?.find((extension) => extension.url === url)?.valueInteger ?? 0;
      const row = { user: reply.recipient?.[0]?.reference, model: reply.extension?.find((extension) => extension.url === EXTENSION.model)?.valueString, day: reply.sent?.slice(0, 10) };
      const key = JSON.stringify(row);
      const sums = (expected.get(key) ?? {
        ...row,
        replies: 0,
        replies_without_usage: 0,
        replies_estimated: 0,
        prompt_tokens: 0,
        completion_tokens: 0,
        total_tokens: 0,
        estimated_tokens: 0,
        cost_usd: 0,
      }) as Record<string, number>;
      const estimated = usage?.some((extension) => extension.url === 'estimated' && extension.valueBoolean === true) ?? false;
      sums.replies += 1;
      sums.replies_without_usage += usage ? 0 : 1;
      sums.replies_estimated += estimated ? 1 : 0;
      sums.prompt_tokens += part('prompt-tokens');
      sums.completion_tokens += part('completion-tokens');
      sums.total_tokens += part('total-tokens');
      sums.estimated_tokens += estimated ? part('total-tokens') : 0;
      sums.cost_usd = (Math.round(sums.cost_usd * 1e9) + Math.round((usage?.find((extension) => extension.url === 'cost')?.valueMoney?.value ?? 0) * 1e9)) / 1e9;
      expected.set(key, sums);
    }
    expect(new Set(report.data.map((row) => JSON.stringify(row)))).toEqual(new Set([...expected.values()].map((row) => JSON.stringify(row))));
    expect(report.total).toMatchObject({ replies: 5, replies_without_usage: 1, prompt_tokens: 11 + 13 + 100 + 1234, completion_tokens: 7 + 5 + 200 + 4321 });
    expect(report.data.find((row) => row.user === budgeted.bobProfile && row.model === MINI)).toMatchObject({ cost_usd: (1234 * 150 + 4321 * 600) / 1e9 });

    const byModel = (await (await usageReport(budgeted, 'group_by=model')).json()) as { data: Record<string, unknown>[] };
    expect(byModel.data).toEqual([
      expect.objectContaining({ model: LOCAL, replies: 2, total_tokens: 300 }),
      expect.objectContaining({ model: MINI, replies: 3, total_tokens: 11 + 7 + 13 + 5 + 1234 + 4321 }),
    ]);
    expect(await (await usageReport(budgeted, 'group_by=team')).json()).toMatchObject({ error: { code: 'invalid_request', param: 'group_by' } });
  });

  /** Opens a stream and reads it until its content is `answer`, then leaves: `finish_reason` and the usage unread. */
  async function cutAfter(openai: OpenAI, content: string, answer: string): Promise<string> {
    const controller = new AbortController();
    const stream = await openai.chat.completions.create({ model: MINI, stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content }] }, { signal: controller.signal });
    let received = '';
    for await (const chunk of stream) {
      received += chunk.choices[0]?.delta.content ?? '';
      if (received.length >= answer.length) {
        controller.abort();
        break;
      }
    }
    return received;
  }

  async function replies(budgeted: Budgeted, count: number): Promise<Communication[]> {
    return waitFor(async () => {
      const found = (await stored(budgeted.admin)).filter((record) => record.category?.[0]?.coding?.[0]?.code === 'ai-response');
      return found.length >= count ? found : undefined;
    }, 10_000);
  }

  test('a stream cut after its last content chunk is charged the usage the provider reported; one cut early, an estimate marked so', async () => {
    const budgeted = await budgetedProject([]);
    const answer = 'Two tablets a day with food.';
    const whole = behaviour({ reply: answer, tokensPerSecond: 200, usage: { promptTokens: 31, completionTokens: 17 } });
    expect(await cutAfter(budgeted.alice, `Dose? ${whole}`, answer)).toBe(answer);
    const [cut] = await replies(budgeted, 1);
    expect(cut.status).toBe('stopped');
    expect(cut.extension?.find((extension) => extension.url === EXTENSION.usage)?.extension).toEqual([
      { url: 'prompt-tokens', valueInteger: 31 },
      { url: 'completion-tokens', valueInteger: 17 },
      { url: 'total-tokens', valueInteger: 48 },
      { url: 'cost', valueMoney: { value: (31 * 150 + 17 * 600) / 1e9, currency: 'USD' } },
    ]);

    // A long reply left after a few words: the call runs on for usageWaitMs (1 s), then is cancelled; the reply is
    // charged the prompt and what was generated, estimated.
    const long = behaviour({ replyTokens: 2000, tokensPerSecond: 100 });
    const received = await cutAfter(budgeted.alice, `Tell me everything ${long}`, 'token1 token2 token3');
    const early = (await replies(budgeted, 2)).find((reply) => reply.id !== cut.id) as Communication;
    await waitFor(async () => (emulator.received.at(-1)?.outcome === 'aborted' ? true : undefined));
    const usage = early.extension?.find((extension) => extension.url === EXTENSION.usage)?.extension ?? [];
    const part = (url: string): Extension | undefined => usage.find((extension) => extension.url === url);
    expect(early.status).toBe('stopped');
    expect(early.payload?.[0]?.contentString?.startsWith(received)).toBe(true);
    expect(part('estimated')?.valueBoolean).toBe(true);
    expect(part('prompt-tokens')?.valueInteger).toBeGreaterThan(0);
    // What the provider generated before it was cancelled: more than the client read, less than the whole reply.
    const generated = emulator.received.at(-1)?.tokensSent ?? 0;
    expect(part('completion-tokens')?.valueInteger).toBeGreaterThanOrEqual(Math.floor(received.length / 4));
    expect(generated).toBeLessThan(2000);

    const report = (await (await usageReport(budgeted, 'group_by=')).json()) as { total: Record<string, number> };
    expect(report.total).toMatchObject({ replies: 2, replies_without_usage: 0, replies_estimated: 1, estimated_tokens: part('total-tokens')?.valueInteger });
    expect(report.total.total_tokens).toBe(48 + (part('total-tokens')?.valueInteger ?? 0));
  });

  test('turns still running hold their likely cost: 8 streams at once with 1 token left, one runs, 7 are refused, and nothing is held after', async () => {
    const budgeted = await budgetedProject([{ name: 'AI_BUDGET_USER_DAY_TOKENS', valueInteger: 21 }]);
    await ask(budgeted.alice, `Start ${behaviour({ usage: { promptTokens: 10, completionTokens: 10 } })}`);
    const slow = behaviour({ replyTokens: 30, tokensPerSecond: 30, usage: { promptTokens: 10, completionTokens: 20 } });
    const outcomes = await Promise.all(Array.from({ length: 8 }, (_, index) => stream(budgeted.alice, `Stream ${index} ${slow}`).then(() => 'answered', (error: unknown) => error)));
    expect(outcomes.filter((outcome) => outcome === 'answered')).toHaveLength(1);
    const refusals = outcomes.filter((outcome) => outcome !== 'answered');
    expect(refusals).toHaveLength(7);
    for (const refusal of refusals) {
      expect(refusal).toMatchObject({ status: 429, error: { code: 'budget_exceeded_user_day' } });
    }
    // The one that ran is settled with what it used (20 + 30 tokens): the budget is used up, not held.
    await expect(ask(budgeted.alice, 'After')).rejects.toMatchObject({ status: 429, error: { message: expect.stringContaining('is used up') } });
    expect(emulator.received).toHaveLength(2);
  });

  test("a continued conversation's turn holds its history's tokens too: while it runs, a turn they would take past the budget is refused", async () => {
    const budgeted = await budgetedProject([{ name: 'AI_BUDGET_USER_DAY_TOKENS', valueInteger: 700 }]);
    const used = behaviour({ usage: { promptTokens: 10, completionTokens: 10 } });
    // About 400 tokens, and as many again in its echo: the conversation's history is about 800 tokens.
    const first = (await ask(budgeted.alice, `${'Lab value noted. '.repeat(95)}${used}`)) as unknown as { conversation_id: string };
    const slow = behaviour({ replyTokens: 30, tokensPerSecond: 30, usage: { promptTokens: 10, completionTokens: 10 } });
    /** What `during` gets while a slow turn of `extra`'s conversation runs (holding its likely cost). */
    const whileRunning = async (extra: Record<string, unknown>, during: () => Promise<unknown>): Promise<unknown> => {
      const running = await budgeted.alice.chat.completions.create({ model: MINI, stream: true, max_tokens: 10, messages: [{ role: 'user', content: `Go on. ${slow}` }], ...extra } as never);
      const chunks = (running as unknown as AsyncIterable<unknown>)[Symbol.asyncIterator]();
      await chunks.next();
      const outcome = await during().then((value) => value, (error: unknown) => error);
      while (!(await chunks.next()).done) {
        // Read to the end: the turn settles with its usage.
      }
      return outcome;
    };

    // A new conversation's turn holds little: the budget's other turn is answered.
    expect(await whileRunning({}, () => ask(budgeted.alice, `Short. ${used}`))).toMatchObject({ object: 'chat.completion' });
    // The conversation's turn holds its history besides: the other turn is refused, held up, not used up.
    const refused = await whileRunning({ conversation_id: first.conversation_id }, () => ask(budgeted.alice, `Short. ${used}`));
    expect(refused).toMatchObject({ status: 429, error: { code: 'budget_exceeded_user_day', message: expect.stringContaining('taken up by the turns still running') } });
    expect(await ask(budgeted.alice, `Short. ${used}`)).toMatchObject({ object: 'chat.completion' });
  });

  test('a restart without Redis keeps the spend of the day: the counters start from the stored replies', async () => {
    const plugin = {
      llm: { providers: { openai: { kind: 'openai' as const, apiKey: 'sk-test', baseUrl: `${emulator.url}/v1`, models: ['gpt-4o-mini'], retries: { maxRetries: 0 } } }, defaultModel: MINI },
      governance: { prices: { [MINI]: { input: 0.15, output: 0.6 } } },
    };
    const first = await startTestHost({ plugin });
    let second: TestHost | undefined;
    try {
      const project = await first.seedProject();
      const admin = await projectAdministrator(first, project);
      await admin.post(`admin/projects/${project.projectId}/settings`, [{ name: 'AI_BUDGET_USER_DAY_TOKENS', valueInteger: 200 }]);
      const clientOn = async (host: TestHost): Promise<OpenAI> =>
        new OpenAI({ baseURL: `${host.url}v1`, apiKey: await host.accessTokenFor(project.ids['practitioner-membership']), defaultHeaders: { 'X-Project-ID': project.projectId }, maxRetries: 0 });
      await ask(await clientOn(first), `Spend ${behaviour({ usage: { promptTokens: 150, completionTokens: 60 } })}`);
      await first.close({ keepData: true });

      second = await startTestHost({ plugin, dataDir: first.dataDir });
      await expect(ask(await clientOn(second), 'After the restart')).rejects.toMatchObject({ status: 429, error: { code: 'budget_exceeded_user_day', message: expect.stringContaining('is used up') } });
      expect(emulator.received).toHaveLength(1);
    } finally {
      await (second ?? first).close();
    }
  });
});
