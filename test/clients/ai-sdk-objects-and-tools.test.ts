/**
 * The client matrix: the Vercel AI SDK's object generation (`generateObject`, `streamObject`) and its multi-step
 * tool loops (`generateText`, `streamText` with tools), through both of its providers set up as docs/clients.md shows
 * them: `@ai-sdk/openai` (the Responses API) and `@ai-sdk/openai-compatible` (chat completions). The rest of each
 * provider's matrix is in ai-sdk-openai.test.ts and ai-sdk-openai-compatible.test.ts.
 */
import { createOpenAI } from '@ai-sdk/openai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { generateObject, generateText, jsonSchema, stepCountIs, streamObject, streamText, tool, type LanguageModel, type ModelMessage } from 'ai';
import { z } from 'zod';
import { CHAT_MODEL, readPrompts, recordedRequestOf, TWO_ROUND_TOOL_LOOP, useClientMatrix, VITALS_EXAMPLE, VITALS_SCHEMA, weatherIn, type MatrixSession } from './client-matrix.ts';

/** Each provider: how it is made, and where its request body says which structured output it asks for. */
const PROVIDERS = {
  '@ai-sdk/openai (Responses)': {
    model: ({ baseURL, apiKey, headers }: MatrixSession): LanguageModel => createOpenAI({ baseURL, apiKey, headers })(CHAT_MODEL),
    formatOf: (body: Record<string, unknown>): unknown => (body.text as { format?: unknown } | undefined)?.format,
    jsonSchemaFormat: (schema: unknown) => ({ type: 'json_schema', name: 'response', schema, strict: true }),
  },
  '@ai-sdk/openai-compatible (chat completions)': {
    model: ({ baseURL, apiKey, headers }: MatrixSession): LanguageModel => createOpenAICompatible({ name: 'fhirgate', baseURL, apiKey, headers, supportsStructuredOutputs: true })(CHAT_MODEL),
    formatOf: (body: Record<string, unknown>): unknown => body.response_format,
    jsonSchemaFormat: (schema: unknown) => ({ type: 'json_schema', json_schema: { name: 'response', schema, strict: true } }),
  },
} as const;

/** The AI SDK's schema for `output: 'array'`: the items wrapped in an object, as it asks every provider. */
const VITALS_LIST_SCHEMA = {
  $schema: 'http://json-schema.org/draft-07/schema#',
  type: 'object',
  properties: { elements: { type: 'array', items: VITALS_SCHEMA } },
  required: ['elements'],
  additionalProperties: false,
};

/** The emulator's structured reply as stored: the JSON indented by one space. */
const STORED_VITALS = `reply: ${JSON.stringify(VITALS_EXAMPLE, null, 1)}`;

