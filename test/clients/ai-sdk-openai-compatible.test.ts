/**
 * The client matrix: the Vercel AI SDK (`ai`) with `@ai-sdk/openai-compatible`, which speaks chat completions, set
 * up as docs/clients.md shows it. fhirgate's own fields go in `providerOptions.<provider name>`, which the provider
 * puts into the body as they are. The SDK has no call that lists a provider's models; docs/clients.md says so.
 */
import { createOpenAICompatible, type OpenAICompatibleProvider } from '@ai-sdk/openai-compatible';
import { APICallError, generateText, jsonSchema, Output, stepCountIs, streamText, tool } from 'ai';
import { z } from 'zod';
import { ASK_WEATHER, NAMED_TOOL_LOOP, BAD_TOKEN, CHAT_MODEL, CLIENT_TOOL_LOOP, CONTINUED, OTHER_PROVIDERS, readPrompts, recordedRequestOf, STREAMED, UNRELATED, useClientMatrix, VITALS_EXAMPLE, VITALS_SCHEMA, weatherIn } from './client-matrix.ts';

describe('client matrix: the AI SDK with @ai-sdk/openai-compatible (chat completions)', () => {
  const matrix = useClientMatrix(['vllm']);
  let fhirgate: OpenAICompatibleProvider;

  beforeEach(() => {
    const { baseURL, apiKey, headers } = matrix.session;
    fhirgate = createOpenAICompatible({ name: 'fhirgate', baseURL, apiKey, headers, supportsStructuredOutputs: true, includeUsage: true });
  });

  const getWeather = tool({ description: 'Current weather in a city', inputSchema: z.object({ city: z.string() }), execute: async ({ city }) => weatherIn(city) });

  test('generate, with a token asked of the apiKey function for each request', async () => {
    const first = await generateText({ model: fhirgate(CHAT_MODEL), prompt: 'Summarise the last visit.', maxRetries: 0 });
    await generateText({ model: fhirgate(CHAT_MODEL), prompt: 'Again.', maxRetries: 0 });

    expect(first.text).toBe('Echo: Summarise the last visit.');
    expect(first.usage).toMatchObject({ inputTokens: 4, outputTokens: 5 });
    expect(matrix.emulator.received[0].messages).toEqual([{ role: 'user', content: 'Summarise the last visit.' }]);
    expect(new Set(matrix.session.issuedTokens).size).toBe(2);
    expect(await matrix.session.conversations()).toEqual(UNRELATED.asTwoConversations);
  });

  test('stream', async () => {
    const result = streamText({ model: fhirgate(CHAT_MODEL), prompt: STREAMED.prompt, maxRetries: 0 });
    let text = '';
    for await (const delta of result.textStream) {
      text += delta;
    }
    expect(text).toBe(STREAMED.answer);
    expect(matrix.emulator.received[0].stream).toBe(true);
    expect(await matrix.session.conversations()).toEqual(STREAMED.asOneConversation);
  });

  test('a conversation continued with providerOptions.fhirgate.conversation_id, read from the X-Conversation-ID header', async () => {
    const first = await generateText({ model: fhirgate(CHAT_MODEL), prompt: 'Remember 7.', maxRetries: 0 });
    const conversationId = first.response.headers?.['x-conversation-id'];
    const second = await generateText({ model: fhirgate(CHAT_MODEL), prompt: 'And 8?', providerOptions: { fhirgate: { conversation_id: conversationId ?? '' } }, maxRetries: 0 });

    expect(second.text).toBe('Echo: And 8?');
    expect(matrix.emulator.received[1].messages).toEqual(CONTINUED.history);
    expect(await matrix.session.conversations()).toEqual(CONTINUED.asOneConversation);
  });

  test('a tool round trip: the SDK runs the tool and sends the call and its result back in the next step', async () => {
    const result = await generateText({ model: fhirgate(CHAT_MODEL), prompt: ASK_WEATHER, tools: { get_weather: getWeather }, stopWhen: stepCountIs(2), maxRetries: 0 });

    expect(result.steps.map((step) => step.finishReason)).toEqual(['tool-calls', 'stop']);
    expect(result.text).toMatch(/^Echo: Weather in Lyon\?/);
    expect(matrix.emulator.received[1].messages.slice(-2)).toEqual(CLIENT_TOOL_LOOP.callAndResult);
    // Each step is a request of its own with the whole history: recognised, one conversation on record.
    expect(await matrix.session.conversations()).toEqual(CLIENT_TOOL_LOOP.asOneConversation);
  });

  test('a tool loop in a named conversation: each step sends the whole call again, the model gets it once', async () => {
    const opening = await generateText({ model: fhirgate(CHAT_MODEL), prompt: 'Remember 7.', maxRetries: 0 });
    const conversationId = opening.response.headers?.['x-conversation-id'] ?? '';
    const providerOptions = { fhirgate: { conversation_id: conversationId } };
    const result = await generateText({ model: fhirgate(CHAT_MODEL), prompt: ASK_WEATHER, tools: { get_weather: getWeather }, stopWhen: stepCountIs(2), providerOptions, maxRetries: 0 });

    expect(result.steps.map((step) => step.finishReason)).toEqual(['tool-calls', 'stop']);
    expect(matrix.emulator.received[2].messages).toEqual(NAMED_TOOL_LOOP.sentAtLastStep);
    expect(await matrix.session.conversations()).toEqual(NAMED_TOOL_LOOP.asOneConversation);
  });

  test('structured output (Output.object, supportsStructuredOutputs), sent as response_format json_schema', async () => {
    const result = await generateText({ model: fhirgate(CHAT_MODEL), prompt: 'Latest vitals as JSON.', output: Output.object({ schema: jsonSchema<typeof VITALS_EXAMPLE>(VITALS_SCHEMA) }), maxRetries: 0 });

    expect(result.output).toEqual(VITALS_EXAMPLE);
    expect(matrix.emulator.received[0].output.responseFormat).toEqual({ type: 'json_schema', name: 'response', schema: VITALS_SCHEMA, strict: true });
  });

  test("a server's own fields (providerOptions): an OpenAI-compatible provider receives those its operator lists, as sent; others and OpenAI refuse them by name", async () => {
    const vendorFields = { min_p: 0.05, repetition_penalty: 1.1 };
    const local = await generateText({ model: fhirgate(OTHER_PROVIDERS.vllm.model), prompt: 'Hello', providerOptions: { fhirgate: vendorFields }, maxRetries: 0 });

    expect(local.text).toBe('Echo: Hello');
    expect(matrix.emulator.received[0].body).toMatchObject({ model: 'qwen3-8b', ...vendorFields });
    const [prompt] = await readPrompts(matrix.session.medplum);
    expect(recordedRequestOf(prompt)).toMatchObject(vendorFields);

    const refused = await generateText({ model: fhirgate(CHAT_MODEL), prompt: 'Hello', providerOptions: { fhirgate: vendorFields }, maxRetries: 0 }).catch((error: unknown) => error);
    expect(refused).toMatchObject({ statusCode: 400, message: expect.stringContaining("min_p: is not a field fhirgate knows, and the provider 'openai' (OpenAI) is not set to receive it") });
    const unlisted = await generateText({ model: fhirgate(OTHER_PROVIDERS.vllm.model), prompt: 'Hello', providerOptions: { fhirgate: { chat_template: '{{ messages }}' } }, maxRetries: 0 }).catch((error: unknown) => error);
    expect(unlisted).toMatchObject({ statusCode: 400, message: expect.stringContaining('chat_template: is not a field fhirgate knows') });
    expect(matrix.emulator.received).toHaveLength(1);
  });

  test('errors: APICallError with statusCode 401 for a bad token, 400 with the parameter named for a bad one', async () => {
    const stranger = createOpenAICompatible({ name: 'fhirgate', baseURL: matrix.session.baseURL, apiKey: BAD_TOKEN, headers: matrix.session.headers });
    const unauthenticated = await generateText({ model: stranger(CHAT_MODEL), prompt: 'Hi', maxRetries: 0 }).catch((error: unknown) => error);
    expect(APICallError.isInstance(unauthenticated)).toBe(true);
    expect(unauthenticated).toMatchObject({ statusCode: 401, isRetryable: false, message: 'Missing, invalid or expired access token.' });

    const invalid = await generateText({ model: fhirgate(CHAT_MODEL), prompt: 'Hi', temperature: 5, maxRetries: 0 }).catch((error: unknown) => error);
    expect(APICallError.isInstance(invalid)).toBe(true);
    expect(invalid).toMatchObject({ statusCode: 400, isRetryable: false, message: expect.stringContaining('temperature') });
    expect(matrix.emulator.received).toHaveLength(0);
  });
});
