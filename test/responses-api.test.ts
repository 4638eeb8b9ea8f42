/**
 * The Responses API end to end, with the official openai SDK (`responses.create`, `responses.stream`,
 * `responses.retrieve`) against a standalone host and the emulator: what the provider received, what the client
 * got, and what MedplumClient reads back from the store.
 */
import type { MedplumClient } from '@medplum/core';
import type { Communication } from '@medplum/fhirtypes';
import OpenAI from 'openai';
import { EXTENSION } from '../plugin/chat/fhir-vocabulary.ts';
import type { SeededProject } from '../plugin/hosts/standalone/seed.ts';
import { createStructuredReplyText, type LlmEmulator } from './emulator/index.ts';
import { chatClients } from './support/chat-clients.ts';
import { CHAT_MODEL, OTHER_PROVIDERS, startChatHost, type ChatHost } from './support/chat-host.ts';
import type { TestHost } from './support/test-host.ts';
import { waitFor } from './support/wait-for.ts';

const WEATHER: OpenAI.Responses.FunctionTool = {
  type: 'function',
  name: 'get_weather',
  description: 'Current weather in a city',
  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false },
  strict: true,
};

/** A user message that makes the emulated model call get_weather once, then answer. */
const ASK_WEATHER = `Weather in Lyon? [emulator-behaviour ${JSON.stringify({ toolCalls: [[{ name: 'get_weather', arguments: { city: 'Lyon' } }]] })}]`;

