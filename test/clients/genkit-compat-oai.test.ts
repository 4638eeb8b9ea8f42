/**
 * The client matrix: Genkit with its OpenAI-compatible plugin (`@genkit-ai/compat-oai`), set up as docs/clients.md
 * shows it: the plugin named `fhirgate`, so fhirgate's models are `fhirgate/<provider>/<model>`, resolved on first
 * use; `X-Project-ID` in the plugin's `defaultHeaders`; the token given with each request (`config.apiKey`, for which
 * the plugin makes a client of its own). The plugin speaks chat completions and puts the keys of `config` it does not
 * know into the body as they are: that is where fhirgate's own fields go.
 */
import { compatOaiModelRef, defineCompatOpenAIModel, openAICompatible } from '@genkit-ai/compat-oai';
import { genkit, GenkitError, z, type Genkit, type ToolAction } from 'genkit';
import { BAD_TOKEN, CHAT_MODEL, CONTINUED, readPrompts, recordedRequestOf, STREAMED, TWO_ROUND_TOOL_LOOP, useClientMatrix, VITALS_EXAMPLE, VITALS_SCHEMA, weatherIn } from './client-matrix.ts';

/** fhirgate's model as Genkit names it: the plugin's name, then fhirgate's id. */
const MODEL = `fhirgate/${CHAT_MODEL}`;

/** What the model declared with `constrained: 'all'` (see the structured-output test) supports. */
const CONSTRAINED_MODEL_INFO = { supports: { multiturn: true, tools: true, toolChoice: true, systemRole: true, constrained: 'all', output: ['text', 'json'] as string[] } } as const;

const Vitals = z.object({ systolic: z.number().int().min(90), trend: z.enum(['stable', 'rising']) });

/** The instruction Genkit adds, as a user message of its own, when the model does not declare constrained output. */
const SCHEMA_INSTRUCTION = /^Output should be in JSON format and conform to the following schema:/;

