import { afterEach, beforeEach, describe, expect, test } from '@jest/globals';
import Anthropic from '@anthropic-ai/sdk';
import type { RawMessageStreamEvent } from '@anthropic-ai/sdk/resources/messages';
import OpenAI, { AzureOpenAI } from 'openai';
import type { ChatCompletionChunk, ChatCompletionMessageParam, ChatCompletionTool } from 'openai/resources/chat/completions';
import { Ollama } from 'ollama';
import type { ChatResponse, Tool } from 'ollama';
import { InvalidBehaviourError, countPromptTokens, parseBehaviour, startLlmEmulator } from './index.ts';
import type { EmulatorBehaviour, LlmEmulator } from './index.ts';

let emulator: LlmEmulator;

beforeEach(async () => {
  emulator = await startLlmEmulator();
});

afterEach(async () => {
  await emulator.close();
});

const LOOKUP = { name: 'lookup_vitals', arguments: { patient: 'p-1', codes: ['8867-4', '8480-6'] } };
const NOW = { name: 'current_time', arguments: {} };
const TWO_STEPS: EmulatorBehaviour = { toolCalls: [[LOOKUP, NOW], [{ name: 'lookup_vitals', arguments: { patient: 'p-2' } }]] };
const SCHEMA = { type: 'object' as const, properties: { patient: { type: 'string' }, codes: { type: 'array', items: { type: 'string' } } } };
const OPENAI_TOOLS: ChatCompletionTool[] = [
  { type: 'function', function: { name: 'lookup_vitals', description: 'Reads vital signs.', parameters: SCHEMA } },
  { type: 'function', function: { name: 'current_time', parameters: { type: 'object', properties: {} } } },
];
const NORMALIZED_TOOLS = [
  { name: 'lookup_vitals', description: 'Reads vital signs.', parameters: SCHEMA },
  { name: 'current_time', parameters: { type: 'object', properties: {} } },
];
const ANTHROPIC_TOOLS = [
  { name: 'lookup_vitals', description: 'Reads vital signs.', input_schema: SCHEMA },
  { name: 'current_time', input_schema: { type: 'object' as const, properties: {} } },
];

const ANTHROPIC_REQUEST = { model: 'claude-test', max_tokens: 100, messages: [{ role: 'user' as const, content: 'vitals?' }] };

function createOpenAi(): OpenAI {
  return new OpenAI({ apiKey: 'sk-test', baseURL: `${emulator.url}/v1`, maxRetries: 0 });
}

function createAnthropic(): Anthropic {
  return new Anthropic({ apiKey: 'sk-ant-test', baseURL: emulator.url, maxRetries: 0 });
}

describe('the toolCalls knob', () => {
  test('is checked like the other knobs: unknown fields and bad values are refused with a clear message', () => {
    expect(parseBehaviour(TWO_STEPS)).toEqual(TWO_STEPS);
    expect(() => parseBehaviour({ toolCalls: [LOOKUP] })).toThrow(new InvalidBehaviourError('toolCalls[0] must be a non-empty array of calls'));
    expect(() => parseBehaviour({ toolCalls: [[]] })).toThrow('toolCalls[0] must be a non-empty array of calls');
    expect(() => parseBehaviour({ toolCalls: [[{ ...LOOKUP, argument: {} }]] })).toThrow('unknown field "argument" in toolCalls[0][0]');
    expect(() => parseBehaviour({ toolCalls: [[{ name: 'x', arguments: '{}' }]] })).toThrow('toolCalls[0][0].arguments must be an object');
    expect(() => parseBehaviour({ toolCalls: [[{ name: '', arguments: {} }]] })).toThrow('toolCalls[0][0].name must be a non-empty string');
    expect(() => parseBehaviour({ toolCalls: [[{ ...NOW, id: 7 }]] })).toThrow('toolCalls[0][0].id must be a non-empty string');
    expect(() => parseBehaviour({ toolCalls: {} })).toThrow('toolCalls must be an array of steps, each an array of calls');
  });

  test('written in the user message, its brackets (and braces in its strings) do not end the marker', async () => {
    const behaviour = { reply: 'A "quoted" } and ] here.', toolCalls: [[LOOKUP]] };
    const content = `Check the vitals [emulator-behaviour ${JSON.stringify(behaviour)}] please`;
    const completion = await createOpenAi().chat.completions.create({ model: 'gpt-test', messages: [{ role: 'user', content }], tools: OPENAI_TOOLS });

    expect(completion.choices[0].message).toMatchObject({ content: 'A "quoted" } and ] here.', tool_calls: [{ function: { name: 'lookup_vitals' } }] });
    expect(emulator.received[0].behaviour).toEqual(behaviour);
  });

  test('the model answers with text when the request offers no tools, or says none', async () => {
    emulator.setBehaviour({ toolCalls: [[LOOKUP]] });
    const client = createOpenAi();
    const withoutTools = await client.chat.completions.create({ model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }] });
    const choseNone = await client.chat.completions.create({ model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }], tools: OPENAI_TOOLS, tool_choice: 'none' });

    for (const completion of [withoutTools, choseNone]) {
      expect(completion.choices[0]).toMatchObject({ message: { content: 'Echo: hi' }, finish_reason: 'stop' });
      expect(completion.choices[0].message.tool_calls).toBeUndefined();
    }
  });
});

