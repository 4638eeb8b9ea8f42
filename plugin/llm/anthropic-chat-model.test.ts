import { afterAll, afterEach, beforeAll, describe, expect, test } from '@jest/globals';
import { REDACTED, startLlmEmulator } from '../../test/emulator/index.ts';
import type { LlmEmulator } from '../../test/emulator/index.ts';
import { createAnthropicChatModel } from './anthropic-chat-model.ts';
import { CONVERSATION, TEST_API_KEY, collectStream, createTestRequest, describeChatModelContract } from './chat-model-contract.ts';
import type { ChatModelContract } from './chat-model-contract.ts';
import { CONVERSATION_WITH_RESULTS, READ_CALL, SEARCH_CALL, TEST_TOOLS, describeToolCallingContract } from './chat-model-tool-contract.ts';
import type { ChatMessage, ChatModel, ChatModelRequest } from './chat-model.ts';

let emulator: LlmEmulator;

beforeAll(async () => {
  emulator = await startLlmEmulator();
});

afterEach(() => {
  emulator.reset();
});

afterAll(async () => {
  await emulator.close();
});

function createModel(): ChatModel {
  return createAnthropicChatModel({ provider: 'anthropic', apiKey: TEST_API_KEY, baseUrl: emulator.url, timeoutMs: 5000 });
}

function createRequest(overrides: Partial<ChatModelRequest> = {}): ChatModelRequest {
  return createTestRequest('claude-test', overrides);
}