describe("client matrix: Genkit's OpenAI-compatible plugin", () => {
  const matrix = useClientMatrix();

  /** A Genkit instance for the test's project; `constrained` declares the model with constrained (schema) output. */
  const startGenkit = ({ constrained = false } = {}): Genkit =>
    genkit({
      plugins: [
        openAICompatible({
          name: 'fhirgate',
          baseURL: matrix.session.baseURL,
          apiKey: false,
          defaultHeaders: matrix.session.headers,
          initializer: constrained ? async (client) => [defineCompatOpenAIModel({ name: CHAT_MODEL, client, modelRef: compatOaiModelRef({ name: MODEL, info: CONSTRAINED_MODEL_INFO }) })] : undefined,
        }),
      ],
    });

  /** The request's own settings: a current token, and any of fhirgate's fields. */
  const config = async (fields: Record<string, unknown> = {}): Promise<{ apiKey: string }> => ({ apiKey: await matrix.session.apiKey(), ...fields });

  const weatherTool = (ai: Genkit): ToolAction =>
    ai.defineTool({ name: 'get_weather', description: 'Current weather in a city', inputSchema: z.object({ city: z.string() }), outputSchema: z.string() }, async ({ city }) => weatherIn(city));

  test('generate: the text and its usage, a token given with each request', async () => {
    const ai = startGenkit();
    const response = await ai.generate({ model: MODEL, system: 'Answer briefly.', prompt: 'Summarise the last visit.', config: await config() });
    await ai.generate({ model: MODEL, prompt: 'Again.', config: await config() });

    expect(response.text).toBe('Echo: Summarise the last visit.');
    expect(response.finishReason).toBe('stop');
    expect(response.usage).toMatchObject({ inputTokens: 6, outputTokens: 5 });
    expect(matrix.emulator.received[0].messages).toEqual([
      { role: 'system', content: 'Answer briefly.' },
      { role: 'user', content: 'Summarise the last visit.' },
    ]);
    expect(new Set(matrix.session.issuedTokens).size).toBe(2);
    const [prompt] = await readPrompts(matrix.session.medplum);
    expect(recordedRequestOf(prompt)).toEqual({ model: CHAT_MODEL, messages: [{ role: 'system', content: 'Answer briefly.' }, { role: 'user', content: 'Summarise the last visit.' }] });
    expect(await matrix.session.conversations()).toEqual([
      ['prompt: Summarise the last visit.', 'reply: Echo: Summarise the last visit.'],
      ['prompt: Again.', 'reply: Echo: Again.'],
    ]);
  });

  test('generateStream: the chunks, then the whole response; usage asked for', async () => {
    const { stream, response } = startGenkit().generateStream({ model: MODEL, prompt: STREAMED.prompt, config: await config() });
    let text = '';
    for await (const chunk of stream) {
      text += chunk.text;
    }

    expect(text).toBe(STREAMED.answer);
    expect((await response).text).toBe(STREAMED.answer);
    expect((await response).usage).toMatchObject({ outputTokens: 5 });
    expect(matrix.emulator.received[0]).toMatchObject({ stream: true, body: { stream_options: { include_usage: true } } });
    expect(await matrix.session.conversations()).toEqual(STREAMED.asOneConversation);
  });

  test("a conversation kept in Genkit's own messages: the history reaches the model once, one conversation on record", async () => {
    const ai = startGenkit();
    const first = await ai.generate({ model: MODEL, prompt: CONTINUED.first, config: await config() });
    const second = await ai.generate({ model: MODEL, messages: first.messages, prompt: CONTINUED.second, config: await config() });

    expect(second.text).toBe('Echo: And 8?');
    expect(matrix.emulator.received[1].messages).toEqual(CONTINUED.history);
    expect(await matrix.session.conversations()).toEqual(CONTINUED.asOneConversation);
    // Genkit keeps none of the plugin's answer beyond the message: fhirgate's conversation_id does not reach the application.
    expect(first.raw).toEqual({});
  });

  test('tools: Genkit runs the loop itself, two rounds of calls (the second two at once), one conversation on record', async () => {
    const ai = startGenkit();
    const response = await ai.generate({ model: MODEL, prompt: TWO_ROUND_TOOL_LOOP.prompt, tools: [weatherTool(ai)], config: await config() });

    expect(response.text).toBe(TWO_ROUND_TOOL_LOOP.answer);
    expect(matrix.emulator.received).toHaveLength(3);
    expect(matrix.emulator.received[0].tools).toEqual([{ name: 'get_weather', parameters: expect.objectContaining({ properties: { city: { type: 'string' } } }) }]);
    expect(matrix.emulator.received[2].messages).toEqual(TWO_ROUND_TOOL_LOOP.sentAtLastStep);
    expect(await matrix.session.conversations()).toEqual(TWO_ROUND_TOOL_LOOP.asOneConversation);
  });

  test('tools, streamed: the calls, their results and the answer come as chunks', async () => {
    const ai = startGenkit();
    const { stream, response } = ai.generateStream({ model: MODEL, prompt: TWO_ROUND_TOOL_LOOP.prompt, tools: [weatherTool(ai)], config: await config() });
    const toolResults: unknown[] = [];
    for await (const chunk of stream) {
      toolResults.push(...chunk.content.flatMap((part) => (part.toolResponse ? [part.toolResponse.output] : [])));
    }

    expect(toolResults).toEqual(['Sunny in Lyon', 'Sunny in Paris', 'Sunny in Nice']);
    expect((await response).text).toBe(TWO_ROUND_TOOL_LOOP.answer);
    expect(matrix.emulator.received.map((request) => request.stream)).toEqual([true, true, true]);
    expect(await matrix.session.conversations()).toEqual(TWO_ROUND_TOOL_LOOP.asOneConversation);
  });

  test("structured output, the model as resolved: Genkit adds the schema as an instruction in a user message of its own, and reads the JSON from the reply's text", async () => {
    // The emulator answers JSON only for a response format; this model gets an instruction, so it is told what to say.
    matrix.emulator.enqueue({ reply: JSON.stringify(VITALS_EXAMPLE) });
    const response = await startGenkit().generate({ model: MODEL, prompt: 'Latest vitals.', output: { schema: Vitals }, config: await config() });

    expect(response.output).toEqual(VITALS_EXAMPLE);
    const { messages, output } = matrix.emulator.received[0];
    expect(output.responseFormat).toBeUndefined();
    expect(messages.map((message) => message.content)).toEqual(['Latest vitals.', expect.stringMatching(SCHEMA_INSTRUCTION)]);
    // Both messages are on the prompt's record, as the plugin sent them.
    const [prompt] = await readPrompts(matrix.session.medplum);
    expect((recordedRequestOf(prompt).messages as unknown[]).length).toBe(2);

    // Streamed, Genkit reads the JSON from the text as it grows.
    matrix.emulator.enqueue({ reply: JSON.stringify(VITALS_EXAMPLE, null, 1) });
    const { stream, response: streamed } = startGenkit().generateStream({ model: MODEL, prompt: 'Latest vitals.', output: { schema: Vitals }, config: await config() });
    const partials: unknown[] = [];
    for await (const chunk of stream) {
      partials.push(chunk.output);
    }
    expect(partials.at(-1)).toEqual(VITALS_EXAMPLE);
    expect((await streamed).output).toEqual(VITALS_EXAMPLE);
  });

  test("structured output, the model declared constrained: the schema sent as response_format json_schema; streamed, Genkit's plugin fails on the first piece of JSON", async () => {
    const ai = startGenkit({ constrained: true });
    const response = await ai.generate({ model: MODEL, prompt: 'Latest vitals.', output: { schema: Vitals }, config: await config() });

    expect(response.output).toEqual(VITALS_EXAMPLE);
    expect(matrix.emulator.received[0].messages).toEqual([{ role: 'user', content: 'Latest vitals.' }]);
    expect(matrix.emulator.received[0].output.responseFormat).toEqual({ type: 'json_schema', name: 'output', schema: expect.objectContaining({ properties: VITALS_SCHEMA.properties }) });
    expect(await matrix.session.conversations()).toEqual([['prompt: Latest vitals.', `reply: ${JSON.stringify(VITALS_EXAMPLE, null, 1)}`]]);

    // compat-oai 1.42 parses each streamed piece as a whole JSON document: a known limit of the client, with any server.
    const { stream } = ai.generateStream({ model: MODEL, prompt: 'Latest vitals.', output: { schema: Vitals }, config: await config() });
    const streamed = (async (): Promise<void> => {
      for await (const chunk of stream) {
        void chunk;
      }
    })();
    await expect(streamed).rejects.toThrow(SyntaxError);
  });

  test("fhirgate's own fields in config, as any key the plugin does not know: patient_id makes the turn about the patient", async () => {
    const patientId = matrix.session.project.ids['patient-in-care-team-1'];
    const response = await startGenkit().generate({ model: MODEL, prompt: 'What should I check at the next visit?', config: await config({ patient_id: patientId, max_completion_tokens: 50 }) });

    expect(response.text).toBe('Echo: What should I check at the next visit?');
    expect(matrix.emulator.received[0].body).toMatchObject({ max_completion_tokens: 50 });
    const [prompt] = await readPrompts(matrix.session.medplum);
    expect(prompt.subject).toEqual({ reference: `Patient/${patientId}` });
    expect(recordedRequestOf(prompt)).toMatchObject({ patient_id: patientId });
  });

  test('errors: GenkitError UNAUTHENTICATED for a bad token, INVALID_ARGUMENT with the field named for a bad one', async () => {
    const ai = startGenkit();
    const unauthenticated = await ai.generate({ model: MODEL, prompt: 'Hi', config: { apiKey: BAD_TOKEN } }).catch((error: unknown) => error);
    expect(unauthenticated).toBeInstanceOf(GenkitError);
    expect(unauthenticated).toMatchObject({ status: 'UNAUTHENTICATED', message: expect.stringContaining('Missing, invalid or expired access token.') });

    const invalid = await ai.generate({ model: MODEL, prompt: 'Hi', config: await config({ seed: 1.5 }) }).catch((error: unknown) => error);
    expect(invalid).toBeInstanceOf(GenkitError);
    expect(invalid).toMatchObject({ status: 'INVALID_ARGUMENT', message: expect.stringContaining('seed') });
    expect(matrix.emulator.received).toHaveLength(0);
    expect(await matrix.session.conversations()).toEqual([]);
  });
});
