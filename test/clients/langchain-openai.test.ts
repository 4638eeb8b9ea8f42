/**
 * The client matrix: LangChain's `ChatOpenAI` (`@langchain/openai`) against fhirgate, set up as docs/clients.md shows
 * it. It speaks chat completions, and the Responses API with `useResponsesApi` (or when given
 * `previous_response_id`). LangChain has no call that lists a provider's models; docs/clients.md says so.
 */
import { AIMessage, HumanMessage, ToolMessage, type BaseMessage } from '@langchain/core/messages';
import { ChatOpenAI, type ChatOpenAIFields } from '@langchain/openai';
import OpenAI from 'openai';
import { z } from 'zod';
import { ASK_WEATHER, BAD_TOKEN, CHAT_MODEL, CLIENT_TOOL_LOOP, CONTINUED, STREAMED, UNRELATED, useClientMatrix, VITALS_EXAMPLE, WEATHER_TOOL, weatherIn } from './client-matrix.ts';

describe("client matrix: LangChain's ChatOpenAI", () => {
  const matrix = useClientMatrix();

  const chatModel = (fields: ChatOpenAIFields = {}): ChatOpenAI =>
    new ChatOpenAI({ model: CHAT_MODEL, apiKey: matrix.session.apiKey, configuration: { baseURL: matrix.session.baseURL, defaultHeaders: matrix.session.headers }, maxRetries: 0, ...fields });

  test('invoke, with a token asked of the apiKey function for each request', async () => {
    const model = chatModel();
    const answer = await model.invoke('Summarise the last visit.');
    await model.invoke('Again.');

    expect(answer.content).toBe('Echo: Summarise the last visit.');
    expect(answer.usage_metadata).toMatchObject({ input_tokens: 4, output_tokens: 5 });
    expect(matrix.emulator.received[0].messages).toEqual([{ role: 'user', content: 'Summarise the last visit.' }]);
    expect(new Set(matrix.session.issuedTokens).size).toBe(2);
    expect(await matrix.session.conversations()).toEqual(UNRELATED.asTwoConversations);
  });

  test('stream', async () => {
    let text = '';
    for await (const chunk of await chatModel().stream(STREAMED.prompt)) {
      text += String(chunk.content);
    }
    expect(text).toBe(STREAMED.answer);
    expect(matrix.emulator.received[0].stream).toBe(true);
    expect(await matrix.session.conversations()).toEqual(STREAMED.asOneConversation);
  });

  test("a conversation kept in LangChain's own message list: the history reaches the model once, one conversation on record", async () => {
    const model = chatModel();
    const messages: BaseMessage[] = [new HumanMessage('Remember 7.')];
    messages.push(await model.invoke(messages), new HumanMessage('And 8?'));
    const second = await model.invoke(messages);

    expect(second.text).toBe('Echo: And 8?');
    expect(matrix.emulator.received[1].messages).toEqual(CONTINUED.history);
    expect(await matrix.session.conversations()).toEqual(CONTINUED.asOneConversation);
  });

  test('a conversation continued with previous_response_id (the Responses API): one conversation on record', async () => {
    const model = chatModel({ useResponsesApi: true });
    const first = await model.invoke('Remember 7.');
    const second = await model.invoke('And 8?', { previous_response_id: String(first.response_metadata.id) });

    expect(first.response_metadata.id).toMatch(/^resp_/);
    expect(second.text).toBe('Echo: And 8?');
    expect(matrix.emulator.received[1].messages).toEqual(CONTINUED.history);
    expect(await matrix.session.conversations()).toEqual(CONTINUED.asOneConversation);
  });

  test('a tool round trip: bindTools, the call run by the application, its ToolMessage sent back', async () => {
    const model = chatModel().bindTools([{ type: 'function', function: WEATHER_TOOL }]);
    const messages: BaseMessage[] = [new HumanMessage(ASK_WEATHER)];
    const call = (await model.invoke(messages)) as AIMessage;
    expect(call.tool_calls).toEqual([{ type: 'tool_call', id: 'call_1_0', name: 'get_weather', args: { city: 'Lyon' } }]);
    messages.push(call, new ToolMessage({ tool_call_id: 'call_1_0', content: weatherIn('Lyon') }));

    const answer = await model.invoke(messages);

    expect(answer.content).toMatch(/^Echo: Weather in Lyon\?/);
    expect(matrix.emulator.received[1].messages.slice(-1)).toEqual([{ role: 'tool', content: 'Sunny in Lyon', toolCallId: 'call_1_0' }]);
    expect(await matrix.session.conversations()).toEqual(CLIENT_TOOL_LOOP.asOneConversation);
  });

  test('structured output with withStructuredOutput, sent as response_format json_schema', async () => {
    const vitals = z.object({ systolic: z.number().int().min(90), trend: z.enum(['stable', 'rising']) });
    const result = await chatModel().withStructuredOutput(vitals, { name: 'vitals' }).invoke('Latest vitals as JSON.');

    expect(result).toEqual(VITALS_EXAMPLE);
    expect(matrix.emulator.received[0].output.responseFormat).toMatchObject({ type: 'json_schema', name: 'vitals', strict: true });
  });

  test("errors: the openai SDK's AuthenticationError (401) for a bad token, BadRequestError (400) naming a bad parameter", async () => {
    const unauthenticated = await chatModel({ apiKey: BAD_TOKEN }).invoke('Hi').catch((error: unknown) => error);
    expect(unauthenticated).toBeInstanceOf(OpenAI.AuthenticationError);
    expect(unauthenticated).toMatchObject({ status: 401, lc_error_code: 'MODEL_AUTHENTICATION', message: expect.stringContaining('Missing, invalid or expired access token.') });

    const invalid = await chatModel({ temperature: 5 }).invoke('Hi').catch((error: unknown) => error);
    expect(invalid).toBeInstanceOf(OpenAI.BadRequestError);
    expect(invalid).toMatchObject({ status: 400, param: 'temperature', type: 'invalid_request_error' });
    expect(matrix.emulator.received).toHaveLength(0);
  });
});