describe('the Responses API', () => {
  let chatHost: ChatHost;
  let emulator: LlmEmulator;
  let host: TestHost;
  let project: SeededProject;
  let openai: OpenAI;
  let medplum: MedplumClient;

  beforeAll(async () => {
    chatHost = await startChatHost({ withProviders: ['anthropic'] });
    ({ emulator, host } = chatHost);
  });
  afterAll(() => chatHost.close());
  beforeEach(async () => {
    emulator.reset();
    ({ project, openai, medplum } = await chatClients(host));
  });

  const read = (id: string): Promise<Communication> => medplum.readResource('Communication', id, { cache: 'no-cache' });
  const replyIdOf = (response: { id: string }): string => response.id.replace(/^resp_/, '');
  const stored = (): Promise<Communication[]> => medplum.searchResources('Communication', { _count: '1000' }, { cache: 'no-cache' });
  const codeOf = (communication: Communication): string | undefined => communication.category?.[0]?.coding?.[0]?.code;

  test('create: instructions and input reach the model; the answer is a Response whose id is the reply on record', async () => {
    const response = await openai.responses.create({ model: CHAT_MODEL, instructions: 'Answer briefly.', input: 'Summarise the last visit.' });

    expect(response).toMatchObject({ object: 'response', status: 'completed', model: CHAT_MODEL, output_text: 'Echo: Summarise the last visit.', error: null, instructions: 'Answer briefly.' });
    expect(response.output).toEqual([
      { id: `msg_${replyIdOf(response)}`, type: 'message', status: 'completed', role: 'assistant', content: [{ type: 'output_text', text: 'Echo: Summarise the last visit.', annotations: [], logprobs: [] }] },
    ]);
    expect(response.usage).toMatchObject({ input_tokens: expect.any(Number), output_tokens: 5, total_tokens: expect.any(Number) });
    expect(emulator.received[0].messages).toEqual([
      { role: 'system', content: 'Answer briefly.' },
      { role: 'user', content: 'Summarise the last visit.' },
    ]);

    const reply = await read(replyIdOf(response));
    expect(reply).toMatchObject({ status: 'completed', payload: [{ contentString: 'Echo: Summarise the last visit.' }] });
    expect(codeOf(reply)).toBe('ai-response');
    expect(response.conversation?.id).toBe(reply.partOf?.[0]?.reference?.split('/')[1]);
    const prompt = await read(reply.inResponseTo?.[0]?.reference?.split('/')[1] ?? '');
    expect(prompt.payload).toEqual([{ contentString: 'Summarise the last visit.' }]);
    // The request is on record as the client sent it, instructions included.
    const recorded = JSON.parse(prompt.extension?.find((extension) => extension.url === EXTENSION.chatRequest)?.valueString ?? '{}');
    expect(recorded).toEqual({ model: CHAT_MODEL, instructions: 'Answer briefly.', input: 'Summarise the last visit.' });
  });

  test('stream: the event stream the SDK puts together, numbered, ending in response.completed once the reply is on record', async () => {
    const stream = openai.responses.stream({ model: CHAT_MODEL, input: [{ role: 'user', content: [{ type: 'input_text', text: 'Stream me an answer please' }] }] });
    const events: OpenAI.Responses.ResponseStreamEvent[] = [];
    for await (const event of stream) {
      events.push(event);
    }
    const final = await stream.finalResponse();

    expect(final.output_text).toBe('Echo: Stream me an answer please');
    expect(final.status).toBe('completed');
    expect(events.map((event) => event.sequence_number)).toEqual(events.map((_, index) => index));
    const types = events.map((event) => event.type);
    expect(types.slice(0, 4)).toEqual(['response.created', 'response.in_progress', 'response.output_item.added', 'response.content_part.added']);
    expect(types.slice(-4)).toEqual(['response.output_text.done', 'response.content_part.done', 'response.output_item.done', 'response.completed']);
    const deltas = events.filter((event) => event.type === 'response.output_text.delta');
    expect(deltas.length).toBeGreaterThan(1);
    expect(deltas.map((event) => event.delta).join('')).toBe(final.output_text);

    const reply = await read(replyIdOf(final));
    expect(reply).toMatchObject({ status: 'completed', payload: [{ contentString: final.output_text }] });
    expect(emulator.received[0].stream).toBe(true);
  });

  test('a chain of three responses is one threaded FHIR conversation: previous_response_id loads its history', async () => {
    const first = await openai.responses.create({ model: CHAT_MODEL, input: 'Remember 7.', store: true });
    const second = await openai.responses.create({ model: CHAT_MODEL, input: 'And 8.', previous_response_id: first.id });
    const third = await openai.responses.create({ model: CHAT_MODEL, input: 'Which numbers?', previous_response_id: second.id });

    expect(third.previous_response_id).toBe(second.id);
    expect(emulator.received[2].messages).toEqual([
      { role: 'user', content: 'Remember 7.' },
      { role: 'assistant', content: 'Echo: Remember 7.' },
      { role: 'user', content: 'And 8.' },
      { role: 'assistant', content: 'Echo: And 8.' },
      { role: 'user', content: 'Which numbers?' },
    ]);
    const conversationId = first.conversation?.id ?? '';
    expect([second.conversation?.id, third.conversation?.id]).toEqual([conversationId, conversationId]);

    const root = await read(conversationId);
    expect(codeOf(root)).toBe('ai-conversation');
    const turns = await medplum.searchResources('Communication', { 'part-of': `Communication/${conversationId}`, _sort: 'sent' }, { cache: 'no-cache' });
    expect(turns.map(codeOf)).toEqual(['ai-prompt', 'ai-response', 'ai-prompt', 'ai-response', 'ai-prompt', 'ai-response']);
    expect(turns.filter((turn) => codeOf(turn) === 'ai-response').map((turn) => turn.id)).toEqual([first, second, third].map(replyIdOf));
    for (const [index, turn] of turns.entries()) {
      if (codeOf(turn) === 'ai-response') {
        expect(turn.inResponseTo).toEqual([{ reference: `Communication/${turns[index - 1].id}` }]);
      }
    }
    expect(turns.map((turn) => turn.payload?.[0]?.contentString)).toEqual(['Remember 7.', 'Echo: Remember 7.', 'And 8.', 'Echo: And 8.', 'Which numbers?', 'Echo: Which numbers?']);
  });

  test('a response that is no longer the latest of its conversation is refused by name, and nothing is stored', async () => {
    const first = await openai.responses.create({ model: CHAT_MODEL, input: 'One.' });
    const second = await openai.responses.create({ model: CHAT_MODEL, input: 'Two.', previous_response_id: first.id });
    const before = (await stored()).length;
    emulator.reset();

    const failure = await openai.responses.create({ model: CHAT_MODEL, input: 'Fork?', previous_response_id: first.id }).catch((error: unknown) => error);

    expect(failure).toBeInstanceOf(OpenAI.BadRequestError);
    const error = failure as InstanceType<typeof OpenAI.BadRequestError>;
    expect(error).toMatchObject({ status: 400, param: 'previous_response_id', type: 'invalid_request_error' });
    expect(error.message).toContain(second.id);
    expect((await stored()).length).toBe(before);
    expect(emulator.received).toHaveLength(0);
  });

  test('a failed response does not hold the conversation: the request is retried from the same previous response', async () => {
    const first = await openai.responses.create({ model: CHAT_MODEL, input: 'One.' });
    const failing = `Two. [emulator-behaviour ${JSON.stringify({ errorStatus: 500 })}]`;
    const failure = await openai.responses.create({ model: CHAT_MODEL, input: failing, previous_response_id: first.id }).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(OpenAI.InternalServerError);

    const retry = await openai.responses.create({ model: CHAT_MODEL, input: 'Two.', previous_response_id: first.id });
    expect(retry.output_text).toBe('Echo: Two.');
  });

  test('function tools: a function_call comes back, its function_call_output continues the conversation, both on record', async () => {
    const first = await openai.responses.create({ model: CHAT_MODEL, input: ASK_WEATHER, tools: [WEATHER], tool_choice: 'auto' });

        expect(emulator.received[0].body.tools).toEqual([{ type: 'function', function: { name: 'get_weather', description: 'Current weather in a city', parameters: WEATHER.parameters, strict: true } }]);
    expect(first.output).toEqual([
      { id: `fc_${replyIdOf(first)}_0`, type: 'function_call', status: 'completed', call_id: expect.any(String), name: 'get_weather', arguments: '{"city":"Lyon"}' },
    ]);
    const call = first.output[0] as OpenAI.Responses.ResponseFunctionToolCall;
    const reply = await read(replyIdOf(first));
    expect(reply.extension?.find((extension) => extension.url === EXTENSION.toolCall)?.extension).toEqual([
      { url: 'id', valueString: call.call_id },
      { url: 'name', valueString: 'get_weather' },
      { url: 'arguments', valueString: '{"city":"Lyon"}' },
    ]);

    const second = await openai.responses.create({
      model: CHAT_MODEL,
      previous_response_id: first.id,
      input: [{ type: 'function_call_output', call_id: call.call_id, output: '{"temperature":21}' }],
      tools: [WEATHER],
    });

    expect(second.output_text).toBe(`Echo: ${ASK_WEATHER}`);
    expect(emulator.received[1].messages.slice(-2)).toEqual([
      { role: 'assistant', content: '', toolCalls: [{ id: call.call_id, name: 'get_weather', arguments: '{"city":"Lyon"}' }] },
      { role: 'tool', content: '{"temperature":21}', toolCallId: call.call_id },
    ]);
    const prompt = await read((await read(replyIdOf(second))).inResponseTo?.[0]?.reference?.split('/')[1] ?? '');
    expect(prompt.payload).toEqual([{ contentString: '{"temperature":21}', extension: [{ url: EXTENSION.toolResult, valueString: call.call_id }] }]);
  });

  test('function tools streamed, with the whole conversation in input: the call as items, then its output and an item_reference', async () => {
    const stream = openai.responses.stream({ model: CHAT_MODEL, input: ASK_WEATHER, tools: [WEATHER] });
    const events: OpenAI.Responses.ResponseStreamEvent[] = [];
    for await (const event of stream) {
      events.push(event);
    }
    const first = await stream.finalResponse();
    const call = first.output[0] as OpenAI.Responses.ResponseFunctionToolCall;
    expect(call).toMatchObject({ type: 'function_call', name: 'get_weather', arguments: '{"city":"Lyon"}', status: 'completed' });
    const argumentDeltas = events.filter((event) => event.type === 'response.function_call_arguments.delta');
    expect(argumentDeltas.map((event) => event.delta).join('')).toBe('{"city":"Lyon"}');
    expect(events.find((event) => event.type === 'response.function_call_arguments.done')).toMatchObject({ arguments: '{"city":"Lyon"}', item_id: call.id });

    // As a client that keeps the conversation itself sends it: the call by reference to the stored item.
    const second = await openai.responses.create({
      model: CHAT_MODEL,
      tools: [WEATHER],
      input: [
        { role: 'user', content: ASK_WEATHER },
        { type: 'item_reference', id: call.id ?? '' },
        { type: 'function_call_output', call_id: call.call_id, output: [{ type: 'input_text', text: 'sunny' }] },
      ],
    });
    expect(second.output_text).toBe(`Echo: ${ASK_WEATHER}`);
    expect(emulator.received[1].messages.slice(1)).toEqual([
      { role: 'assistant', content: '', toolCalls: [{ id: call.call_id, name: 'get_weather', arguments: '{"city":"Lyon"}' }] },
      { role: 'tool', content: 'sunny', toolCallId: call.call_id },
    ]);
  });

  test('text.format json_schema reaches the provider as its structured output; responses.parse reads the answer', async () => {
    const schema = { type: 'object', properties: { systolic: { type: 'integer', minimum: 90 } }, required: ['systolic'], additionalProperties: false };
    const response = await openai.responses.parse({ model: CHAT_MODEL, input: 'Blood pressure?', text: { format: { type: 'json_schema', name: 'bp', schema, strict: true } } });

    expect(response.output_parsed).toEqual({ systolic: 90 });
    expect(emulator.received[0].body.response_format).toEqual({ type: 'json_schema', json_schema: { name: 'bp', schema, strict: true } });
    expect(response.text?.format).toEqual({ type: 'json_schema', name: 'bp', schema, strict: true });

    const anthropic = await openai.responses.create({ model: OTHER_PROVIDERS.anthropic.model, input: 'Blood pressure?', text: { format: { type: 'json_schema', name: 'bp', schema } } });
    expect(anthropic.output_text).toBe(createStructuredReplyText({ messages: [], output: { responseFormat: { type: 'json_schema', schema }, choices: 1 } }));
    expect(emulator.received[1].output.responseFormat).toMatchObject({ type: 'json_schema', schema });
  });

  test('max_output_tokens and temperature reach the model; a reply cut by the bound is incomplete', async () => {
    const response = await openai.responses.create({ model: CHAT_MODEL, input: 'one two three four', max_output_tokens: 2, temperature: 0.2 });

    expect(emulator.received[0].body).toMatchObject({ max_completion_tokens: 2, temperature: 0.2 });
    expect(response).toMatchObject({ status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' }, output_text: 'Echo: one', max_output_tokens: 2, temperature: 0.2 });
    expect((await openai.responses.retrieve(response.id)).status).toBe('incomplete');
  });

  test('retrieve reads a stored response back, JSON or streamed; store: false records the turn all the same', async () => {
    const created = await openai.responses.create({ model: CHAT_MODEL, input: 'Keep this?', store: false, metadata: { ward: '7' } });

    const retrieved = await openai.responses.retrieve(created.id);
    expect(retrieved).toEqual({ ...created, completed_at: retrieved.completed_at });
    expect(retrieved).toMatchObject({ store: false, metadata: { ward: '7' } });
    expect(emulator.received[0].body).not.toHaveProperty('store');

    const replayed = openai.responses.stream({ response_id: created.id });
    expect((await replayed.finalResponse()).output_text).toBe('Echo: Keep this?');
    // From a point of the stream on, as a client that lost its connection resumes it.
    const resumed = await fetch(`${host.url}v1/responses/${created.id}?stream=true&starting_after=3`, {
      headers: { Authorization: `Bearer ${openai.apiKey}`, 'X-Project-ID': project.projectId },
    });
    const events = (await resumed.text()).split('\n\n').filter(Boolean);
    expect(events[0]).toMatch(/^event: response.output_text.delta\ndata: \{.*"sequence_number":4\}$/);
    expect(events.at(-1)).toMatch(/^event: response.completed\n/);
  });

  test('the reply of a chat completion reads back as a response, and a Responses turn can continue its conversation', async () => {
    const completion = (await openai.chat.completions.create({ model: CHAT_MODEL, messages: [{ role: 'user', content: 'Remember 7.' }] })) as OpenAI.ChatCompletion & { communication_id: string; conversation_id: string };

    const retrieved = await openai.responses.retrieve(`resp_${completion.communication_id}`);
    expect(retrieved).toMatchObject({ status: 'completed', output_text: 'Echo: Remember 7.', conversation: { id: completion.conversation_id }, instructions: null });
    const next = await openai.responses.create({ model: CHAT_MODEL, input: 'Which number?', previous_response_id: retrieved.id });
    expect(next.conversation?.id).toBe(completion.conversation_id);
    expect(emulator.received[1].messages).toEqual([
      { role: 'user', content: 'Remember 7.' },
      { role: 'assistant', content: 'Echo: Remember 7.' },
      { role: 'user', content: 'Which number?' },
    ]);
  });

  test('errors: a bad token is 401, a field fhirgate refuses is a 400 naming it, a provider\'s refusal names the Responses field', async () => {
    const anonymous = new OpenAI({ baseURL: `${host.url}v1`, apiKey: 'not-a-token', defaultHeaders: { 'X-Project-ID': project.projectId }, maxRetries: 0 });
    await expect(anonymous.responses.create({ model: CHAT_MODEL, input: 'hi' })).rejects.toBeInstanceOf(OpenAI.AuthenticationError);

    const background = await openai.responses.create({ model: CHAT_MODEL, input: 'hi', background: true }).catch((error: unknown) => error);
    expect(background).toMatchObject({ status: 400, param: 'background', type: 'invalid_request_error' });
    const image = await openai.responses
      .create({ model: CHAT_MODEL, input: [{ role: 'user', content: [{ type: 'input_image', image_url: 'https://example.org/x.png', detail: 'auto' }] }] })
      .catch((error: unknown) => error);
    expect(image).toMatchObject({ status: 400, param: 'input.0.content.0.type' });
    // An asynchronous call, as the SDK lets a function_call item say it was: refused by name, with the reason.
    const asynchronous = await openai.responses
      .create({ model: CHAT_MODEL, input: [{ role: 'user', content: 'Weather?' }, { type: 'function_call', call_id: 'call_1', name: 'get_weather', arguments: '{}', async: true }] })
      .catch((error: unknown) => error);
    expect(asynchronous).toMatchObject({ status: 400, param: 'input.1.async' });
    expect((asynchronous as Error).message).toContain('asynchronous function calls are not supported');
    const jsonObject = await openai.responses
      .create({ model: OTHER_PROVIDERS.anthropic.model, input: 'hi', text: { format: { type: 'json_object' } } })
      .catch((error: unknown) => error);
    expect(jsonObject).toMatchObject({ status: 400, param: 'text.format' });
    expect((jsonObject as Error).message).toMatch(/^400 Invalid request: text.format of type json_object is not supported/);

    expect(await stored()).toHaveLength(0);
    expect(emulator.received).toHaveLength(0);
  });

  test("another project's response is 404, read or continued, and nothing is stored", async () => {
    const other = await chatClients(host);
    const foreign = await other.openai.responses.create({ model: CHAT_MODEL, input: 'mine' });
    emulator.reset();

    await expect(openai.responses.retrieve(foreign.id)).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    const continued = await openai.responses.create({ model: CHAT_MODEL, input: 'theirs', previous_response_id: foreign.id }).catch((error: unknown) => error);
    expect(continued).toBeInstanceOf(OpenAI.NotFoundError);
    expect(continued).toMatchObject({ param: 'previous_response_id' });
    expect(await stored()).toHaveLength(0);
    expect(emulator.received).toHaveLength(0);
  });

  test('a stream the client leaves cancels the provider call and leaves a stopped reply with what it was sent', async () => {
    emulator.enqueue({ replyTokens: 400, tokensPerSecond: 200 });
    const stream = openai.responses.stream({ model: CHAT_MODEL, input: 'Talk for a while' });
    let received = '';
    for await (const event of stream) {
      if (event.type === 'response.output_text.delta') {
        received += event.delta;
      }
      if (received.split(' ').length > 5) {
        stream.abort();
        break;
      }
    }

    const reply = await waitFor(async () => (await stored()).find((communication) => codeOf(communication) === 'ai-response'));
    expect(reply.status).toBe('stopped');
    expect(reply.payload?.[0]?.contentString?.startsWith(received)).toBe(true);
    await waitFor(async () => (emulator.received[0].outcome === 'aborted' ? true : undefined));
    const retrieved = await openai.responses.retrieve(`resp_${reply.id}`);
    expect(retrieved.status).toBe('cancelled');
  });

  test('a provider failure after the stream began ends it with response.failed, and the reply is on record as not-done', async () => {
    const stream = openai.responses.stream({ model: CHAT_MODEL, input: `Go on [emulator-behaviour ${JSON.stringify({ replyTokens: 20, streamErrorAfterTokens: 3 })}]` });
    const types: string[] = [];
    for await (const event of stream) {
      types.push(event.type);
    }
    const final = await stream.finalResponse();

    expect(types.at(-1)).toBe('response.failed');
    expect(final).toMatchObject({ status: 'failed', error: { code: 'server_error', message: expect.stringContaining('provider') } });
    const reply = await read(replyIdOf(final));
    expect(reply.status).toBe('not-done');
    expect(reply.payload?.[0]?.contentString).toBe(final.output_text);
    expect((await openai.responses.retrieve(final.id)).status).toBe('failed');
  });

  test('the same Idempotency-Key answers again from the records, JSON or streamed, and stores nothing more', async () => {
    const body = { model: CHAT_MODEL, input: 'Only once.' };
    const key = { headers: { 'Idempotency-Key': 'responses-key-1' } };
    const first = await openai.responses.create(body, key);
    const count = (await stored()).length;

    const again = await openai.responses.create(body, key).withResponse();
    expect(again.response.headers.get('idempotent-replayed')).toBe('true');
    expect(again.data).toMatchObject({ id: first.id, output_text: first.output_text, usage: first.usage });
    expect((await stored()).length).toBe(count);

    const streamKey = { headers: { 'Idempotency-Key': 'responses-key-2' } };
    const streamed = await openai.responses.stream(body, streamKey).finalResponse();
    const replayed = await openai.responses.stream(body, streamKey).finalResponse();
    expect(replayed).toEqual({ ...streamed, completed_at: replayed.completed_at });
    expect(emulator.received).toHaveLength(2);
  });

  test('log probabilities, as include asks for them, on the text part and on each delta', async () => {
    const response = await openai.responses.create({ model: CHAT_MODEL, input: 'hi there', include: ['message.output_text.logprobs'], top_logprobs: 1 });
    const part = (response.output[0] as OpenAI.Responses.ResponseOutputMessage).content[0] as OpenAI.Responses.ResponseOutputText;
    expect(part.logprobs?.map((entry) => entry.token).join('')).toBe('Echo: hi there');
    expect(part.logprobs?.[0]).toEqual({ token: 'Echo:', logprob: -0.1, bytes: expect.any(Array), top_logprobs: [{ token: 'Echo:', logprob: -0.1, bytes: expect.any(Array) }] });
    expect(emulator.received[0].output.logprobs).toEqual({ top: 1 });

    const stream = openai.responses.stream({ model: CHAT_MODEL, input: 'hi there', include: ['message.output_text.logprobs'] });
    const deltas: OpenAI.Responses.ResponseTextDeltaEvent[] = [];
    for await (const event of stream) {
      if (event.type === 'response.output_text.delta') {
        deltas.push(event);
      }
    }
    expect(deltas.flatMap((event) => event.logprobs.map((entry) => entry.token)).join('')).toBe('Echo: hi there');
  });

  test("a turn about a patient names it with fhirgate's patient_id, as on chat completions", async () => {
    const response = await openai.responses.create({ model: CHAT_MODEL, input: 'Summary?', patient_id: project.ids['patient-in-care-team-1'] } as never);
    const reply = await read(replyIdOf(response as OpenAI.Responses.Response));
    expect(reply.subject).toEqual({ reference: `Patient/${project.ids['patient-in-care-team-1']}` });

    const outside = await openai.responses.create({ model: CHAT_MODEL, input: 'Summary?', patient_id: project.ids['patient-outside-care-team'] } as never).catch((error: unknown) => error);
    expect(outside).toMatchObject({ status: 403, param: 'patient_id' });
  });
});
