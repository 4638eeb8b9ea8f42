/**
 * The client matrix: token.js, its `openai-compatible` provider pointed at fhirgate's `/v1`, set up as
 * docs/clients.md shows it. token.js's options name `apiKey` and `baseURL` only: its provider spreads them into the
 * `openai` client (its own copy, 4.x) that it makes for each request, which is how `defaultHeaders` reaches that
 * client; the key is a string, so a current token means a TokenJS made for the request. It passes the body on as
 * given (`provider` removed), fhirgate's own fields included, and answers fhirgate's body as it came.
 */
import { TokenJS, type ChatCompletionMessageParam, type ChatCompletionTool, type CompletionResponse } from 'token.js';
import { ASK_WEATHER, BAD_TOKEN, CHAT_MODEL, CLIENT_TOOL_LOOP, CONTINUED, readPrompts, recordedRequestOf, STREAMED, UNRELATED, useClientMatrix, VITALS_EXAMPLE, VITALS_SCHEMA, WEATHER_TOOL, weatherIn } from './client-matrix.ts';

/** The class of an error token.js threw: those of its own copy of the openai SDK, which the tests do not import. */
const classOf = (error: unknown): string | undefined => (error instanceof Error ? error.constructor.name : undefined);

/** A chat completion as fhirgate answers it, through token.js. */
type FhirgateResponse = CompletionResponse & { conversation_id: string };

