/**
 * Test support, not production code: the tool calling every ChatModel adapter must show against the LLM emulator.
 * Tools reach the provider, the model's calls come back whole (`complete`) or as fragments (`stream`), a history
 * with calls and their results is one the provider accepts, and a loop of steps ends with text. Each adapter's test
 * file runs it beside `describeChatModelContract`, with the same contract.
 */
import { expect, test } from '@jest/globals';
import { countPromptTokens } from '../../test/emulator/index.ts';
import type { EmulatorToolCall, NormalizedMessage } from '../../test/emulator/index.ts';
import { CONVERSATION, TEST_API_KEY, collectStream, createTestRequest, expectAppError, expectNoSecrets } from './chat-model-contract.ts';
import type { ChatModelContract } from './chat-model-contract.ts';
import type { ChatMessage, ChatModel, ChatModelRequest, ChatStreamEvent, ChatTool, ChatToolCall, ChatToolChoice } from './chat-model.ts';

/** The tools the tests offer. */
export const TEST_TOOLS: readonly ChatTool[] = [
  {
    name: 'search_observations',
    description: "Finds the patient's observations with a LOINC code.",
    parameters: { type: 'object', properties: { code: { type: 'string' }, count: { type: 'integer' } }, required: ['code'] },
  },
  { name: 'read_patient', description: 'Reads the patient record.', parameters: { type: 'object', properties: {} } },
];

/** A call of each tool, as an emulator behaviour gives them. */
export const SEARCH_CALL: EmulatorToolCall = { name: 'search_observations', arguments: { code: '8867-4', count: 3 } };
export const READ_CALL: EmulatorToolCall = { name: 'read_patient', arguments: {} };

const EXPECTED_REPLY = `Echo: ${CONVERSATION[3].content}`;

/** The calls a behaviour makes, as the port carries them (without the ids, which the provider or adapter makes). */
export function expectedCalls(calls: readonly EmulatorToolCall[]): { name: string; arguments: string }[] {
  return calls.map((call) => ({ name: call.name, arguments: JSON.stringify(call.arguments) }));
}

/**
 * The calls of a stream's `tool_call` events, each call's fragments joined in order. Checks the port's rules on the
 * way: a call's first fragment carries its id and name, and calls are numbered 0, 1, ... in the order they begin.
 */
export function joinToolCalls(events: readonly ChatStreamEvent[]): ChatToolCall[] {
  const calls: { id: string; name: string; arguments: string }[] = [];
  for (const event of events) {
    if (event.type !== 'tool_call') {
      continue;
    }
    const call = calls[event.index];
    if (call === undefined) {
      expect(event.index).toBe(calls.length);
      expect(event.id).toEqual(expect.any(String));
      expect(event.name).toEqual(expect.any(String));
      calls.push({ id: event.id ?? '', name: event.name ?? '', arguments: event.arguments });
    } else {
      call.arguments += event.arguments;
    }
  }
  return calls;
}

/** The messages as the emulator records them: with ids (OpenAI, Anthropic), or with function names instead (Ollama). */
export function recordedFormOf(messages: readonly ChatMessage[], ids: ChatModelContract['toolCallIds']): NormalizedMessage[] {
  const namesById = new Map<string, string>();
  return messages.map((message): NormalizedMessage => {
    if (message.role === 'tool') {
      return ids === 'provider'
        ? { role: 'tool', content: message.content, toolCallId: message.toolCallId }
        : { role: 'tool', content: message.content, toolName: namesById.get(message.toolCallId) };
    }
    if (message.role === 'assistant' && message.toolCalls && message.toolCalls.length > 0) {
      for (const call of message.toolCalls) {
        namesById.set(call.id, call.name);
      }
      const toolCalls = message.toolCalls.map((call) =>
        ids === 'provider' ? { id: call.id, name: call.name, arguments: call.arguments } : { name: call.name, arguments: call.arguments },
      );
      return { role: 'assistant', content: message.content, toolCalls };
    }
    return { role: message.role, content: message.content };
  });
}

