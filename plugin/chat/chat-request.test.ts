import { appErrorOf } from '../../test/support/app-error.ts';
import { parseChatRequest } from './chat-request.ts';

const weather = { type: 'function', function: { name: 'get_weather', description: 'Weather in a city', parameters: { type: 'object', properties: { city: { type: 'string' } } } } };
const call = { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Lyon"}' } };

describe('parseChatRequest', () => {
  test('fields fhirgate does not know are kept by name for the provider check, `__proto__` too; null fields are not given', () => {
    const chat = parseChatRequest(JSON.parse('{"messages":[{"role":"user","content":"A"}],"temperature":null,"vendor_knob":3,"__proto__":{"admin":true}}'));
    const vendorFields = (chat.options as { vendorFields?: Record<string, unknown> }).vendorFields ?? {};
    expect(Object.keys(vendorFields).sort()).toEqual(['__proto__', 'vendor_knob']);
    expect(Object.getOwnPropertyDescriptor(vendorFields, '__proto__')?.value).toEqual({ admin: true });
    expect(chat.temperature).toBeUndefined();
  });

  test('a plain request is read in the port shape, with no tools and no calls to answer', () => {
    const chat = parseChatRequest({ messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'A' }, { role: 'assistant', content: 'B' }, { role: 'user', content: 'C' }] });
    expect(chat.messages).toEqual([
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'A' },
      { role: 'assistant', content: 'B' },
      { role: 'user', content: 'C' },
    ]);
    expect(chat.tools).toBeUndefined();
    expect(chat.answersEarlierCalls).toEqual([]);
  });

  test('tools, tool_choice and a whole function-calling exchange are read in the port shape', () => {
    const chat = parseChatRequest({
      messages: [
        { role: 'user', content: 'Weather in Lyon?' },
        { role: 'assistant', content: null, tool_calls: [call] },
        { role: 'tool', tool_call_id: 'call_1', content: [{ type: 'text', text: '18 °C' }] },
      ],
      tools: [weather],
      tool_choice: { type: 'function', function: { name: 'get_weather' } },
      parallel_tool_calls: false,
    });
    expect(chat.messages).toEqual([
      { role: 'user', content: 'Weather in Lyon?' },
      { role: 'assistant', content: '', toolCalls: [{ id: 'call_1', name: 'get_weather', arguments: '{"city":"Lyon"}' }] },
      { role: 'tool', content: '18 °C', toolCallId: 'call_1' },
    ]);
    expect(chat.tools).toEqual([{ name: 'get_weather', description: 'Weather in a city', parameters: weather.function.parameters }]);
    expect(chat.toolChoice).toEqual({ name: 'get_weather' });
    expect(chat.options).toEqual({ parallelToolCalls: false });
  });

  test('results opening a continued conversation answer its last reply; a new user message follows them', () => {
    const chat = parseChatRequest({
      conversation_id: 'c-1',
      messages: [
        { role: 'tool', tool_call_id: 'call_9', content: '{"ok":true}' },
        { role: 'user', content: 'Thanks. And tomorrow?' },
      ],
    });
    expect(chat.answersEarlierCalls).toEqual(['call_9']);
  });

  test.each([
    ['a result answering no call of a new conversation', { messages: [{ role: 'tool', tool_call_id: 'call_x', content: 'r' }] }, 'messages.0.tool_call_id'],
    [
      'a result answering no call after the conversation went on',
      { conversation_id: 'c', messages: [{ role: 'user', content: 'hi' }, { role: 'tool', tool_call_id: 'call_x', content: 'r' }] },
      'messages.1.tool_call_id',
    ],
    [
      'a call answered twice',
      {
        messages: [
          { role: 'user', content: 'hi' },
          { role: 'assistant', content: null, tool_calls: [call] },
          { role: 'tool', tool_call_id: 'call_1', content: 'a' },
          { role: 'tool', tool_call_id: 'call_1', content: 'b' },
        ],
      },
      'messages.3.tool_call_id',
    ],
    ['tool_choice without tools', { messages: [{ role: 'user', content: 'hi' }], tool_choice: 'required' }, 'tool_choice'],
    ['tool_choice naming another tool', { messages: [{ role: 'user', content: 'hi' }], tools: [weather], tool_choice: { type: 'function', function: { name: 'other' } } }, 'tool_choice'],
    ['a function name with spaces', { messages: [{ role: 'user', content: 'hi' }], tools: [{ type: 'function', function: { name: 'get weather' } }] }, 'tools.0.function.name'],
    ['a tool message without its call id', { messages: [{ role: 'tool', content: 'r' }] }, 'messages.0.tool_call_id'],
    ['an unknown role', { messages: [{ role: 'robot', content: 'x' }] }, 'messages.0.role'],
    ['an unknown patient_context', { messages: [{ role: 'user', content: 'x' }], patient_context: 'all' }, 'patient_context'],
  ])('400 for %s, naming the field', (_name, body, param) => {
    const error = appErrorOf(() => parseChatRequest(body));
    expect(error).toMatchObject({ code: 'invalid_request', status: 400, details: { param } });
    expect(error.message).toMatch(/^Invalid request: /);
  });
});