describe('OpenAI', () => {
  test('a step is a message with tool_calls and null content, finishing with tool_calls', async () => {
    emulator.enqueue({ toolCalls: [[LOOKUP, { ...NOW, id: 'call_fixed' }]] });
    const completion = await createOpenAi().chat.completions.create({ model: 'gpt-test', messages: [{ role: 'user', content: 'vitals?' }], tools: OPENAI_TOOLS });

    expect(completion.choices[0]).toMatchObject({
      finish_reason: 'tool_calls',
      message: {
        role: 'assistant',
        content: null,
        tool_calls: [
          { id: 'call_1_0', type: 'function', function: { name: 'lookup_vitals', arguments: JSON.stringify(LOOKUP.arguments) } },
          { id: 'call_fixed', type: 'function', function: { name: 'current_time', arguments: '{}' } },
        ],
      },
    });
    // A call's tokens: its name and the words of its arguments (lookup_vitals patient p-1 codes 8867-4 8480-6; current_time).
    expect(completion.usage?.completion_tokens).toBe(7);
    expect(emulator.received[0]).toMatchObject({ tools: NORMALIZED_TOOLS });
    expect(emulator.received[0].toolChoice).toBeUndefined();
  });

  test("streams each call's id and name first, then its arguments in pieces, and the SDK's accumulator takes them", async () => {
    emulator.enqueue({ toolCalls: [[LOOKUP]] });
    const stream = await createOpenAi().chat.completions.create({
      model: 'gpt-test',
      messages: [{ role: 'user', content: 'vitals?' }],
      tools: OPENAI_TOOLS,
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks: ChatCompletionChunk[] = [];
    for await (const chunk of stream) {
      chunks.push(chunk);
    }
    const deltas = chunks.flatMap((chunk) => chunk.choices[0]?.delta.tool_calls ?? []);
    emulator.enqueue({ reply: 'Looking.', toolCalls: [[LOOKUP, NOW]] });
    const accumulated = await createOpenAi()
      .chat.completions.stream({ model: 'gpt-test', messages: [{ role: 'user', content: 'vitals?' }], tools: OPENAI_TOOLS })
      .finalChatCompletion();

    expect(chunks[0].choices[0].delta).toMatchObject({ role: 'assistant', content: null });
    expect(deltas[0]).toEqual({ index: 0, id: 'call_1_0', type: 'function', function: { name: 'lookup_vitals', arguments: '' } });
    expect(deltas.length).toBeGreaterThan(2);
    expect(deltas.map((delta) => delta.function?.arguments).join('')).toBe(JSON.stringify(LOOKUP.arguments));
    expect(chunks.at(-2)?.choices[0].finish_reason).toBe('tool_calls');
    expect(chunks.at(-1)?.usage).toMatchObject({ completion_tokens: 6 });
    expect(accumulated.choices[0].message).toMatchObject({
      content: 'Looking.',
      tool_calls: [
        { id: 'call_2_0', function: { name: 'lookup_vitals', arguments: JSON.stringify(LOOKUP.arguments) } },
        { id: 'call_2_1', function: { name: 'current_time', arguments: '{}' } },
      ],
    });
  });

  test('steps follow the rounds of calls since the last user message, then text; the records carry the calls and results', async () => {
    emulator.setBehaviour(TWO_STEPS);
    const client = createOpenAi();
    const messages: ChatCompletionMessageParam[] = [{ role: 'user', content: 'vitals?' }];
    const replies = [];
    for (let step = 0; step < 3; step++) {
      const completion = await client.chat.completions.create({ model: 'gpt-test', messages, tools: OPENAI_TOOLS, tool_choice: 'auto' });
      const message = completion.choices[0].message;
      replies.push(message);
      messages.push({ role: 'assistant', content: message.content, tool_calls: message.tool_calls });
      for (const call of message.tool_calls ?? []) {
        messages.push({ role: 'tool', tool_call_id: call.id, content: `result of ${call.id}` });
      }
    }
    const nextQuestion: ChatCompletionMessageParam[] = [...messages.slice(0, -1), { role: 'user', content: 'and now?' }];
    const again = await client.chat.completions.create({ model: 'gpt-test', messages: nextQuestion, tools: OPENAI_TOOLS });

    expect(replies.map((reply) => reply.tool_calls?.map((call) => call.id))).toEqual([['call_1_0', 'call_1_1'], ['call_2_0'], undefined]);
    expect(replies[2].content).toBe('Echo: vitals?');
    // A new user message starts the steps again.
    expect(again.choices[0].message.tool_calls?.map((call) => (call.type === 'function' ? call.function.name : call.type))).toEqual(['lookup_vitals', 'current_time']);
    const third = emulator.received[2];
    expect(third.toolChoice).toBe('auto');
    expect(third.messages).toEqual([
      { role: 'user', content: 'vitals?' },
      {
        role: 'assistant',
        content: '',
        toolCalls: [
          { id: 'call_1_0', name: 'lookup_vitals', arguments: JSON.stringify(LOOKUP.arguments) },
          { id: 'call_1_1', name: 'current_time', arguments: '{}' },
        ],
      },
      { role: 'tool', content: 'result of call_1_0', toolCallId: 'call_1_0' },
      { role: 'tool', content: 'result of call_1_1', toolCallId: 'call_1_1' },
      { role: 'assistant', content: '', toolCalls: [{ id: 'call_2_0', name: 'lookup_vitals', arguments: '{"patient":"p-2"}' }] },
      { role: 'tool', content: 'result of call_2_0', toolCallId: 'call_2_0' },
    ]);
    expect(third.body.messages).toEqual(messages.slice(0, 6));
  });

  test("prompt tokens count the tools' schemas, the calls' arguments and the results", async () => {
    const messages: ChatCompletionMessageParam[] = [
      { role: 'user', content: 'vitals?' },
      { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'lookup_vitals', arguments: '{"patient": "p-1"}' } }] },
      { role: 'tool', tool_call_id: 'c1', content: 'pulse 60 bpm' },
    ];
    const completion = await createOpenAi().chat.completions.create({ model: 'gpt-test', messages, tools: OPENAI_TOOLS });

    // vitals? (1) + lookup_vitals patient p-1 (3) + pulse 60 bpm (3), and the two tools' names, description and schema words.
    expect(completion.usage?.prompt_tokens).toBe(7 + countPromptTokens([], NORMALIZED_TOOLS));
    expect(countPromptTokens([], NORMALIZED_TOOLS)).toBe(20);
  });

  test("Azure streams the calls after its prompt-filter chunk, and the SDK's accumulator takes them", async () => {
    emulator.enqueue({ toolCalls: [[NOW]] });
    const client = new AzureOpenAI({ apiKey: 'azure-test', endpoint: emulator.url, apiVersion: '2024-10-21', deployment: 'gpt-4o', maxRetries: 0 });
    const completion = await client.chat.completions
      .stream({
        model: 'gpt-4o',
        messages: [{ role: 'user', content: 'time?' }],
        tools: OPENAI_TOOLS,
        tool_choice: { type: 'function', function: { name: 'current_time' } },
      })
      .finalChatCompletion();

    expect(completion.choices[0]).toMatchObject({
      finish_reason: 'tool_calls',
      message: { tool_calls: [{ id: 'call_1_0', function: { name: 'current_time', arguments: '{}' } }] },
    });
    expect(emulator.received[0]).toMatchObject({ provider: 'azure', toolChoice: { name: 'current_time' } });
  });
});