/** The test conversation, then a round of two calls and their results. */
export const CONVERSATION_WITH_RESULTS: readonly ChatMessage[] = [
  ...CONVERSATION,
  {
    role: 'assistant',
    content: '',
    toolCalls: [
      { id: 'call_history_0', name: 'search_observations', arguments: '{"code":"8867-4","count":3}' },
      { id: 'call_history_1', name: 'read_patient', arguments: '{}' },
    ],
  },
  { role: 'tool', toolCallId: 'call_history_0', content: 'Heart rate 48 bpm on 2025-03-01.' },
  { role: 'tool', toolCallId: 'call_history_1', content: 'Jane Doe, born 1990, marathon runner.' },
];

/** Registers the tool cases in the current describe block. */
export function describeToolCallingContract(contract: ChatModelContract): void {
  const createModel = (): ChatModel => contract.createModel({ baseUrl: contract.emulator().url, apiKey: TEST_API_KEY, timeoutMs: 5000 });
  const createRequest = (overrides: Partial<ChatModelRequest> = {}): ChatModelRequest =>
    createTestRequest(contract.model, { tools: TEST_TOOLS, ...overrides });
  const lastRecord = () => contract.emulator().received.at(-1);

  test('the tools reach the provider, and prompt tokens count them', async () => {
    const completion = await createModel().complete(createRequest());

    expect(lastRecord()?.tools).toEqual(TEST_TOOLS);
    expect(completion.usage?.promptTokens).toBe(countPromptTokens(CONVERSATION, TEST_TOOLS));
  });

  test('a whole reply with calls gives them in order, with distinct ids, and finishes with tool_calls', async () => {
    contract.emulator().enqueue({ toolCalls: [[SEARCH_CALL, READ_CALL]] });
    const completion = await createModel().complete(createRequest());
    const calls = completion.toolCalls ?? [];

    expect(completion).toMatchObject({ text: '', finishReason: 'tool_calls' });
    expect(calls.map(({ name, arguments: text }) => ({ name, arguments: text }))).toEqual(expectedCalls([SEARCH_CALL, READ_CALL]));
    expect(new Set(calls.map((call) => call.id)).size).toBe(2);
    expect(calls.every((call) => call.id !== '')).toBe(true);
  });

  test('a streamed reply gives tool_call fragments that join into the calls, then finishes with tool_calls', async () => {
    contract.emulator().enqueue({ toolCalls: [[SEARCH_CALL, READ_CALL]] });
    const { text, events, error } = await collectStream(createModel().stream(createRequest()));
    const calls = joinToolCalls(events);

    expect(error).toBeUndefined();
    expect(text).toBe('');
    expect(calls.map(({ name, arguments: joined }) => ({ name, arguments: joined }))).toEqual(expectedCalls([SEARCH_CALL, READ_CALL]));
    expect(new Set(calls.map((call) => call.id)).size).toBe(2);
    expect(events.filter((event) => event.type === 'finish')).toEqual([{ type: 'finish', finishReason: 'tool_calls', usage: expect.anything() }]);
    expect(events.at(-1)?.type).toBe('finish');
  });

  test('a reply may say something before its calls, whole and streamed', async () => {
    contract.emulator().enqueue({ reply: 'Let me look that up.', toolCalls: [[SEARCH_CALL]] });
    const completion = await createModel().complete(createRequest());
    contract.emulator().enqueue({ reply: 'Let me look that up.', toolCalls: [[SEARCH_CALL]] });
    const streamed = await collectStream(createModel().stream(createRequest()));

    expect(completion).toMatchObject({ text: 'Let me look that up.', finishReason: 'tool_calls', toolCalls: [expectedCalls([SEARCH_CALL])[0]] });
    expect(streamed.text).toBe('Let me look that up.');
    expect(joinToolCalls(streamed.events)).toMatchObject(expectedCalls([SEARCH_CALL]));
  });

  test('a history with the calls and their results is accepted, reaches the provider in order, and is answered with text', async () => {
    contract.emulator().enqueue({ toolCalls: [[SEARCH_CALL]] });
    const completion = await createModel().complete(createRequest({ messages: CONVERSATION_WITH_RESULTS }));
    const record = lastRecord();

    // The behaviour's one step was made already (the history holds a round of calls since the question).
    expect(completion).toEqual({ text: EXPECTED_REPLY, finishReason: 'stop', usage: expect.anything() });
    expect(record?.messages).toEqual(recordedFormOf(CONVERSATION_WITH_RESULTS, contract.toolCallIds));
    expect(completion.usage?.promptTokens).toBe(countPromptTokens(CONVERSATION_WITH_RESULTS, TEST_TOOLS));
  });

  test('two steps of calls, driven by one behaviour written in the question, then a text answer', async () => {
    const behaviour = { toolCalls: [[SEARCH_CALL, READ_CALL], [{ name: 'search_observations', arguments: { code: '8480-6' } }]] };
    const question = `How is the heart rate? [emulator-behaviour ${JSON.stringify(behaviour)}]`;
    let messages: ChatMessage[] = [CONVERSATION[0], { role: 'user', content: question }];
    const steps: string[][] = [];
    let answer = '';
    for (let step = 0; step < 4 && answer === ''; step++) {
      const { text, events, error } = await collectStream(createModel().stream(createRequest({ messages })));
      expect(error).toBeUndefined();
      const calls = joinToolCalls(events);
      if (calls.length === 0) {
        answer = text;
        break;
      }
      steps.push(calls.map((call) => call.name));
      const results = calls.map((call): ChatMessage => ({ role: 'tool', toolCallId: call.id, content: `${call.name} found nothing new` }));
      messages = [...messages, { role: 'assistant', content: text, toolCalls: calls }, ...results];
    }

    expect(steps).toEqual([['search_observations', 'read_patient'], ['search_observations']]);
    expect(answer).toBe(`Echo: ${question}`);
    expect(contract.emulator().received).toHaveLength(3);
    expect(lastRecord()?.messages).toEqual(recordedFormOf(messages, contract.toolCallIds));
  });

  test("with tool choice 'none' the model answers with text", async () => {
    contract.emulator().enqueue({ toolCalls: [[SEARCH_CALL]] });
    const completion = await createModel().complete(createRequest({ toolChoice: 'none' }));

    expect(completion).toEqual({ text: EXPECTED_REPLY, finishReason: 'stop', usage: expect.anything() });
  });

  test('a request without tools sends no tool choice and no parallel_tool_calls (the provider would refuse them)', async () => {
    const completion = await createModel().complete(createRequest({ tools: [], toolChoice: 'required', options: { parallelToolCalls: true } }));

    expect(completion.text).toBe(EXPECTED_REPLY);
    expect(lastRecord()).toMatchObject({ tools: [] });
    expect(lastRecord()?.toolChoice).toBeUndefined();
  });

  test('a stream cut after a call began throws a retryable upstream_error after the call so far', async () => {
    contract.emulator().enqueue({ toolCalls: [[SEARCH_CALL, READ_CALL]], cutAfterTokens: 1 });
    const { events, error } = await collectStream(createModel().stream(createRequest()));

    expect(events[0]).toMatchObject({ type: 'tool_call', index: 0, name: 'search_observations' });
    expect(events.some((event) => event.type === 'finish')).toBe(false);
    expect(expectAppError(error)).toMatchObject({ code: 'upstream_error', isRetryable: true, details: { reason: 'stream_cut' } });
  });

  if (contract.takesToolChoice) {
    test('each tool choice reaches the provider as its own', async () => {
      const choices: ChatToolChoice[] = ['auto', 'none', 'required', { name: 'read_patient' }];
      for (const toolChoice of choices) {
        await createModel().complete(createRequest({ toolChoice }));
      }

      expect(contract.emulator().received.map((record) => record.toolChoice)).toEqual(choices);
    });
  }

  if (contract.toolCallIds === 'provider') {
    test('a history the provider refuses (a result without its call, a call without its result) is a non-retryable 400', async () => {
      const orphanResult: ChatMessage[] = [...CONVERSATION, { role: 'tool', toolCallId: 'call_unknown', content: 'nothing' }];
      const unanswered: ChatMessage[] = [...CONVERSATION_WITH_RESULTS.slice(0, 5), { role: 'user', content: 'Never mind.' }];
      for (const messages of [orphanResult, unanswered]) {
        const error = expectAppError(await createModel().complete(createRequest({ messages })).catch((caught: unknown) => caught));

        expect(error).toMatchObject({ code: 'upstream_error', isRetryable: false, details: { upstreamStatus: 400 } });
        expectNoSecrets(error);
        expect(JSON.stringify({ message: error.message, details: error.details })).not.toContain('call_');
      }
      expect(contract.emulator().received).toHaveLength(0);
    });
  }
}
