/**
 * Function calling through the gateway, as a client of OpenAI would use it: `tools` and `tool_choice` reach the
 * model, `tool_calls` come back (JSON, or streamed as deltas the openai SDK puts together), the client sends the
 * results as `tool` messages, and the conversation's history reloads with the calls and their results in order, so
 * the provider accepts it. The emulator checks tool messages as OpenAI and Anthropic do; every provider kind is
 * driven through its own SDK. What is stored is read with MedplumClient.
 */
import type { MedplumClient } from '@medplum/core';
import type { Communication } from '@medplum/fhirtypes';
import OpenAI from 'openai';
import { EXTENSION } from '../plugin/chat/fhir-vocabulary.ts';
import type { SeededProject } from '../plugin/hosts/standalone/seed.ts';
import type { LlmEmulator } from './emulator/index.ts';
import { chatClients, type FhirgateCompletion } from './support/chat-clients.ts';
import { CHAT_MODEL, OTHER_PROVIDERS, startChatHost, type ChatHost } from './support/chat-host.ts';
import type { TestHost } from './support/test-host.ts';

const WEATHER: OpenAI.ChatCompletionTool = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'Current weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
};

/** A user message that makes the emulated model call get_weather once, then answer. */
const ASK_WEATHER = `Weather in Lyon? [emulator-behaviour ${JSON.stringify({ toolCalls: [[{ name: 'get_weather', arguments: { city: 'Lyon' } }]] })}]`;

const MODELS = { openai: CHAT_MODEL, anthropic: OTHER_PROVIDERS.anthropic.model, ollama: OTHER_PROVIDERS.ollama.model } as const;

