/**
 * The client matrix: the Vercel AI SDK (`ai`) with `@ai-sdk/openai` in its default mode, which speaks the Responses
 * API (`POST /v1/responses`), set up as docs/clients.md shows it (`apiKey` a function, `X-Project-ID` a header).
 * The SDK has no call that lists a provider's models; docs/clients.md says so.
 */
import { createOpenAI, type OpenAIProvider } from '@ai-sdk/openai';
import { APICallError, generateText, jsonSchema, Output, stepCountIs, streamText, tool, type ModelMessage } from 'ai';
import { z } from 'zod';
import { ASK_WEATHER, NAMED_TOOL_LOOP, BAD_TOKEN, CHAT_MODEL, CLIENT_TOOL_LOOP, CONTINUED, readPrompts, recordedRequestOf, STREAMED, useClientMatrix, VITALS_EXAMPLE, VITALS_SCHEMA, weatherIn } from './client-matrix.ts';

describe('client matrix: the AI SDK with @ai-sdk/openai (Responses API)', () => {
  const matrix = useClientMatrix();
  let provider: OpenAIProvider;

  beforeEach(() => {
    const { baseURL, apiKey, headers } = matrix.session;
    provider = createOpenAI({ baseURL, apiKey, headers });
  });

  const getWeather = tool({ description: 'Current weather in a city', inputSchema: z.object({ city: z.string() }), execute: async ({ city }) => weatherIn(city) });

  test('generate: over /v1/responses, with a token asked of the apiKey function for each request', async () => {
    const result = await generateText({ model: provider(CHAT_MODEL), system: 'Answer briefly.', prompt: 'Summarise the last visit.', maxRetries: 0 });

    expect(result.text).toBe('Echo: Summarise the last visit.');
    expect(result.providerMetadata?.openai?.responseId).toMatch(/^resp_/);
    expect(matrix.emulator.received[0].messages).toEqual([
      { role: 'system', content: 'Answer briefly.' },
      { role: 'user', content: 'Summarise the last visit.' },
    ]);
    expect(matrix.session.issuedTokens).toHaveLength(1);
    // What the SDK sent is on record: the Responses API's body.
    const [prompt] = await readPrompts(matrix.session.medplum);
    expect(recordedRequestOf(prompt)).toMatchObject({ model: CHAT_MODEL, input: [{ role: 'system', content: 'Answer briefly.' }, { role: 'user' }] });
    expect(await matrix.session.conversations()).toEqual([['prompt: Summarise the last visit.', 'reply: Echo: Summarise the last visit.']]);
  });

  test('stream', async () => {
    const result = streamText({ model: provider(CHAT_MODEL), prompt: STREAMED.prompt, maxRetries: 0 });
    let text = '';
    for await (const delta of result.textStream) {
      text += delta;
    }
    expect(text).toBe(STREAMED.answer);
    expect(matrix.emulator.received[0].stream).toBe(true);
    expect(await matrix.session.conversations()).toEqual(STREAMED.asOneConversation);
  });

  test('a conversation continued with providerOptions.openai.previousResponseId: one conversation on record', async () => {
    const first = await generateText({ model: provider(CHAT_MODEL), prompt: 'Remember 7.', maxRetries: 0 });
    const second = await generateText({
      model: provider(CHAT_MODEL),
      prompt: 'And 8?',
      providerOptions: { openai: { previousResponseId: String(first.providerMetadata?.openai?.responseId) } },
      maxRetries: 0,
    });

    expect(second.text).toBe('Echo: And 8?');
    expect(matrix.emulator.received[1].messages).toEqual(CONTINUED.history);
    expect(await matrix.session.conversations()).toEqual(CONTINUED.asOneConversation);
  });

  test("the client's own history (response.messages): the earlier reply goes back as an item_reference fhirgate reads from its record", async () => {
    const messages: ModelMessage[] = [{ role: 'user', content: 'Remember 7.' }];
    const first = await generateText({ model: provider(CHAT_MODEL), messages, maxRetries: 0 });
    messages.push(...first.response.messages, { role: 'user', content: 'And 8?' });
    const second = await generateText({ model: provider(CHAT_MODEL), messages, maxRetries: 0 });

    expect(second.text).toBe('Echo: And 8?');
    expect(matrix.emulator.received[1].messages).toEqual(CONTINUED.history);
    const prompts = await readPrompts(matrix.session.medplum);
    expect((recordedRequestOf(prompts[1]).input as unknown[])[1]).toEqual({ type: 'item_reference', id: `msg_${String(first.providerMetadata?.openai?.responseId).replace(/^resp_/, '')}` });
    // The history came from the client: its first turn, sent again, names the conversation it continues.
    expect(await matrix.session.conversations()).toEqual(CONTINUED.asOneConversation);
  });

  test('a tool round trip: the SDK runs the tool and sends the call and its output back in the next step', async () => {
    const result = await generateText({ model: provider(CHAT_MODEL), prompt: ASK_WEATHER, tools: { get_weather: getWeather }, stopWhen: stepCountIs(2), maxRetries: 0 });

    expect(result.steps.map((step) => step.finishReason)).toEqual(['tool-calls', 'stop']);
    expect(result.steps[0].toolResults.map((toolResult) => toolResult.output)).toEqual(['Sunny in Lyon']);
    expect(result.text).toMatch(/^Echo: Weather in Lyon\?/);
    const [, secondStep] = matrix.emulator.received;
    expect(secondStep.messages.slice(-2)).toEqual(CLIENT_TOOL_LOOP.callAndResult);
    // Each step is a request of its own with the whole history: recognised, one conversation on record.
    expect(await matrix.session.conversations()).toEqual(CLIENT_TOOL_LOOP.asOneConversation);
  });

  test('a tool loop continuing a response (previousResponseId): each step names it and sends the steps since; one conversation, each message once', async () => {
    const opening = await generateText({ model: provider(CHAT_MODEL), prompt: 'Remember 7.', maxRetries: 0 });
    const previousResponseId = String(opening.providerMetadata?.openai?.responseId);
    const result = await generateText({ model: provider(CHAT_MODEL), prompt: ASK_WEATHER, tools: { get_weather: getWeather }, stopWhen: stepCountIs(2), providerOptions: { openai: { previousResponseId } }, maxRetries: 0 });

    expect(result.steps.map((step) => step.finishReason)).toEqual(['tool-calls', 'stop']);
    expect(matrix.emulator.received[2].messages).toEqual(NAMED_TOOL_LOOP.sentAtLastStep);
    expect(await matrix.session.conversations()).toEqual(NAMED_TOOL_LOOP.asOneConversation);
  });

  test('structured output (Output.object), sent as text.format json_schema', async () => {
    const result = await generateText({ model: provider(CHAT_MODEL), prompt: 'Latest vitals as JSON.', output: Output.object({ schema: jsonSchema<typeof VITALS_EXAMPLE>(VITALS_SCHEMA) }), maxRetries: 0 });

    expect(result.output).toEqual(VITALS_EXAMPLE);
    expect(matrix.emulator.received[0].output.responseFormat).toMatchObject({ type: 'json_schema', schema: VITALS_SCHEMA, strict: true });
    const [prompt] = await readPrompts(matrix.session.medplum);
    expect(recordedRequestOf(prompt).text).toMatchObject({ format: { type: 'json_schema', strict: true } });
  });

  test('errors: APICallError with statusCode 401 for a bad token, 400 with the parameter named for a bad one', async () => {
    const stranger = createOpenAI({ baseURL: matrix.session.baseURL, apiKey: BAD_TOKEN, headers: matrix.session.headers });
    const unauthenticated = await generateText({ model: stranger(CHAT_MODEL), prompt: 'Hi', maxRetries: 0 }).catch((error: unknown) => error);
    expect(APICallError.isInstance(unauthenticated)).toBe(true);
    expect(unauthenticated).toMatchObject({ statusCode: 401, isRetryable: false, message: 'Missing, invalid or expired access token.' });

    const invalid = await generateText({ model: provider(CHAT_MODEL), prompt: 'Hi', temperature: 5, maxRetries: 0 }).catch((error: unknown) => error);
    expect(APICallError.isInstance(invalid)).toBe(true);
    expect(invalid).toMatchObject({ statusCode: 400, isRetryable: false, message: expect.stringContaining('temperature') });
    expect(JSON.parse((invalid as APICallError).responseBody ?? '{}')).toMatchObject({ error: { param: 'temperature', type: 'invalid_request_error' } });
    expect(matrix.emulator.received).toHaveLength(0);
  });
});
