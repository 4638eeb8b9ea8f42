/**
 * The client matrix: LlamaIndex's `OpenAI` LLM (`@llamaindex/openai`, chat completions, on the copy of the openai SDK
 * it brings) against fhirgate, set up as docs/clients.md shows it. Its `apiKey` is a string; a refreshing token goes
 * through `session`, an openai client of the application's. LlamaIndex has no call that lists a provider's models.
 */
import { tool } from '@llamaindex/core/tools';
import type { ChatMessage, ToolCallLLMMessageOptions } from '@llamaindex/core/llms';
import { OpenAI as LlamaIndexOpenAI } from '@llamaindex/openai';
import OpenAI from 'openai';
import { z } from 'zod';
import { ASK_WEATHER, BAD_TOKEN, CHAT_MODEL, CLIENT_TOOL_LOOP, CONTINUED, readPrompts, recordedRequestOf, STREAMED, useClientMatrix, VITALS_EXAMPLE, weatherIn } from './client-matrix.ts';

/** A chat completion as fhirgate answers it (LlamaIndex keeps it as `raw`). */
interface FhirgateCompletion {
  readonly conversation_id: string;
}

describe("client matrix: LlamaIndex's OpenAI LLM", () => {
  const matrix = useClientMatrix();
  let llm: LlamaIndexOpenAI;

  beforeEach(async () => {
    llm = await signedIn(await matrix.session.apiKey());
  });

  const signedIn = async (apiKey: string, fields: { temperature?: number } = {}): Promise<LlamaIndexOpenAI> =>
    new LlamaIndexOpenAI({ model: CHAT_MODEL, apiKey, baseURL: matrix.session.baseURL, additionalSessionOptions: { defaultHeaders: matrix.session.headers }, maxRetries: 0, ...fields });

  const getWeather = tool({ name: 'get_weather', description: 'Current weather in a city', parameters: z.object({ city: z.string() }), execute: ({ city }) => weatherIn(city) });

  test('chat, with its default sampling settings on record', async () => {
    const response = await llm.chat({ messages: [{ role: 'user', content: 'Summarise the last visit.' }] });

    expect(response.message.content).toBe('Echo: Summarise the last visit.');
    // LlamaIndex sends its own defaults: what the provider received and what the record keeps.
    expect(matrix.emulator.received[0].body).toMatchObject({ messages: [{ role: 'user', content: 'Summarise the last visit.' }], temperature: 0.1, top_p: 1 });
    const [prompt] = await readPrompts(matrix.session.medplum);
    expect(recordedRequestOf(prompt)).toMatchObject({ model: CHAT_MODEL, temperature: 0.1, top_p: 1 });
    expect(await matrix.session.conversations()).toEqual([['prompt: Summarise the last visit.', 'reply: Echo: Summarise the last visit.']]);
  });

  test('a refreshing token: session, an openai client with an apiKey function, asked for each request', async () => {
    const client = new OpenAI({ baseURL: matrix.session.baseURL, apiKey: matrix.session.apiKey, defaultHeaders: matrix.session.headers, maxRetries: 0 });
    const refreshing = new LlamaIndexOpenAI({ model: CHAT_MODEL, session: client as unknown as Awaited<LlamaIndexOpenAI['session']> });
    await refreshing.chat({ messages: [{ role: 'user', content: 'One.' }] });
    const second = await refreshing.complete({ prompt: 'Two.' });

    expect(second.text).toBe('Echo: Two.');
    // One token for the set-up in beforeEach, then one for each request.
    expect(new Set(matrix.session.issuedTokens).size).toBe(3);
  });

  test('stream', async () => {
    let text = '';
    for await (const chunk of await llm.chat({ messages: [{ role: 'user', content: STREAMED.prompt }], stream: true })) {
      text += chunk.delta;
    }
    expect(text).toBe(STREAMED.answer);
    expect(matrix.emulator.received[0].stream).toBe(true);
    expect(await matrix.session.conversations()).toEqual(STREAMED.asOneConversation);
  });

  test('a conversation continued with conversation_id in additionalChatOptions, read from the raw answer', async () => {
    const first = await llm.chat({ messages: [{ role: 'user', content: 'Remember 7.' }] });
    const conversationId = (first.raw as FhirgateCompletion).conversation_id;
    const second = await llm.chat({ messages: [{ role: 'user', content: 'And 8?' }], additionalChatOptions: { conversation_id: conversationId } as Record<string, unknown> });

    expect(second.message.content).toBe('Echo: And 8?');
    expect(matrix.emulator.received[1].messages).toEqual(CONTINUED.history);
    expect(await matrix.session.conversations()).toEqual(CONTINUED.asOneConversation);
  });

  test('a tool round trip with exec: LlamaIndex runs the tool and the next step sends its result', async () => {
    const messages: ChatMessage<ToolCallLLMMessageOptions>[] = [{ role: 'user', content: ASK_WEATHER }];
    const step = await llm.exec({ messages, tools: [getWeather] });
    expect(step.toolCalls).toEqual([{ id: 'call_1_0', name: 'get_weather', input: { city: 'Lyon' } }]);
    messages.push(...step.newMessages);

    const final = await llm.exec({ messages, tools: [getWeather] });

    expect(final.newMessages.at(-1)?.content).toMatch(/^Echo: Weather in Lyon\?/);
    expect(matrix.emulator.received[1].messages.slice(-1)).toEqual([{ role: 'tool', content: 'Sunny in Lyon', toolCallId: 'call_1_0' }]);
    expect(await matrix.session.conversations()).toEqual(CLIENT_TOOL_LOOP.asOneConversation);
  });

  test("structured output: chat with a zod responseFormat, sent as response_format json_schema (exec's asks for a tool call instead)", async () => {
    const vitals = z.object({ systolic: z.number().int().min(90), trend: z.enum(['stable', 'rising']) });
    const response = await llm.chat({ messages: [{ role: 'user', content: 'Latest vitals as JSON.' }], responseFormat: vitals });

    expect(vitals.parse(JSON.parse(String(response.message.content)))).toEqual(VITALS_EXAMPLE);
    expect(matrix.emulator.received[0].output.responseFormat).toMatchObject({ type: 'json_schema', name: 'response_format', strict: true });
  });

  test("errors: its openai SDK's AuthenticationError (401) for a bad token, BadRequestError (400) naming a bad parameter", async () => {
    const unauthenticated = await (await signedIn(BAD_TOKEN)).chat({ messages: [{ role: 'user', content: 'Hi' }] }).catch((error: unknown) => error);
    // LlamaIndex's own copy of the openai SDK (5.x) throws: its classes, recognised here by name.
    expect(unauthenticated).toMatchObject({ status: 401, type: 'authentication_error', message: '401 Missing, invalid or expired access token.' });
    expect((unauthenticated as Error).constructor.name).toBe('AuthenticationError');

    const invalid = await (await signedIn(await matrix.session.apiKey(), { temperature: 5 })).chat({ messages: [{ role: 'user', content: 'Hi' }] }).catch((error: unknown) => error);
    expect(invalid).toMatchObject({ status: 400, param: 'temperature', type: 'invalid_request_error' });
    expect((invalid as Error).constructor.name).toBe('BadRequestError');
    expect(matrix.emulator.received).toHaveLength(0);
  });
});
