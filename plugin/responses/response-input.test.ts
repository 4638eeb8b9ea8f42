import { appErrorOf } from '../../test/support/app-error.ts';
import { readInputItems, toInputMessages, type ResolvedInputItem } from './response-input.ts';

const messagesOf = (input: readonly unknown[]) => toInputMessages(readInputItems(input) as ResolvedInputItem[]);
const paramOf = (input: readonly unknown[]): unknown => appErrorOf(() => readInputItems(input)).details?.param;

describe('the input items of a Responses request', () => {
  test('messages of every role, as strings or text parts (kept as parts for the providers that take them)', () => {
    const { messages } = messagesOf([
      { role: 'developer', content: 'Be brief.' },
      { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'hi' }, { type: 'input_text', text: ' there' }] },
      { role: 'user', content: [{ type: 'input_text', text: 'one part' }] },
    ]);
    expect(messages).toEqual([
      { role: 'developer', content: 'Be brief.' },
      { role: 'user', content: 'hi there', parts: ['hi', ' there'] },
      { role: 'user', content: 'one part' },
    ]);
  });

  test("the model's message and calls, as the API returned them and a client sends them back, make one assistant message", () => {
    const { messages, itemIndex } = messagesOf([
      { role: 'user', content: 'Weather in Lyon?' },
      {
        id: 'msg_1',
        type: 'message',
        role: 'assistant',
        status: 'completed',
        content: [{ type: 'output_text', text: 'Let me look.', annotations: [], logprobs: [] }],
      },
      { id: 'fc_1_0', type: 'function_call', status: 'completed', call_id: 'call_1', name: 'get_weather', arguments: '{"city":"Lyon"}' },
      { type: 'function_call', call_id: 'call_2', name: 'get_time', arguments: '{}' },
      { type: 'function_call_output', call_id: 'call_1', output: '18 °C' },
      { type: 'function_call_output', call_id: 'call_2', output: [{ type: 'input_text', text: 'noon' }], status: 'completed' },
    ]);
    expect(messages).toEqual([
      { role: 'user', content: 'Weather in Lyon?' },
      {
        role: 'assistant',
        content: 'Let me look.',
        toolCalls: [
          { id: 'call_1', name: 'get_weather', arguments: '{"city":"Lyon"}' },
          { id: 'call_2', name: 'get_time', arguments: '{}' },
        ],
      },
      { role: 'tool', content: '18 °C', toolCallId: 'call_1' },
      { role: 'tool', content: 'noon', toolCallId: 'call_2' },
    ]);
    // Each message's first item, for the errors that name a message by its item.
    expect(itemIndex).toEqual([0, 1, 4, 5]);
  });

  test("what the API returns on its items is taken back: an assistant message's phase, a direct caller, a call that is not asynchronous, an output's tool name", () => {
    const { messages } = messagesOf([
      { role: 'user', content: 'Weather in Lyon?' },
      { type: 'message', role: 'assistant', phase: 'commentary', content: [{ type: 'output_text', text: 'Let me look.', annotations: [], logprobs: [] }] },
      { type: 'function_call', call_id: 'call_1', name: 'get_weather', arguments: '{}', caller: { type: 'direct' }, namespace: null, async: false },
      { type: 'function_call_output', call_id: 'call_1', output: '18 °C', name: 'get_weather', caller: { type: 'direct' }, namespace: null },
    ]);
    expect(messages).toEqual([
      { role: 'user', content: 'Weather in Lyon?' },
      { role: 'assistant', content: 'Let me look.', toolCalls: [{ id: 'call_1', name: 'get_weather', arguments: '{}' }] },
      { role: 'tool', content: '18 °C', toolCallId: 'call_1' },
    ]);
  });

  test('a function call without a message before it opens an assistant message of its own', () => {
    const { messages } = messagesOf([
      { role: 'user', content: 'Time?' },
      { type: 'function_call', call_id: 'call_2', name: 'get_time', arguments: '{}' },
    ]);
    expect(messages.at(-1)).toEqual({ role: 'assistant', content: '', toolCalls: [{ id: 'call_2', name: 'get_time', arguments: '{}' }] });
  });

  test('item references are read, with or without their type', () => {
    expect(readInputItems([{ type: 'item_reference', id: 'msg_1' }, { id: 'fc_1_0' }])).toEqual([
      { kind: 'reference', index: 0, id: 'msg_1' },
      { kind: 'reference', index: 1, id: 'fc_1_0' },
    ]);
  });

  test.each([
    ['input.0.content.0.type', [{ role: 'user', content: [{ type: 'input_image', image_url: 'https://example.org/x.png' }] }]],
    ['input.0.content.0.type', [{ role: 'user', content: [{ type: 'output_text', text: 'not mine' }] }]],
    ['input.0.content.0.annotations', [{ role: 'assistant', content: [{ type: 'output_text', text: 'x', annotations: [{ type: 'url_citation' }] }] }]],
    ['input.0.content.0.prompt_cache_breakpoint', [{ role: 'user', content: [{ type: 'input_text', text: 'x', prompt_cache_breakpoint: { mode: 'explicit' } }] }]],
    ['input.0.phase', [{ role: 'user', content: 'x', phase: 'final_answer' }]],
    ['input.0.phase', [{ role: 'assistant', content: 'x', phase: 'aside' }]],
    ['input.0.role', [{ role: 'tool', content: 'x' }]],
    ['input.1.type', [{ role: 'user', content: 'hi' }, { type: 'reasoning', id: 'rs_1', summary: [] }]],
    ['input.0.type', [{ type: 'web_search_call', id: 'ws_1' }]],
    ['input.0.type', [{ content: 'no role' }]],
    ['input.0.namespace', [{ type: 'function_call', call_id: 'c', name: 'f', arguments: '{}', namespace: 'tools' }]],
    ['input.0.caller', [{ type: 'function_call', call_id: 'c', name: 'f', arguments: '{}', caller: { type: 'program', caller_id: 'p' } }]],
    ['input.0.async', [{ type: 'function_call', call_id: 'c', name: 'f', arguments: '{}', async: 'yes' }]],
    ['input.0.namespace', [{ type: 'function_call_output', call_id: 'c', output: 'x', namespace: 'tools' }]],
    ['input.0.caller', [{ type: 'function_call_output', call_id: 'c', output: 'x', caller: { type: 'program', caller_id: 'p' } }]],
    ['input.0.name', [{ type: 'function_call_output', call_id: 'c', output: 'x', name: 'not a name' }]],
    ['input.0.output.0.type', [{ type: 'function_call_output', call_id: 'c', output: [{ type: 'input_file', file_id: 'file_1' }] }]],
    ['input.0.call_id', [{ type: 'function_call_output', call_id: ' ', output: 'x' }]],
    ['input.0', ['not an item']],
  ])('%s is refused by name', (param, input) => {
    expect(paramOf(input)).toBe(param);
  });

  test('an asynchronous function call is refused with the reason; one that says it is not asynchronous is read', () => {
    const error = appErrorOf(() => readInputItems([{ type: 'function_call', call_id: 'c', name: 'f', arguments: '{}', async: true }]));
    expect(error.details?.param).toBe('input.0.async');
    expect(error.message).toContain('asynchronous function calls are not supported');
    expect(readInputItems([{ type: 'function_call', call_id: 'c', name: 'f', arguments: '{}', async: false }])).toEqual([
      { kind: 'function_call', index: 0, call: { id: 'c', name: 'f', arguments: '{}' } },
    ]);
  });

  test('a string input is one user message', () => {
    expect(readInputItems('hello')).toEqual([{ kind: 'message', index: 0, role: 'user', text: 'hello' }]);
  });
});