describe('Anthropic', () => {
  const contract: ChatModelContract = {
    wireFormat: 'anthropic',
    model: 'claude-test',
    emulator: () => emulator,
    createModel: ({ baseUrl, apiKey, timeoutMs }) => createAnthropicChatModel({ provider: 'anthropic', apiKey, baseUrl, timeoutMs }),
    readMaxTokens: (body) => body.max_tokens,
    readTemperature: (body) => body.temperature,
    toolCallIds: 'provider',
    takesToolChoice: true,
  };
  describeChatModelContract(contract);
  describeToolCallingContract(contract);

  test('sends system messages in the system field and the others as messages', async () => {
    const messages = [
      { role: 'system' as const, content: 'Be brief.' },
      { role: 'system' as const, content: 'Cite guidelines.' },
      { role: 'user' as const, content: 'Hello' },
    ];
    await createModel().complete(createRequest({ messages }));
    const { body, headers } = emulator.received[0];

    expect(body.system).toBe('Be brief.\n\nCite guidelines.');
    expect(body.messages).toEqual([{ role: 'user', content: 'Hello' }]);
    // @anthropic-ai/sdk 1.12 sends the key as a bearer token.
    expect(headers.authorization).toBe(REDACTED);
  });

  test('maps stop to stop_sequences and user to metadata.user_id', async () => {
    const options = { topP: 0.8, topK: 20, stop: ['END', 'STOP'], endUser: { user: 'user-7' } };
    await collectStream(createModel().stream(createRequest({ options, temperature: 0 })));

    expect(emulator.received[0].body).toEqual({
      model: 'claude-test',
      max_tokens: 100,
      system: CONVERSATION[0].content,
      messages: CONVERSATION.slice(1),
      temperature: 0,
      top_p: 0.8,
      top_k: 20,
      stop_sequences: ['END', 'STOP'],
      metadata: { user_id: 'user-7' },
      stream: true,
    });
  });

  test('usage of a stream takes input tokens from message_start and the cumulative output from message_delta', async () => {
    emulator.enqueue({ reply: 'one two three', usage: { promptTokens: 40, completionTokens: 12 } });
    const { events } = await collectStream(createModel().stream(createRequest()));

    // message_start says output_tokens 1; adding it to message_delta's 12 would report 13.
    expect(events.at(-1)).toEqual({ type: 'finish', finishReason: 'stop', usage: { promptTokens: 40, completionTokens: 12 } });
  });

  test('a max_tokens stop reason finishes with length', async () => {
    const completion = await createModel().complete(createRequest({ maxTokens: 1 }));

    expect(completion).toMatchObject({ text: 'Echo:', finishReason: 'length' });
  });

  test('an overloaded error (529) is retryable', async () => {
    emulator.enqueue({ errorStatus: 529 });
    const error = await createModel()
      .complete(createRequest())
      .catch((caught: unknown) => caught);

    expect(error).toMatchObject({
      code: 'upstream_error',
      isRetryable: true,
      details: { upstreamStatus: 529, upstreamType: 'overloaded_error' },
    });
  });

  test("sends tools with input_schema and the tool choice in Anthropic's terms, parallel_tool_calls: false as disable_parallel_tool_use", async () => {
    const tools = [...TEST_TOOLS, { name: 'current_time', parameters: {} }];
    await createModel().complete(createRequest({ tools, toolChoice: 'required', options: { parallelToolCalls: false } }));
    await createModel().complete(createRequest({ tools, toolChoice: { name: 'read_patient' } }));
    const [first, second] = emulator.received;

    expect(first.body.tools).toEqual([
      ...TEST_TOOLS.map((tool) => ({ name: tool.name, description: tool.description, input_schema: tool.parameters })),
      { name: 'current_time', input_schema: { type: 'object' } },
    ]);
    expect(first.body.tool_choice).toEqual({ type: 'any', disable_parallel_tool_use: true });
    expect(first.body).not.toHaveProperty('parallel_tool_calls');
    expect(second.body.tool_choice).toEqual({ type: 'tool', name: 'read_patient' });
  });

  test("calls become tool_use blocks after the text; a round's results and the user's next words share one user message", async () => {
    const messages: ChatMessage[] = [
      ...CONVERSATION_WITH_RESULTS.slice(0, 4),
      { ...CONVERSATION_WITH_RESULTS[4], content: 'Let me check.' },
      ...CONVERSATION_WITH_RESULTS.slice(5),
      { role: 'user', content: 'And the blood pressure?' },
    ];
    const completion = await createModel().complete(createRequest({ messages, tools: TEST_TOOLS }));
    const [record] = emulator.received;

    expect(record.body.messages).toEqual([
      ...CONVERSATION.slice(1),
      {
        role: 'assistant',
        content: [
          { type: 'text', text: 'Let me check.' },
          { type: 'tool_use', id: 'call_history_0', name: 'search_observations', input: { code: '8867-4', count: 3 } },
          { type: 'tool_use', id: 'call_history_1', name: 'read_patient', input: {} },
        ],
      },
      {
        role: 'user',
        content: [
          { type: 'tool_result', tool_use_id: 'call_history_0', content: 'Heart rate 48 bpm on 2025-03-01.' },
          { type: 'tool_result', tool_use_id: 'call_history_1', content: 'Jane Doe, born 1990, marathon runner.' },
          { type: 'text', text: 'And the blood pressure?' },
        ],
      },
    ]);
    // The emulator, as Anthropic, accepted the results as answering the calls just before them.
    expect(completion.text).toBe('Echo: And the blood pressure?');
  });

  test('arguments that are not a JSON object are sent as an object that keeps their text; empty arguments as {}', async () => {
    const messages: ChatMessage[] = [
      { role: 'user', content: 'Look it up.' },
      {
        role: 'assistant',
        content: '',
        toolCalls: [
          { id: 'toolu_a', name: 'search_observations', arguments: '{"code": "8867-4"' },
          { id: 'toolu_b', name: 'read_patient', arguments: '' },
          { id: 'toolu_c', name: 'read_patient', arguments: '[1, 2]' },
        ],
      },
      { role: 'tool', toolCallId: 'toolu_a', content: 'The arguments are not valid JSON.' },
      { role: 'tool', toolCallId: 'toolu_b', content: 'Jane Doe.' },
      { role: 'tool', toolCallId: 'toolu_c', content: 'The arguments are not an object.' },
    ];
    await createModel().complete(createRequest({ messages, tools: TEST_TOOLS }));

    expect(emulator.received[0].messages[1].toolCalls?.map((call) => JSON.parse(call.arguments))).toEqual([
      { _unparsed_arguments: '{"code": "8867-4"' },
      {},
      { _unparsed_arguments: '[1, 2]' },
    ]);
  });

  test("calls keep Anthropic's ids; a streamed call without arguments joins to {}", async () => {
    emulator.enqueue({ reply: 'One moment.', toolCalls: [[READ_CALL, SEARCH_CALL]] });
    const { events } = await collectStream(createModel().stream(createRequest({ tools: TEST_TOOLS })));
    emulator.enqueue({ toolCalls: [[READ_CALL]] });
    const completion = await createModel().complete(createRequest({ tools: TEST_TOOLS }));

    // Numbered among the calls (0, 1), not as Anthropic's content blocks (1, 2: the text block is 0).
    expect(events.filter((event) => event.type === 'tool_call' && event.index === 0)).toEqual([
      { type: 'tool_call', index: 0, id: 'toolu_1_0', name: 'read_patient', arguments: '' },
      { type: 'tool_call', index: 0, arguments: '{}' },
    ]);
    expect(events.find((event) => event.type === 'tool_call' && event.index === 1)).toMatchObject({ id: 'toolu_1_1', name: 'search_observations' });
    expect(completion.toolCalls).toEqual([{ id: 'toolu_2_0', name: 'read_patient', arguments: '{}' }]);
  });
});
