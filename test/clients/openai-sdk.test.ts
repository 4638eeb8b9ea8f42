/**
 * The client matrix: the official `openai` SDK against fhirgate, set up as docs/clients.md shows it (the token as
 * an async `apiKey` function, `X-Project-ID` a default header), on chat completions and on the Responses API: what
 * the user gets, what the provider received and what is on record.
 */
import OpenAI from 'openai';
import { ASK_WEATHER, BAD_TOKEN, CHAT_MODEL, CONTINUED, STREAMED, UNRELATED, useClientMatrix, VITALS_EXAMPLE, VITALS_SCHEMA, WEATHER_TOOL, weatherIn } from './client-matrix.ts';
import type { FhirgateCompletion } from '../support/chat-clients.ts';

/** fhirgate's fields on a chat completion, beside OpenAI's. */

describe('client matrix: the openai SDK', () => {
  const matrix = useClientMatrix();
  let openai: OpenAI;

  beforeEach(() => {
    const { baseURL, apiKey, headers } = matrix.session;
    openai = new OpenAI({ baseURL, apiKey, defaultHeaders: headers, maxRetries: 0 });
  });

  /** A chat completion with fhirgate's own fields (`conversation_id`), which the SDK sends as they are. */
  const complete = async (body: Record<string, unknown>): Promise<FhirgateCompletion> =>
    (await openai.chat.completions.create({ model: CHAT_MODEL, ...body } as unknown as OpenAI.ChatCompletionCreateParamsNonStreaming)) as FhirgateCompletion;

  test('models: list and retrieve', async () => {
    const models = await openai.models.list();
    expect(models.data.map((model) => model.id)).toEqual([CHAT_MODEL]);
    expect(await openai.models.retrieve(CHAT_MODEL)).toMatchObject({ id: CHAT_MODEL, object: 'model' });
  });

  test('chat: generate, with a token asked of the apiKey function for each request', async () => {
    const completion = await complete({ messages: [{ role: 'user', content: 'Summarise the last visit.' }] });
    await complete({ messages: [{ role: 'user', content: 'Again.' }] });

    expect(completion.choices[0].message.content).toBe('Echo: Summarise the last visit.');
    expect(matrix.emulator.received[0].messages).toEqual([{ role: 'user', content: 'Summarise the last visit.' }]);
    expect(new Set(matrix.session.issuedTokens).size).toBe(2);
    expect(await matrix.session.conversations()).toEqual(UNRELATED.asTwoConversations);
  });

  test('chat: stream', async () => {
    const stream = await openai.chat.completions.create({ model: CHAT_MODEL, stream: true, messages: [{ role: 'user', content: STREAMED.prompt }] });
    let text = '';
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? '';
    }
    expect(text).toBe(STREAMED.answer);
    expect(matrix.emulator.received[0].stream).toBe(true);
    expect(await matrix.session.conversations()).toEqual(STREAMED.asOneConversation);
  });

  test('chat: a conversation continued with conversation_id; its history is loaded by fhirgate', async () => {
    const first = await complete({ messages: [{ role: 'user', content: 'Remember 7.' }] });
    const second = await complete({ conversation_id: first.conversation_id, messages: [{ role: 'user', content: 'And 8?' }] });

    expect(second.choices[0].message.content).toBe('Echo: And 8?');
    expect(matrix.emulator.received[1].messages).toEqual(CONTINUED.history);
    expect(await matrix.session.conversations()).toEqual(CONTINUED.asOneConversation);
  });

  test('chat: a tool round trip, the result sent into the conversation', async () => {
    const tools: OpenAI.ChatCompletionTool[] = [{ type: 'function', function: WEATHER_TOOL }];
    const first = await complete({ messages: [{ role: 'user', content: ASK_WEATHER }], tools });
    const call = first.choices[0].message.tool_calls?.[0] as OpenAI.ChatCompletionMessageFunctionToolCall;
    expect(call.function).toEqual({ name: 'get_weather', arguments: '{"city":"Lyon"}' });

    const answer = await complete({ conversation_id: first.conversation_id, messages: [{ role: 'tool', tool_call_id: call.id, content: weatherIn('Lyon') }], tools });

    expect(answer.choices[0].message.content).toMatch(/^Echo: Weather in Lyon\?/);
    expect(matrix.emulator.received[1].messages.slice(-2)).toEqual([
      { role: 'assistant', content: '', toolCalls: [{ id: call.id, name: 'get_weather', arguments: '{"city":"Lyon"}' }] },
      { role: 'tool', content: 'Sunny in Lyon', toolCallId: call.id },
    ]);
    const [conversation] = await matrix.session.conversations();
    expect(conversation.slice(1, 3)).toEqual(['reply: calls get_weather({"city":"Lyon"})', `prompt: result ${call.id}: Sunny in Lyon`]);
  });

  test('chat: structured output with chat.completions.parse', async () => {
    const completion = await openai.chat.completions.parse({
      model: CHAT_MODEL,
      messages: [{ role: 'user', content: 'Latest vitals as JSON.' }],
      response_format: { type: 'json_schema', json_schema: { name: 'vitals', schema: VITALS_SCHEMA, strict: true } },
    });
    expect(completion.choices[0].message.parsed).toEqual(VITALS_EXAMPLE);
    expect(matrix.emulator.received[0].output.responseFormat).toEqual({ type: 'json_schema', name: 'vitals', schema: VITALS_SCHEMA, strict: true });
  });

  test('responses: create, stream, and a chain continued with previous_response_id, one conversation on record', async () => {
    const first = await openai.responses.create({ model: CHAT_MODEL, instructions: 'Answer briefly.', input: 'Remember 7.' });
    const stream = openai.responses.stream({ model: CHAT_MODEL, input: 'And 8?', previous_response_id: first.id });
    let streamed = '';
    for await (const event of stream) {
      streamed += event.type === 'response.output_text.delta' ? event.delta : '';
    }
    const second = await stream.finalResponse();

    expect(first.output_text).toBe('Echo: Remember 7.');
    expect([streamed, second.output_text]).toEqual(['Echo: And 8?', 'Echo: And 8?']);
    expect(matrix.emulator.received[1].messages).toEqual(CONTINUED.history);
    expect(await openai.responses.retrieve(second.id)).toMatchObject({ id: second.id, output_text: 'Echo: And 8?', previous_response_id: first.id });
    expect(await matrix.session.conversations()).toEqual(CONTINUED.asOneConversation);
  });

  test('responses: a tool round trip, the output sent with previous_response_id', async () => {
    const tools: OpenAI.Responses.FunctionTool[] = [{ type: 'function', ...WEATHER_TOOL, strict: true }];
    const first = await openai.responses.create({ model: CHAT_MODEL, input: ASK_WEATHER, tools });
    const call = first.output.find((item) => item.type === 'function_call');
    expect(call).toMatchObject({ name: 'get_weather', arguments: '{"city":"Lyon"}' });

    const answer = await openai.responses.create({
      model: CHAT_MODEL,
      previous_response_id: first.id,
      input: [{ type: 'function_call_output', call_id: call?.call_id ?? '', output: weatherIn('Lyon') }],
      tools,
    });

    expect(answer.output_text).toMatch(/^Echo: Weather in Lyon\?/);
    expect(matrix.emulator.received[1].messages.at(-1)).toEqual({ role: 'tool', content: 'Sunny in Lyon', toolCallId: call?.call_id });
    const [conversation] = await matrix.session.conversations();
    expect(conversation).toHaveLength(4);
    expect(conversation.slice(1, 3)).toEqual(['reply: calls get_weather({"city":"Lyon"})', `prompt: result ${call?.call_id}: Sunny in Lyon`]);
  });

  test('responses: structured output with responses.parse', async () => {
    const response = await openai.responses.parse({
      model: CHAT_MODEL,
      input: 'Latest vitals as JSON.',
      text: { format: { type: 'json_schema', name: 'vitals', schema: VITALS_SCHEMA, strict: true } },
    });
    expect(response.output_parsed).toEqual(VITALS_EXAMPLE);
    expect(matrix.emulator.received[0].output.responseFormat).toEqual({ type: 'json_schema', name: 'vitals', schema: VITALS_SCHEMA, strict: true });
  });

  test('errors: a bad token is AuthenticationError (401), a bad parameter BadRequestError (400) naming it', async () => {
    const stranger = new OpenAI({ baseURL: matrix.session.baseURL, apiKey: BAD_TOKEN, defaultHeaders: matrix.session.headers, maxRetries: 0 });
    const unauthenticated = await stranger.chat.completions.create({ model: CHAT_MODEL, messages: [{ role: 'user', content: 'Hi' }] }).catch((error: unknown) => error);
    expect(unauthenticated).toBeInstanceOf(OpenAI.AuthenticationError);
    expect(unauthenticated).toMatchObject({ status: 401, type: 'authentication_error', code: 'unauthenticated' });

    const chatError = await openai.chat.completions.create({ model: CHAT_MODEL, temperature: 5, messages: [{ role: 'user', content: 'Hi' }] }).catch((error: unknown) => error);
    const responsesError = await openai.responses.create({ model: CHAT_MODEL, temperature: 5, input: 'Hi' }).catch((error: unknown) => error);
    for (const error of [chatError, responsesError]) {
      expect(error).toBeInstanceOf(OpenAI.BadRequestError);
      expect(error).toMatchObject({ status: 400, type: 'invalid_request_error', code: 'invalid_request', param: 'temperature' });
    }
    expect(matrix.emulator.received).toHaveLength(0);
    expect(await matrix.session.conversations()).toEqual([]);
  });
});