describe('client matrix: token.js (openai-compatible provider)', () => {
  const matrix = useClientMatrix();

  /** A TokenJS for one request, with the current token: as docs/clients.md sets it up. */
  const tokenJs = async (apiKey?: string): Promise<TokenJS> => {
    const options = { baseURL: matrix.session.baseURL, apiKey: apiKey ?? (await matrix.session.apiKey()), defaultHeaders: matrix.session.headers };
    return new TokenJS(options);
  };

  /** A chat completion with fhirgate's own fields, which token.js sends as they are. */
  const complete = async (body: Record<string, unknown>): Promise<FhirgateResponse> => {
    const request = { provider: 'openai-compatible', model: CHAT_MODEL, ...body } as unknown as Parameters<TokenJS['chat']['completions']['create']>[0] & { stream?: false };
    return (await (await tokenJs()).chat.completions.create(request)) as FhirgateResponse;
  };

  test('chat: the answer as fhirgate gave it (conversation_id included), a TokenJS with a current token for each request', async () => {
    const first = await complete({ messages: [{ role: 'system', content: 'Answer briefly.' }, { role: 'user', content: 'Summarise the last visit.' }] });
    await complete({ messages: [{ role: 'user', content: 'Again.' }] });

    expect(first.choices[0]).toMatchObject({ message: { role: 'assistant', content: 'Echo: Summarise the last visit.' }, finish_reason: 'stop' });
    expect(first.usage).toMatchObject({ prompt_tokens: 6, completion_tokens: 5 });
    expect(first.conversation_id).toMatch(/^[0-9a-f-]{36}$/);
    expect(matrix.emulator.received[0].messages).toEqual([
      { role: 'system', content: 'Answer briefly.' },
      { role: 'user', content: 'Summarise the last visit.' },
    ]);
    expect(new Set(matrix.session.issuedTokens).size).toBe(2);
    // What token.js sent is on record: the body without its own `provider`.
    const [prompt] = await readPrompts(matrix.session.medplum);
    expect(recordedRequestOf(prompt)).toEqual({ model: CHAT_MODEL, messages: [{ role: 'system', content: 'Answer briefly.' }, { role: 'user', content: 'Summarise the last visit.' }] });
    expect(await matrix.session.conversations()).toEqual([['prompt: Summarise the last visit.', 'reply: Echo: Summarise the last visit.'], UNRELATED.asTwoConversations[1]]);
  });

  test('stream: the chunks as fhirgate sent them', async () => {
    const stream = await (await tokenJs()).chat.completions.create({ provider: 'openai-compatible', model: CHAT_MODEL, stream: true, messages: [{ role: 'user', content: STREAMED.prompt }] });
    let text = '';
    const finishReasons: unknown[] = [];
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? '';
      finishReasons.push(chunk.choices[0]?.finish_reason);
    }

    expect(text).toBe(STREAMED.answer);
    expect(finishReasons.at(-1)).toBe('stop');
    expect(matrix.emulator.received[0].stream).toBe(true);
    expect(await matrix.session.conversations()).toEqual(STREAMED.asOneConversation);
  });

  test('a conversation continued with conversation_id in the body', async () => {
    const first = await complete({ messages: [{ role: 'user', content: CONTINUED.first }] });
    const second = await complete({ conversation_id: first.conversation_id, messages: [{ role: 'user', content: CONTINUED.second }] });

    expect(second.choices[0].message.content).toBe('Echo: And 8?');
    expect(second.conversation_id).toBe(first.conversation_id);
    expect(matrix.emulator.received[1].messages).toEqual(CONTINUED.history);
    expect(await matrix.session.conversations()).toEqual(CONTINUED.asOneConversation);
  });

  test('a tool round trip in its own message list, and a streamed call', async () => {
    const tools: ChatCompletionTool[] = [{ type: 'function', function: WEATHER_TOOL }];
    const messages: ChatCompletionMessageParam[] = [{ role: 'user', content: ASK_WEATHER }];
    const call = await complete({ messages, tools });
    expect(call.choices[0]).toMatchObject({ finish_reason: 'tool_calls', message: { tool_calls: [{ id: 'call_1_0', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Lyon"}' } }] } });
    messages.push({ role: 'assistant', content: call.choices[0].message.content, tool_calls: call.choices[0].message.tool_calls }, { role: 'tool', tool_call_id: 'call_1_0', content: weatherIn('Lyon') });

    const answer = await complete({ messages, tools });

    expect(answer.choices[0].message.content).toMatch(/^Echo: Weather in Lyon\?/);
    expect(matrix.emulator.received[1].messages.slice(-2)).toEqual(CLIENT_TOOL_LOOP.callAndResult);
    expect(await matrix.session.conversations()).toEqual(CLIENT_TOOL_LOOP.asOneConversation);

    const stream = await (await tokenJs()).chat.completions.create({ provider: 'openai-compatible', model: CHAT_MODEL, stream: true, messages: [{ role: 'user', content: ASK_WEATHER }], tools });
    let streamedArguments = '';
    const names: unknown[] = [];
    for await (const chunk of stream) {
      for (const delta of chunk.choices[0]?.delta.tool_calls ?? []) {
        names.push(...(delta.function?.name ? [delta.function.name] : []));
        streamedArguments += delta.function?.arguments ?? '';
      }
    }
    expect([names, streamedArguments]).toEqual([['get_weather'], '{"city":"Lyon"}']);
  });

  test('structured output: response_format json_schema passed on', async () => {
    const completion = await complete({
      messages: [{ role: 'user', content: 'Latest vitals as JSON.' }],
      response_format: { type: 'json_schema', json_schema: { name: 'vitals', schema: VITALS_SCHEMA, strict: true } },
    });

    expect(JSON.parse(completion.choices[0].message.content ?? '')).toEqual(VITALS_EXAMPLE);
    expect(matrix.emulator.received[0].output.responseFormat).toEqual({ type: 'json_schema', name: 'vitals', schema: VITALS_SCHEMA, strict: true });
  });

  test("errors: the 401 and the 400 naming the field as its openai copy's AuthenticationError and BadRequestError; without the header, 401", async () => {
    // token.js removes `provider` from the body it is given: each call has a body of its own.
    const request = () => ({ provider: 'openai-compatible' as const, model: CHAT_MODEL, messages: [{ role: 'user' as const, content: 'Hi' }] });
    const unauthenticated = await (await tokenJs(BAD_TOKEN)).chat.completions.create(request()).catch((error: unknown) => error);
    expect(classOf(unauthenticated)).toBe('AuthenticationError');
    expect(unauthenticated).toMatchObject({ status: 401, error: { code: 'unauthenticated', message: 'Missing, invalid or expired access token.' } });

    const invalid = await (await tokenJs()).chat.completions.create({ ...request(), top_p: 5 }).catch((error: unknown) => error);
    expect(classOf(invalid)).toBe('BadRequestError');
    expect(invalid).toMatchObject({ status: 400, param: 'top_p', type: 'invalid_request_error' });

    // Without the header (token.js's typed options are only the key and the base URL): refused, the project unknown.
    const headerless = new TokenJS({ baseURL: matrix.session.baseURL, apiKey: await matrix.session.apiKey() });
    const withoutProject = await headerless.chat.completions.create(request()).catch((error: unknown) => error);
    expect(classOf(withoutProject)).toBe('AuthenticationError');
    expect(withoutProject).toMatchObject({ status: 401, error: { message: 'Missing X-Project-ID header.' } });
    expect(matrix.emulator.received).toHaveLength(0);
    expect(await matrix.session.conversations()).toEqual([]);
  });
});