describe('client matrix: the AI SDK, object generation and multi-step tools', () => {
  const matrix = useClientMatrix();
  const getWeather = tool({ description: 'Current weather in a city', inputSchema: z.object({ city: z.string() }), execute: async ({ city }) => weatherIn(city) });

  describe.each(Object.entries(PROVIDERS))('%s', (_name, provider) => {
    test('generateObject: the schema sent as a json_schema format, the object parsed from the reply, the JSON on record', async () => {
      const result = await generateObject({ model: provider.model(matrix.session), schema: jsonSchema<typeof VITALS_EXAMPLE>(VITALS_SCHEMA), prompt: 'Latest vitals as JSON.', maxRetries: 0 });

      expect(result.object).toEqual(VITALS_EXAMPLE);
      expect(result.finishReason).toBe('stop');
      expect(matrix.emulator.received[0].output.responseFormat).toEqual({ type: 'json_schema', name: 'response', schema: VITALS_SCHEMA, strict: true });
      const [prompt] = await readPrompts(matrix.session.medplum);
      expect(provider.formatOf(recordedRequestOf(prompt))).toEqual(provider.jsonSchemaFormat(VITALS_SCHEMA));
      expect(await matrix.session.conversations()).toEqual([['prompt: Latest vitals as JSON.', STORED_VITALS]]);
    });

    test("streamObject with output 'array': the list grows as each element completes in the stream", async () => {
      const result = streamObject({ model: provider.model(matrix.session), output: 'array', schema: jsonSchema<typeof VITALS_EXAMPLE>(VITALS_SCHEMA), prompt: 'Vitals of each visit as JSON.', maxRetries: 0 });
      const partials: unknown[] = [];
      for await (const partial of result.partialObjectStream) {
        partials.push(partial);
      }

      expect(await result.object).toEqual([VITALS_EXAMPLE]);
      expect(partials).toEqual([[], [VITALS_EXAMPLE]]);
      expect(matrix.emulator.received[0]).toMatchObject({ stream: true, output: { responseFormat: { type: 'json_schema', name: 'response', schema: VITALS_LIST_SCHEMA, strict: true } } });
      const [conversation] = await matrix.session.conversations();
      expect(JSON.parse(conversation[1].replace(/^reply: /, ''))).toEqual({ elements: [VITALS_EXAMPLE] });
    });

    test('streamText with tools, two rounds of calls (the second two at once): each step streamed, one conversation on record', async () => {
      const result = streamText({ model: provider.model(matrix.session), prompt: TWO_ROUND_TOOL_LOOP.prompt, tools: { get_weather: getWeather }, stopWhen: stepCountIs(3), maxRetries: 0 });
      let text = '';
      for await (const delta of result.textStream) {
        text += delta;
      }
      const steps = await result.steps;

      expect(text).toBe(TWO_ROUND_TOOL_LOOP.answer);
      expect(steps.map((step) => step.finishReason)).toEqual(['tool-calls', 'tool-calls', 'stop']);
      expect(steps[1].toolResults.map((toolResult) => toolResult.output)).toEqual(['Sunny in Paris', 'Sunny in Nice']);
      expect(matrix.emulator.received.map((request) => request.stream)).toEqual([true, true, true]);
      expect(matrix.emulator.received[2].messages).toEqual(TWO_ROUND_TOOL_LOOP.sentAtLastStep);
      expect(await matrix.session.conversations()).toEqual(TWO_ROUND_TOOL_LOOP.asOneConversation);
    });

    test('generateText with tools, two rounds of calls: the same loop, not streamed', async () => {
      const result = await generateText({ model: provider.model(matrix.session), prompt: TWO_ROUND_TOOL_LOOP.prompt, tools: { get_weather: getWeather }, stopWhen: stepCountIs(3), maxRetries: 0 });

      expect(result.text).toBe(TWO_ROUND_TOOL_LOOP.answer);
      expect(result.steps.map((step) => step.toolCalls.map((call) => call.input))).toEqual([[{ city: 'Lyon' }], [{ city: 'Paris' }, { city: 'Nice' }], []]);
      expect(matrix.emulator.received[2].messages).toEqual(TWO_ROUND_TOOL_LOOP.sentAtLastStep);
      expect(await matrix.session.conversations()).toEqual(TWO_ROUND_TOOL_LOOP.asOneConversation);
    });

    test("the loop's messages kept by the application (responseMessages: every step's) and a next question: the model gets them all, one conversation", async () => {
      const model = provider.model(matrix.session);
      const messages: ModelMessage[] = [{ role: 'user', content: TWO_ROUND_TOOL_LOOP.prompt }];
      const loop = await generateText({ model, messages, tools: { get_weather: getWeather }, stopWhen: stepCountIs(3), maxRetries: 0 });
      messages.push(...loop.responseMessages, { role: 'user', content: 'And tomorrow?' });
      const next = await generateText({ model, messages, tools: { get_weather: getWeather }, maxRetries: 0 });

      expect(next.text).toBe('Echo: And tomorrow?');
      expect(matrix.emulator.received[3].messages).toEqual([...TWO_ROUND_TOOL_LOOP.sentAtLastStep, { role: 'assistant', content: TWO_ROUND_TOOL_LOOP.answer }, { role: 'user', content: 'And tomorrow?' }]);
      expect(await matrix.session.conversations()).toEqual([[...TWO_ROUND_TOOL_LOOP.asOneConversation[0], 'prompt: And tomorrow?', 'reply: Echo: And tomorrow?']]);
    });
  });
});
