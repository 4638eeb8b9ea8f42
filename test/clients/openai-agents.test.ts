/**
 * The client matrix: the OpenAI Agents SDK (`@openai/agents`, the Responses API by default) against fhirgate, an
 * agent with a function tool, set up as docs/clients.md shows it: a Runner whose provider is an openai client with
 * the token as an `apiKey` function and `X-Project-ID` a default header, tracing off (it would send each run's
 * inputs and outputs to OpenAI). The Agents SDK has no call that lists models.
 */
import { Agent, OpenAIProvider, Runner, setTracingDisabled, tool } from '@openai/agents';
import OpenAI from 'openai';
import { z } from 'zod';
import { ASK_WEATHER, BAD_TOKEN, CHAT_MODEL, CLIENT_TOOL_LOOP, STREAMED, useClientMatrix, VITALS_EXAMPLE, weatherIn } from './client-matrix.ts';

describe('client matrix: the OpenAI Agents SDK', () => {
  const matrix = useClientMatrix();
  let runner: Runner;

  const getWeather = tool({ name: 'get_weather', description: 'Current weather in a city', parameters: z.object({ city: z.string() }), execute: async ({ city }) => weatherIn(city) });
  const assistant = new Agent({ name: 'Assistant', instructions: 'Answer briefly.', model: CHAT_MODEL, tools: [getWeather] });

  /** A Runner on fhirgate, through an openai client with the given token. */
  const runnerWith = (apiKey: string | (() => Promise<string>)): Runner => {
    const client = new OpenAI({ baseURL: matrix.session.baseURL, apiKey, defaultHeaders: matrix.session.headers, maxRetries: 0 });
    return new Runner({ modelProvider: new OpenAIProvider({ openAIClient: client }) });
  };

  beforeAll(() => {
    setTracingDisabled(true);
  });
  beforeEach(() => {
    runner = runnerWith(matrix.session.apiKey);
  });

  test('a run with a function tool: the agent calls it, the SDK runs it and sends its output back', async () => {
    const result = await runner.run(assistant, ASK_WEATHER);

    expect(result.finalOutput).toMatch(/^Echo: Weather in Lyon\?/);
    expect(result.newItems.map((item) => item.type)).toEqual(['tool_call_item', 'tool_call_output_item', 'message_output_item']);
    expect(matrix.emulator.received.map((request) => request.messages.map((message) => message.role))).toEqual([
      ['system', 'user'],
      ['system', 'user', 'assistant', 'tool'],
    ]);
    expect(matrix.emulator.received[1].messages.at(-1)).toEqual({ role: 'tool', content: 'Sunny in Lyon', toolCallId: 'call_1_0' });
    // A token for each of the two requests of the run.
    expect(new Set(matrix.session.issuedTokens).size).toBe(2);
    // The run keeps its history on the client and sends it whole: a conversation for each request.
    expect(await matrix.session.conversations()).toEqual(CLIENT_TOOL_LOOP.asOneConversation);
  });

  test('stream', async () => {
    const result = await runner.run(assistant, STREAMED.prompt, { stream: true });
    let text = '';
    for await (const delta of result.toTextStream()) {
      text += delta;
    }
    await result.completed;

    expect(text).toBe(STREAMED.answer);
    expect(matrix.emulator.received[0].stream).toBe(true);
    expect(await matrix.session.conversations()).toEqual(STREAMED.asOneConversation);
  });

  test('a conversation continued with previousResponseId: the next run, its tool round trip included, is one conversation on record', async () => {
    const first = await runner.run(assistant, 'Remember 7.');
    const second = await runner.run(assistant, ASK_WEATHER, { previousResponseId: first.lastResponseId });

    expect(second.finalOutput).toMatch(/^Echo: Weather in Lyon\?/);
    expect(matrix.emulator.received[2].messages.map((message) => message.content)).toEqual(['Answer briefly.', 'Remember 7.', 'Echo: Remember 7.', ASK_WEATHER, '', 'Sunny in Lyon']);
    expect(await matrix.session.conversations()).toEqual([
      [
        'prompt: Remember 7.',
        'reply: Echo: Remember 7.',
        `prompt: ${ASK_WEATHER}`,
        'reply: calls get_weather({"city":"Lyon"})',
        'prompt: result call_2_0: Sunny in Lyon',
        `reply: Echo: ${ASK_WEATHER}`,
      ],
    ]);
  });

  test("structured output: the agent's outputType, sent as text.format json_schema", async () => {
    const vitals = new Agent({ name: 'Vitals', instructions: 'Report the latest vitals.', model: CHAT_MODEL, outputType: z.object({ systolic: z.number().int().min(90), trend: z.enum(['stable', 'rising']) }) });
    const result = await runner.run(vitals, 'Latest vitals as JSON.');

    expect(result.finalOutput).toEqual(VITALS_EXAMPLE);
    expect(matrix.emulator.received[0].output.responseFormat).toMatchObject({ type: 'json_schema', name: 'output', strict: true });
  });

  test("errors: the openai SDK's AuthenticationError (401) for a bad token, BadRequestError (400) naming a bad parameter", async () => {
    const unauthenticated = await runnerWith(BAD_TOKEN)
      .run(assistant, 'Hi')
      .catch((error: unknown) => error);
    expect(unauthenticated).toBeInstanceOf(OpenAI.AuthenticationError);
    expect(unauthenticated).toMatchObject({ status: 401, type: 'authentication_error' });

    const careless = new Agent({ name: 'Careless', model: CHAT_MODEL, modelSettings: { temperature: 5 } });
    const invalid = await runner.run(careless, 'Hi').catch((error: unknown) => error);
    expect(invalid).toBeInstanceOf(OpenAI.BadRequestError);
    expect(invalid).toMatchObject({ status: 400, param: 'temperature', type: 'invalid_request_error' });
    expect(matrix.emulator.received).toHaveLength(0);
  });
});