describe('Anthropic', () => {
  test('a step is tool_use blocks (after the text, if any), stopping with tool_use', async () => {
    emulator.enqueue({ reply: 'Let me check.', toolCalls: [[LOOKUP, NOW]] });
    const message = await createAnthropic().messages.create({ ...ANTHROPIC_REQUEST, tools: ANTHROPIC_TOOLS });

    expect(message.stop_reason).toBe('tool_use');
    expect(message.content).toEqual([
      { type: 'text', text: 'Let me check.' },
      { type: 'tool_use', id: 'toolu_1_0', name: 'lookup_vitals', input: LOOKUP.arguments },
      { type: 'tool_use', id: 'toolu_1_1', name: 'current_time', input: {} },
    ]);
    expect(emulator.received[0].tools).toEqual(NORMALIZED_TOOLS);
  });

  test('streams a tool_use block per call with input_json_delta pieces, and the SDK builds the final message', async () => {
    emulator.enqueue({ toolCalls: [[LOOKUP, NOW]] });
    const raw = await createAnthropic().messages.create({ ...ANTHROPIC_REQUEST, tools: ANTHROPIC_TOOLS, stream: true });
    const events: RawMessageStreamEvent[] = [];
    for await (const event of raw) {
      events.push(event);
    }
    emulator.enqueue({ reply: 'One moment.', toolCalls: [[LOOKUP, NOW]] });
    const final = await createAnthropic()
      .messages.stream({ ...ANTHROPIC_REQUEST, tools: ANTHROPIC_TOOLS, tool_choice: { type: 'any' } })
      .finalMessage();

    expect(events[1]).toEqual({ type: 'content_block_start', index: 0, content_block: { type: 'tool_use', id: 'toolu_1_0', name: 'lookup_vitals', input: {} } });
    const pieces = events.flatMap((event) =>
      event.type === 'content_block_delta' && event.delta.type === 'input_json_delta' && event.index === 0 ? [event.delta.partial_json] : [],
    );
    expect(pieces.length).toBeGreaterThan(1);
    expect(pieces.join('')).toBe(JSON.stringify(LOOKUP.arguments));
    expect(events.filter((event) => event.type === 'content_block_stop').map((event) => event.index)).toEqual([0, 1]);
    expect(events.find((event) => event.type === 'message_delta')).toMatchObject({ delta: { stop_reason: 'tool_use' } });
    expect(final.content).toMatchObject([
      { type: 'text', text: 'One moment.' },
      { type: 'tool_use', id: 'toolu_2_0', name: 'lookup_vitals', input: LOOKUP.arguments },
      { type: 'tool_use', id: 'toolu_2_1', name: 'current_time', input: {} },
    ]);
    expect(emulator.received[1].toolChoice).toBe('required');
  });

  test('tool_result blocks are recorded as tool messages before the text of their user message; steps count tool_use rounds', async () => {
    emulator.setBehaviour(TWO_STEPS);
    const message = await createAnthropic().messages.create({
      model: 'claude-test',
      max_tokens: 100,
      system: 'Be brief.',
      tools: ANTHROPIC_TOOLS,
      tool_choice: { type: 'tool', name: 'lookup_vitals' },
      messages: [
        { role: 'user', content: 'vitals?' },
        { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_a', name: 'current_time', input: {} }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_a', content: [{ type: 'text', text: '09:00' }] }, { type: 'text', text: 'Go on.' }] },
        { role: 'assistant', content: [{ type: 'text', text: 'Reading.' }, { type: 'tool_use', id: 'toolu_b', name: 'lookup_vitals', input: { patient: 'p-1' } }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_b', content: 'pulse 60' }] },
      ],
    });

    // "Go on." is the last user message: one round of calls since, so the second step.
    expect(message.content).toEqual([{ type: 'tool_use', id: 'toolu_1_0', name: 'lookup_vitals', input: { patient: 'p-2' } }]);
    expect(emulator.received[0].toolChoice).toEqual({ name: 'lookup_vitals' });
    expect(emulator.received[0].messages).toEqual([
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'vitals?' },
      { role: 'assistant', content: '', toolCalls: [{ id: 'toolu_a', name: 'current_time', arguments: '{}' }] },
      { role: 'tool', content: '09:00', toolCallId: 'toolu_a' },
      { role: 'user', content: 'Go on.' },
      { role: 'assistant', content: 'Reading.', toolCalls: [{ id: 'toolu_b', name: 'lookup_vitals', arguments: '{"patient":"p-1"}' }] },
      { role: 'tool', content: 'pulse 60', toolCallId: 'toolu_b' },
    ]);
  });
});