describe('function calling through the gateway', () => {
  let chatHost: ChatHost;
  let emulator: LlmEmulator;
  let host: TestHost;
  let project: SeededProject;
  let openai: OpenAI;
  let medplum: MedplumClient;

  beforeAll(async () => {
    chatHost = await startChatHost({ withProviders: ['anthropic', 'ollama'] });
    ({ emulator, host } = chatHost);
  });
  afterAll(() => chatHost.close());
  beforeEach(async () => {
    emulator.reset();
    ({ project, openai, medplum } = await chatClients(host));
  });

  /** A JSON chat request with fhirgate's fields (the SDK's types know only OpenAI's). */
  const ask = (body: Record<string, unknown>, options?: OpenAI.RequestOptions): Promise<FhirgateCompletion> =>
    openai.chat.completions.create({ model: MODELS.openai, ...body } as never, options) as unknown as Promise<FhirgateCompletion>;
  /** A streamed chat request with fhirgate's fields. */
  const askStream = (body: Record<string, unknown>): Promise<AsyncIterable<OpenAI.ChatCompletionChunk>> =>
    openai.chat.completions.create({ model: MODELS.openai, ...body, stream: true } as never) as unknown as Promise<AsyncIterable<OpenAI.ChatCompletionChunk>>;
  const read = (id: string): Promise<Communication> => medplum.readResource('Communication', id, { cache: 'no-cache' });
  const conversation = async (conversationId: string): Promise<Communication[]> =>
    medplum.searchResources('Communication', { 'part-of': `Communication/${conversationId}`, _sort: 'sent', _count: '100' }, { cache: 'no-cache' });

  test('JSON: tools reach the model, tool_calls come back and are on record; the results continue the conversation', async () => {
    const first = await ask({ messages: [{ role: 'user', content: ASK_WEATHER }], tools: [WEATHER], tool_choice: 'auto' });

    expect(first.choices[0].finish_reason).toBe('tool_calls');
    const message = first.choices[0].message;
    expect(message.content).toBeNull();
    expect(message.tool_calls).toEqual([{ id: expect.any(String), type: 'function', function: { name: 'get_weather', arguments: '{"city":"Lyon"}' } }]);
    expect(emulator.received[0].tools).toEqual([{ name: 'get_weather', description: 'Current weather in a city', parameters: WEATHER.function.parameters }]);
    expect(emulator.received[0].toolChoice).toBe('auto');

    const reply = await read(first.communication_id);
    expect(reply.status).toBe('completed');
    expect(reply.payload).toBeUndefined();
    expect(reply.extension?.find((extension) => extension.url === EXTENSION.finishReason)?.valueCode).toBe('tool_calls');
    const call = message.tool_calls?.[0] as OpenAI.ChatCompletionMessageFunctionToolCall;
    expect(reply.extension?.find((extension) => extension.url === EXTENSION.toolCall)?.extension).toEqual([
      { url: 'id', valueString: call.id },
      { url: 'name', valueString: 'get_weather' },
      { url: 'arguments', valueString: '{"city":"Lyon"}' },
    ]);

    // The client runs the function and sends only the result: the history brings the question and the call.
    const second = await ask({ messages: [{ role: 'tool', tool_call_id: call.id, content: '{"celsius":18}' }], tools: [WEATHER], conversation_id: first.conversation_id });
    expect(second.choices[0].finish_reason).toBe('stop');
    expect(second.choices[0].message.content).toBe('Echo: Weather in Lyon? [emulator-behaviour {"toolCalls":[[{"name":"get_weather","arguments":{"city":"Lyon"}}]]}]');
    expect(emulator.received[1].messages).toEqual([
      { role: 'user', content: ASK_WEATHER },
      { role: 'assistant', content: '', toolCalls: [{ id: call.id, name: 'get_weather', arguments: '{"city":"Lyon"}' }] },
      { role: 'tool', content: '{"celsius":18}', toolCallId: call.id },
    ]);

    const stored = await conversation(first.conversation_id);
    const resultPrompt = stored.find((communication) => communication.id !== undefined && communication.payload?.[0]?.extension?.[0]?.url === EXTENSION.toolResult);
    expect(resultPrompt?.payload).toEqual([{ extension: [{ url: EXTENSION.toolResult, valueString: call.id }], contentString: '{"celsius":18}' }]);
  });

  test('streamed: the calls arrive as deltas the openai SDK puts together; the final answer streams after the results', async () => {
    const stream = openai.chat.completions.stream({ model: MODELS.openai, messages: [{ role: 'user', content: ASK_WEATHER }], tools: [WEATHER], stream: true });
    let conversationId = '';
    stream.on('chunk', (chunk) => {
      conversationId ||= (chunk as OpenAI.ChatCompletionChunk & { conversation_id?: string }).conversation_id ?? '';
    });
    const completion = await stream.finalChatCompletion();
    expect(completion.choices[0].finish_reason).toBe('tool_calls');
    const call = completion.choices[0].message.tool_calls?.[0] as OpenAI.ChatCompletionMessageFunctionToolCall;
    expect(call.function).toEqual({ name: 'get_weather', arguments: '{"city":"Lyon"}' });

    const answer = await askStream({ messages: [{ role: 'tool', tool_call_id: call.id, content: 'sunny, 18 °C' }], tools: [WEATHER], conversation_id: conversationId });
    const chunks: OpenAI.ChatCompletionChunk[] = [];
    for await (const chunk of answer) chunks.push(chunk);
    const text = chunks.map((chunk) => chunk.choices[0]?.delta?.content ?? '').join('');
    expect(text).toMatch(/^Echo: Weather in Lyon\?/);
    expect(chunks.at(-1)?.choices[0]?.finish_reason).toBe('stop');
    expect(emulator.received[1].messages.map((message) => message.role)).toEqual(['user', 'assistant', 'tool']);
  });

  test('without conversation_id, the whole exchange is sent at once, as with OpenAI', async () => {
    const answer = await ask({
      messages: [
        { role: 'user', content: 'Weather in Lyon?' },
        { role: 'assistant', content: null, tool_calls: [{ id: 'call_abc', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Lyon"}' } }] },
        { role: 'tool', tool_call_id: 'call_abc', content: '18 °C' },
      ],
      tools: [WEATHER],
    });
    expect(answer.choices[0].message.content).toBe('Echo: Weather in Lyon?');
    expect(emulator.received[0].messages.map((message) => message.role)).toEqual(['user', 'assistant', 'tool']);
  });

  test('a result that answers no call of the conversation is a 400 before anything is stored or sent', async () => {
    const first = await ask({ messages: [{ role: 'user', content: ASK_WEATHER }], tools: [WEATHER] });
    const before = await conversation(first.conversation_id);
    // An id longer than any call's: the message quotes its first 64 characters.
    const invented = `call_invented_${'x'.repeat(80)}`;
    const failure = await ask({ messages: [{ role: 'tool', tool_call_id: invented, content: 'x' }], conversation_id: first.conversation_id }).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(OpenAI.BadRequestError);
    expect((failure as InstanceType<typeof OpenAI.BadRequestError>).error).toMatchObject({
      code: 'invalid_request',
      param: 'messages',
      message: `Invalid request: a tool message answers '${invented.slice(0, 64)}', which is not a call of the conversation's last reply.`,
    });
    expect(await conversation(first.conversation_id)).toHaveLength(before.length);
    expect(emulator.received).toHaveLength(1);
  });

  test('a question asked instead of answering the calls: the unanswered calls are left out of what the model is sent', async () => {
    const first = await ask({ messages: [{ role: 'user', content: ASK_WEATHER }], tools: [WEATHER] });
    const second = await ask({ messages: [{ role: 'user', content: 'Never mind, what day is it?' }], conversation_id: first.conversation_id });
    expect(second.choices[0].message.content).toBe('Echo: Never mind, what day is it?');
    expect(emulator.received[1].messages.map((message) => message.role)).toEqual(['user', 'user']);
  });

  test.each([['anthropic' as const], ['ollama' as const]])('through %s: the calls come back in the OpenAI shape and the results continue the conversation', async (provider) => {
    const first = await ask({ model: MODELS[provider], messages: [{ role: 'user', content: ASK_WEATHER }], tools: [WEATHER] });
    expect(emulator.received[0].provider).toBe(provider);
    expect(first.choices[0].finish_reason).toBe('tool_calls');
    const call = first.choices[0].message.tool_calls?.[0] as OpenAI.ChatCompletionMessageFunctionToolCall;
    expect(call.function).toEqual({ name: 'get_weather', arguments: '{"city":"Lyon"}' });
    expect(emulator.received[0].tools?.map((tool) => tool.name)).toEqual(['get_weather']);

    const stream = await askStream({ model: MODELS[provider], messages: [{ role: 'tool', tool_call_id: call.id, content: '18 °C' }], tools: [WEATHER], conversation_id: first.conversation_id });
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
    expect(text).toMatch(/^Echo: Weather in Lyon\?/);
    // The provider received the call and its result in its own format, accepted as well-formed.
    // (Ollama's wire format names a result's function, having no call ids.)
    expect(emulator.received[1].messages.slice(-2)).toEqual([
      { role: 'assistant', content: '', toolCalls: [expect.objectContaining({ name: 'get_weather', arguments: '{"city":"Lyon"}' })] },
      provider === 'ollama' ? { role: 'tool', content: '18 °C', toolName: 'get_weather' } : { role: 'tool', content: '18 °C', toolCallId: call.id },
    ]);
  });

  test('a repeated request with the same Idempotency-Key gets the same tool calls from the records', async () => {
    const body = { model: MODELS.openai, messages: [{ role: 'user' as const, content: ASK_WEATHER }], tools: [WEATHER] };
    const options = { headers: { 'Idempotency-Key': `tools-${project.projectId}` } };
    const first = await ask(body, options);
    const again = await openai.chat.completions.create(body, options).withResponse();
    expect(again.response.headers.get('idempotent-replayed')).toBe('true');
    expect(again.data.choices[0]).toEqual(first.choices[0]);
    expect(emulator.received).toHaveLength(1);
  });
});
