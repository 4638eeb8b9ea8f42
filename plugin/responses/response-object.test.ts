import { parseOutputItemId, replyIdOfResponse, responseEndOf, responseObject } from './response-object.ts';

describe('the Responses wire format of the records', () => {
  test('ids read back into the records they name, and nothing else does', () => {
    expect(replyIdOfResponse('resp_0b5e-1.2')).toBe('0b5e-1.2');
    expect(replyIdOfResponse('resp_')).toBeUndefined();
    expect(replyIdOfResponse('chatcmpl-0b5e')).toBeUndefined();
    expect(replyIdOfResponse('resp_a/b')).toBeUndefined();
    expect(parseOutputItemId('msg_0b5e')).toEqual({ kind: 'message', replyId: '0b5e' });
    expect(parseOutputItemId('fc_0b5e-1_2')).toEqual({ kind: 'function_call', replyId: '0b5e-1', index: 2 });
    expect(parseOutputItemId('rs_0b5e')).toBeUndefined();
    expect(parseOutputItemId('fc_0b5e')).toBeUndefined();
  });

  test.each([
    ['completed', 'stop', { status: 'completed' }],
    ['completed', 'tool_calls', { status: 'completed' }],
    ['completed', 'length', { status: 'incomplete', incompleteReason: 'max_output_tokens' }],
    ['completed', 'content_filter', { status: 'incomplete', incompleteReason: 'content_filter' }],
    ['stopped', undefined, { status: 'cancelled' }],
    ['not-done', undefined, { status: 'failed', error: { code: 'server_error', message: 'The provider timed out.' } }],
  ] as const)('a %s reply (finish reason %s) is a response that is %j', (status, finishReason, end) => {
    expect(responseEndOf(status, finishReason, 'The provider timed out.')).toEqual(end);
  });

  const fields = { replyId: 'r1', conversationId: 'c1', created: 1, modelId: 'openai/gpt-4o-mini', end: { status: 'completed' as const }, output: [], usage: null };

  test("a Responses request's settings are echoed; a chat completion's are not mistaken for them", () => {
    const tools = [{ type: 'function', name: 'f', parameters: {}, strict: true }];
    const echoed = responseObject({ ...fields, request: { input: 'hi', instructions: 'Be brief.', tools, tool_choice: 'required', store: false, temperature: 0.2, user: 'u1' } });
    expect(echoed).toMatchObject({ id: 'resp_r1', instructions: 'Be brief.', tools, tool_choice: 'required', store: false, temperature: 0.2, user: 'u1', conversation: { id: 'c1' } });
    expect(echoed.usage).toEqual({ input_tokens: 0, input_tokens_details: { cached_tokens: 0, cache_write_tokens: 0 }, output_tokens: 0, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 0 });

    const chat = responseObject({ ...fields, request: { messages: [], tools: [{ type: 'function', function: { name: 'f' } }], tool_choice: 'required', temperature: 0.2 } });
    expect(chat).toMatchObject({ instructions: null, tools: [], tool_choice: 'auto', store: true, temperature: null });
  });
});