describe('Ollama', () => {
  async function collectParts(stream: AsyncIterable<ChatResponse>): Promise<ChatResponse[]> {
    const parts: ChatResponse[] = [];
    for await (const part of stream) {
      parts.push(part);
    }
    return parts;
  }

  const tools: Tool[] = [
    { type: 'function', function: { name: 'lookup_vitals', description: 'Reads vital signs.', parameters: SCHEMA } },
    { type: 'function', function: { name: 'current_time', parameters: { type: 'object', properties: {} } } },
  ];

  test('a step is message.tool_calls with object arguments and no ids, whole or on a line of its own', async () => {
    const client = new Ollama({ host: emulator.url });
    emulator.enqueue({ toolCalls: [[LOOKUP, NOW]] });
    const whole = await client.chat({ model: 'llama3.2', messages: [{ role: 'user', content: 'vitals?' }], tools, stream: false });
    emulator.enqueue({ reply: 'Checking.', toolCalls: [[LOOKUP]] });
    const parts = await collectParts(await client.chat({ model: 'llama3.2', messages: [{ role: 'user', content: 'vitals?' }], tools, stream: true }));

    expect(whole.message).toEqual({
      role: 'assistant',
      content: '',
      tool_calls: [{ function: { name: 'lookup_vitals', arguments: LOOKUP.arguments } }, { function: { name: 'current_time', arguments: {} } }],
    });
    expect(whole.done_reason).toBe('stop');
    expect(parts.map((part) => part.message.content)).toEqual(['Checking.', '', '']);
    expect(parts[1].message.tool_calls).toEqual([{ function: { name: 'lookup_vitals', arguments: LOOKUP.arguments } }]);
    expect(parts[2]).toMatchObject({ done: true, done_reason: 'stop' });
  });

  test('records calls with their arguments as JSON and results with their tool_name', async () => {
    emulator.setBehaviour(TWO_STEPS);
    const response = await new Ollama({ host: emulator.url }).chat({
      model: 'llama3.2',
      tools,
      messages: [
        { role: 'user', content: 'vitals?' },
        { role: 'assistant', content: '', tool_calls: [{ function: { name: 'current_time', arguments: {} } }] },
        { role: 'tool', content: '09:00', tool_name: 'current_time' },
      ],
    });

    expect(response.message.tool_calls).toEqual([{ function: { name: 'lookup_vitals', arguments: { patient: 'p-2' } } }]);
    expect(emulator.received[0].messages).toEqual([
      { role: 'user', content: 'vitals?' },
      { role: 'assistant', content: '', toolCalls: [{ name: 'current_time', arguments: '{}' }] },
      { role: 'tool', content: '09:00', toolName: 'current_time' },
    ]);
    expect(emulator.received[0].tools).toEqual(NORMALIZED_TOOLS);
  });
});
