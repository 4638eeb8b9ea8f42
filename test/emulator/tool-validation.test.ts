import { afterAll, afterEach, beforeAll, describe, expect, test } from '@jest/globals';
import OpenAI from 'openai';
import { startLlmEmulator } from './index.ts';
import type { LlmEmulator } from './index.ts';

// The requests a real provider refuses for their tools or their tool history are refused here too, in the
// provider's error shape and with its message, and are not recorded (the model never saw them).

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

async function post(path: string, body: Record<string, unknown>): Promise<{ status: number; body: unknown }> {
  const response = await fetch(`${emulator.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: response.status, body: await response.json() };
}

const TOOL = { type: 'function', function: { name: 'lookup', parameters: { type: 'object', properties: {} } } };
const CALL = (id: string) => ({ id, type: 'function', function: { name: 'lookup', arguments: '{}' } });

describe('OpenAI', () => {
  async function askOpenAi(messages: unknown[], extra: Record<string, unknown> = { tools: [TOOL] }): Promise<{ status: number; message: unknown }> {
    const { status, body } = await post('/v1/chat/completions', { model: 'gpt-test', messages, ...extra });
    return { status, message: (body as { error?: { message?: unknown } }).error?.message };
  }

  test('a tool message must answer a call of the assistant message before it', async () => {
    const refusal = {
      status: 400,
      message: "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.",
    };
    const histories = [
      [{ role: 'user', content: 'hi' }, { role: 'tool', tool_call_id: 'call_1', content: 'x' }],
      [{ role: 'user', content: 'hi' }, { role: 'assistant', content: null, tool_calls: [CALL('call_1')] }, { role: 'tool', tool_call_id: 'call_2', content: 'x' }],
      [
        { role: 'user', content: 'hi' },
        { role: 'assistant', content: null, tool_calls: [CALL('call_1')] },
        { role: 'tool', tool_call_id: 'call_1', content: 'x' },
        { role: 'tool', tool_call_id: 'call_1', content: 'again' },
      ],
    ];
    for (const messages of histories) {
      expect(await askOpenAi(messages)).toEqual(refusal);
    }
    expect(emulator.received).toHaveLength(0);
  });

  test('every call must be answered before the next message that is not a tool result', async () => {
    const unanswered = [
      { role: 'user', content: 'hi' },
      { role: 'assistant', content: null, tool_calls: [CALL('call_1'), CALL('call_2')] },
      { role: 'tool', tool_call_id: 'call_2', content: 'x' },
    ];

    for (const messages of [unanswered, [...unanswered, { role: 'user', content: 'and?' }]]) {
      expect(await askOpenAi(messages)).toEqual({
        status: 400,
        message:
          "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. " +
          'The following tool_call_ids did not have response messages: call_1',
      });
    }
  });

  test('results may come in any order; a history answered in full is accepted', async () => {
    const messages = [
      { role: 'user', content: 'hi' },
      { role: 'assistant', content: null, tool_calls: [CALL('call_1'), CALL('call_2')] },
      { role: 'tool', tool_call_id: 'call_2', content: 'two' },
      { role: 'tool', tool_call_id: 'call_1', content: 'one' },
      { role: 'user', content: 'thanks' },
    ];

    expect(await askOpenAi(messages)).toEqual({ status: 200, message: undefined });
  });

  test('malformed tools, calls and choices are refused with the field named', async () => {
    const user = [{ role: 'user', content: 'hi' }];
    const cases: [unknown[], Record<string, unknown>, string][] = [
      [user, { tools: [{ type: 'function', function: { parameters: {} } }] }, "Missing required parameter: 'tools[0].function.name'."],
      [user, { tools: [{ type: 'function', function: { name: 'a', parameters: '{}' } }] }, "Invalid type for 'tools[0].function.parameters': expected an object."],
      [
        user,
        { tools: [{ type: 'function', function: { name: 'has space' } }] },
        "Invalid 'tools[0].function.name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.",
      ],
      [user, { tool_choice: 'auto' }, "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified."],
      [user, { parallel_tool_calls: true }, "Invalid value for 'parallel_tool_calls': 'parallel_tool_calls' is only allowed when 'tools' are specified."],
      [
        user,
        { tools: [TOOL], tool_choice: { type: 'function', function: { name: 'other' } } },
        "Invalid value for 'tool_choice': function 'other' is not among the 'tools'.",
      ],
      [
        [{ role: 'assistant', content: null, tool_calls: [{ type: 'function', function: { name: 'a', arguments: '{}' } }] }],
        {},
        "Missing required parameter: 'messages[0].tool_calls[0].id'.",
      ],
      [
        [{ role: 'assistant', content: null, tool_calls: [] }],
        {},
        "Invalid 'messages[0].tool_calls': empty array. Expected an array with minimum length 1, but got an empty array instead.",
      ],
      [[{ role: 'tool', content: 'x' }], {}, "Missing required parameter: 'messages[0].tool_call_id'."],
    ];
    for (const [messages, extra, message] of cases) {
      expect(await askOpenAi(messages, extra)).toEqual({ status: 400, message });
    }
  });

  test('the openai SDK raises the refusal as its BadRequestError', async () => {
    const client = new OpenAI({ apiKey: 'sk-test', baseURL: `${emulator.url}/v1`, maxRetries: 0 });
    const error = await client.chat.completions
      .create({ model: 'gpt-test', messages: [{ role: 'tool', tool_call_id: 'call_1', content: 'x' }] })
      .catch((caught: unknown) => caught);

    expect(error).toBeInstanceOf(OpenAI.BadRequestError);
  });
});

describe('Anthropic', () => {
  const TOOLS = [{ name: 'lookup', input_schema: { type: 'object', properties: {} } }];
  const USE = (id: string) => ({ type: 'tool_use', id, name: 'lookup', input: {} });
  const RESULT = (id: string) => ({ type: 'tool_result', tool_use_id: id, content: 'x' });

  async function askAnthropic(messages: unknown[], extra: Record<string, unknown> = { tools: TOOLS }): Promise<{ status: number; body: unknown }> {
    return post('/v1/messages', { model: 'claude-test', max_tokens: 50, messages, ...extra });
  }

  function refusal(message: string): { status: number; body: unknown } {
    return { status: 400, body: { type: 'error', error: { type: 'invalid_request_error', message } } };
  }

  test('a tool_result must answer a tool_use of the message just before it', async () => {
    const messages = [
      { role: 'user', content: 'hi' },
      { role: 'assistant', content: [USE('toolu_1')] },
      { role: 'user', content: [RESULT('toolu_1')] },
      { role: 'assistant', content: 'done' },
      { role: 'user', content: [RESULT('toolu_1')] },
    ];

    expect(await askAnthropic(messages)).toEqual(
      refusal(
        'messages.4.content.0: unexpected `tool_use_id` found in `tool_result` blocks: toolu_1. ' +
          'Each `tool_result` block must have a corresponding `tool_use` block in the previous message.',
      ),
    );
    expect(emulator.received).toHaveLength(0);
  });

  test('every tool_use must be answered in the next message', async () => {
    const calls = [{ role: 'user', content: 'hi' }, { role: 'assistant', content: [{ type: 'text', text: 'Checking.' }, USE('toolu_1'), USE('toolu_2')] }];
    const missing = (ids: string) =>
      refusal(
        `messages.1: \`tool_use\` ids were found without \`tool_result\` blocks immediately after: ${ids}. ` +
          'Each `tool_use` block must have a corresponding `tool_result` block in the next message.',
      );

    expect(await askAnthropic([...calls, { role: 'user', content: 'never mind' }])).toEqual(missing('toolu_1, toolu_2'));
    expect(await askAnthropic([...calls, { role: 'user', content: [RESULT('toolu_2')] }])).toEqual(missing('toolu_1'));
    expect(await askAnthropic(calls)).toEqual(missing('toolu_1, toolu_2'));
  });

  test('tool_result blocks come first in their message; consecutive user messages count as one', async () => {
    const calls = [{ role: 'user', content: 'hi' }, { role: 'assistant', content: [USE('toolu_1')] }];

    expect(await askAnthropic([...calls, { role: 'user', content: [{ type: 'text', text: 'here:' }, RESULT('toolu_1')] }])).toEqual(
      refusal(
        'messages.2: Did not find 1 `tool_result` block(s) at the beginning of this message. ' +
          'Messages following `tool_use` blocks must begin with a matching number of `tool_result` blocks.',
      ),
    );
    const split = await askAnthropic([...calls, { role: 'user', content: [RESULT('toolu_1')] }, { role: 'user', content: 'and more' }]);
    expect(split.status).toBe(200);
  });

  test('malformed tools, tool_use blocks and choices are refused with the field named', async () => {
    const user = [{ role: 'user', content: 'hi' }];
    const cases: [unknown[], Record<string, unknown>, string][] = [
      [user, { tools: [{ input_schema: { type: 'object' } }] }, 'tools.0.name: Field required'],
      [user, { tools: [{ name: 'a' }] }, 'tools.0.input_schema: Field required'],
      [user, { tools: [{ name: 'a', input_schema: 'object' }] }, 'tools.0.input_schema: Input should be a valid dictionary'],
      [user, { tools: [{ name: 'a', input_schema: { properties: {} } }] }, "tools.0.input_schema.type: Input should be 'object'"],
      [user, { tools: TOOLS, tool_choice: { type: 'tool' } }, 'tool_choice.tool.name: Field required'],
      [
        [...user, { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'lookup', input: '{}' }] }],
        {},
        'messages.1.content.0.tool_use.input: Input should be a valid dictionary',
      ],
    ];
    for (const [messages, extra, message] of cases) {
      expect(await askAnthropic(messages, extra)).toEqual(refusal(message));
    }
  });
});

describe('Ollama', () => {
  test("arguments and parameters that are not objects are refused with the decoder's message; a nameless tool too", async () => {
    const cases: [Record<string, unknown>, string][] = [
      [
        { messages: [{ role: 'assistant', content: '', tool_calls: [{ function: { name: 'lookup', arguments: '{}' } }] }] },
        'json: cannot unmarshal string into Go struct field ToolCallFunction.messages.tool_calls.function.arguments of type api.ToolCallFunctionArguments',
      ],
      [
        { tools: [{ type: 'function', function: { name: 'a', parameters: '{}' } }] },
        'json: cannot unmarshal string into Go struct field Tool.tools.function.parameters of type api.ToolFunctionParameters',
      ],
      [{ tools: [{ type: 'function', function: { parameters: {} } }] }, 'tools[0]: a tool needs function.name'],
    ];
    for (const [body, error] of cases) {
      expect(await post('/api/chat', { model: 'llama3.2', stream: false, messages: [], ...body })).toEqual({ status: 400, body: { error } });
    }
    expect(emulator.received).toHaveLength(0);
  });
});
