/**
 * The client matrix: LangChain's `ChatOpenAI` (`@langchain/openai`) with `useResponsesApi: true`, which speaks the
 * Responses API (`POST /v1/responses`) for every call, set up as docs/clients.md shows it. Its chat-completions
 * path is langchain-openai.test.ts.
 */
import { AIMessage, AIMessageChunk, HumanMessage, SystemMessage, ToolMessage, type BaseMessage } from '@langchain/core/messages';
import { ChatOpenAI, type ChatOpenAIFields } from '@langchain/openai';
import OpenAI from 'openai';
import { z } from 'zod';
import { ASK_WEATHER, CHAT_MODEL, CLIENT_TOOL_LOOP, CONTINUED, readPrompts, recordedRequestOf, STREAMED, useClientMatrix, VITALS_EXAMPLE, WEATHER_TOOL, weatherIn } from './client-matrix.ts';

describe("client matrix: LangChain's ChatOpenAI on the Responses API (useResponsesApi)", () => {
  const matrix = useClientMatrix();

  const chatModel = (fields: ChatOpenAIFields = {}): ChatOpenAI =>
    new ChatOpenAI({ model: CHAT_MODEL, useResponsesApi: true, apiKey: matrix.session.apiKey, configuration: { baseURL: matrix.session.baseURL, defaultHeaders: matrix.session.headers }, maxRetries: 0, ...fields });

  test('invoke: over /v1/responses, the answer a list of content blocks, a token asked of the apiKey function', async () => {
    const answer = await chatModel().invoke([new SystemMessage('Answer briefly.'), new HumanMessage('Summarise the last visit.')]);

    expect(answer.text).toBe('Echo: Summarise the last visit.');
    expect(answer.content).toEqual([{ type: 'text', text: 'Echo: Summarise the last visit.', annotations: [] }]);
    expect(answer.response_metadata).toMatchObject({ id: expect.stringMatching(/^resp_/), object: 'response', status: 'completed' });
    expect(answer.usage_metadata).toMatchObject({ input_tokens: 6, output_tokens: 5 });
    expect(matrix.emulator.received[0].messages).toEqual([
      { role: 'system', content: 'Answer briefly.' },
      { role: 'user', content: 'Summarise the last visit.' },
    ]);
    expect(matrix.session.issuedTokens).toHaveLength(1);
    const [prompt] = await readPrompts(matrix.session.medplum);
    expect(recordedRequestOf(prompt)).toMatchObject({ model: CHAT_MODEL, input: [{ type: 'message', role: 'system' }, { type: 'message', role: 'user' }] });
    expect(await matrix.session.conversations()).toEqual([['prompt: Summarise the last visit.', 'reply: Echo: Summarise the last visit.']]);
  });

  test('stream: the Responses event stream', async () => {
    let text = '';
    for await (const chunk of await chatModel().stream(STREAMED.prompt)) {
      text += chunk.text;
    }
    expect(text).toBe(STREAMED.answer);
    expect(matrix.emulator.received[0].stream).toBe(true);
    expect(await matrix.session.conversations()).toEqual(STREAMED.asOneConversation);
  });

  test("continued with previous_response_id, and with LangChain's own message list: the earlier reply sent back as the output item it was", async () => {
    const model = chatModel();
    const first = await model.invoke(CONTINUED.first);
    const second = await model.invoke(CONTINUED.second, { previous_response_id: String(first.response_metadata.id) });
    expect(second.text).toBe('Echo: And 8?');
    expect(matrix.emulator.received[1].messages).toEqual(CONTINUED.history);

    const messages: BaseMessage[] = [new HumanMessage(CONTINUED.first)];
    messages.push(await model.invoke(messages), new HumanMessage(CONTINUED.second));
    await model.invoke(messages);

    expect(matrix.emulator.received[3].messages).toEqual(CONTINUED.history);
    const prompts = await readPrompts(matrix.session.medplum);
    expect((recordedRequestOf(prompts[3]).input as unknown[])[1]).toMatchObject({ type: 'message', role: 'assistant', id: expect.stringMatching(/^msg_/), content: [{ type: 'output_text', text: 'Echo: Remember 7.' }] });
    // Each way is one conversation on record.
    expect(await matrix.session.conversations()).toEqual([...CONTINUED.asOneConversation, ...CONTINUED.asOneConversation]);
  });

  test('a tool round trip with bindTools in its own message list: the call goes back as a function_call item, the ToolMessage as its output', async () => {
    const model = chatModel().bindTools([{ type: 'function', function: WEATHER_TOOL }]);
    const messages: BaseMessage[] = [new HumanMessage(ASK_WEATHER)];
    const call = (await model.invoke(messages)) as AIMessage;
    expect(call.tool_calls).toEqual([{ type: 'tool_call', id: 'call_1_0', name: 'get_weather', args: { city: 'Lyon' } }]);
    messages.push(call, new ToolMessage({ tool_call_id: 'call_1_0', content: weatherIn('Lyon') }));

    const answer = await model.invoke(messages);

    expect(answer.text).toMatch(/^Echo: Weather in Lyon\?/);
    expect(matrix.emulator.received[1].messages.slice(-2)).toEqual(CLIENT_TOOL_LOOP.callAndResult);
    const prompts = await readPrompts(matrix.session.medplum);
    expect((recordedRequestOf(prompts[1]).input as unknown[]).slice(1)).toEqual([
      { type: 'function_call', id: expect.stringMatching(/^fc_/), status: 'completed', call_id: 'call_1_0', name: 'get_weather', arguments: '{"city":"Lyon"}' },
      { type: 'function_call_output', call_id: 'call_1_0', output: 'Sunny in Lyon' },
    ]);
    expect(await matrix.session.conversations()).toEqual(CLIENT_TOOL_LOOP.asOneConversation);
  });

  test('a streamed tool call, answered with previous_response_id and only the ToolMessage', async () => {
    const model = chatModel().bindTools([{ type: 'function', function: WEATHER_TOOL }]);
    let call: AIMessageChunk | undefined;
    for await (const chunk of await model.stream(ASK_WEATHER)) {
      call = call === undefined ? chunk : call.concat(chunk);
    }
    expect(call?.tool_calls).toEqual([{ type: 'tool_call', id: 'call_1_0', name: 'get_weather', args: { city: 'Lyon' } }]);

    const answer = await model.invoke([new ToolMessage({ tool_call_id: 'call_1_0', content: weatherIn('Lyon') })], { previous_response_id: String(call?.response_metadata.id) });

    expect(answer.text).toMatch(/^Echo: Weather in Lyon\?/);
    expect(matrix.emulator.received[1].messages.slice(-2)).toEqual(CLIENT_TOOL_LOOP.callAndResult);
    expect(await matrix.session.conversations()).toEqual(CLIENT_TOOL_LOOP.asOneConversation);
  });

  test('structured output with withStructuredOutput, sent as text.format json_schema', async () => {
    const vitals = z.object({ systolic: z.number().int().min(90), trend: z.enum(['stable', 'rising']) });
    const result = await chatModel().withStructuredOutput(vitals, { name: 'vitals' }).invoke('Latest vitals as JSON.');

    expect(result).toEqual(VITALS_EXAMPLE);
    expect(matrix.emulator.received[0].output.responseFormat).toMatchObject({ type: 'json_schema', name: 'vitals', strict: true });
    const [prompt] = await readPrompts(matrix.session.medplum);
    expect(recordedRequestOf(prompt).text).toMatchObject({ format: { type: 'json_schema', name: 'vitals', strict: true } });
  });

  test("fhirgate's own fields in modelKwargs: patient_id makes the turn about the patient", async () => {
    const patientId = matrix.session.project.ids['patient-in-care-team-1'];
    const answer = await chatModel({ modelKwargs: { patient_id: patientId } }).invoke('What should I check at the next visit?');

    expect(answer.text).toBe('Echo: What should I check at the next visit?');
    const [prompt] = await readPrompts(matrix.session.medplum);
    expect(prompt.subject).toEqual({ reference: `Patient/${patientId}` });
    expect(recordedRequestOf(prompt)).toMatchObject({ patient_id: patientId });
  });

  test("errors: the openai SDK's BadRequestError (400) with the Responses API's name of the field", async () => {
    const invalid = await chatModel({ temperature: 5 }).invoke('Hi').catch((error: unknown) => error);
    expect(invalid).toBeInstanceOf(OpenAI.BadRequestError);
    expect(invalid).toMatchObject({ status: 400, param: 'temperature', type: 'invalid_request_error' });
    expect(matrix.emulator.received).toHaveLength(0);
    expect(await matrix.session.conversations()).toEqual([]);
  });
});
