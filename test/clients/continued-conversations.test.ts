/**
 * Continued conversations whose turns hold several messages (a system or developer message, a few-shot pair, a
 * question followed by an instruction, a tool call and its result, text parts and participant names), with each
 * client of the matrix, run both ways: the client keeping the history itself (sending it whole with every request),
 * then the client naming the conversation (`conversation_id`, `previous_response_id`) and sending only what is new.
 * What reached the provider (the emulator's request bodies) must be the same both ways, request by request; and so
 * must the conversation on record, read back with MedplumClient.
 */
import { createOpenAI } from '@ai-sdk/openai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { openAICompatible } from '@genkit-ai/compat-oai';
import { AIMessage, HumanMessage, SystemMessage, ToolMessage, type BaseMessage } from '@langchain/core/messages';
import { ChatOpenAI } from '@langchain/openai';
import type { ChatMessage as LlamaIndexMessage } from '@llamaindex/core/llms';
import { OpenAI as LlamaIndexOpenAI } from '@llamaindex/openai';
import { Agent, OpenAIProvider, Runner, setTracingDisabled, tool as agentTool, type AgentInputItem } from '@openai/agents';
import { generateText, stepCountIs, tool, type ModelMessage } from 'ai';
import { genkit, z as genkitZod } from 'genkit';
import OpenAI from 'openai';
import { z } from 'zod';
import type { FhirgateCompletion } from '../support/chat-clients.ts';
import { CHAT_MODEL, readPrompts, useClientMatrix, WEATHER_TOOL, weatherIn } from './client-matrix.ts';

const SYSTEM = 'Answer briefly.';
const FEW_SHOT = { question: 'Capital of France?', answer: 'Paris' } as const;
const QUESTION = 'Capital of Italy?';
const INSTRUCTION = 'Answer in one word.';
/** Makes the emulated model call get_weather once (with a fixed call id, the same in both runs), then answer. */
const ASK_WEATHER = `Weather in Lyon? [emulator-behaviour ${JSON.stringify({ toolCalls: [[{ name: 'get_weather', arguments: { city: 'Lyon' }, id: 'call_lyon' }]] })}]`;
const CALL_ID = 'call_lyon';
const LAST = 'And Spain?';

/** What the model of the continued conversation is sent with its second turn: the whole first turn, in order. */
const SECOND_TURN_ROLES = ['system', 'user', 'assistant', 'user', 'user', 'assistant', 'user'];

describe('continued conversations: each client, its history kept by itself or by fhirgate, the provider sent the same', () => {
  const matrix = useClientMatrix(['vllm']);

  /** The messages of each request the provider received, as it received them. */
  const sentMessages = (): unknown[] => matrix.emulator.received.map((request) => request.body.messages);

  /**
   * Runs the conversation with the client keeping its history, then (the emulator's log cleared) naming it; returns
   * what the provider received each way, and the two conversations on record.
   */
  const bothWays = async (keptByClient: () => Promise<void>, named: () => Promise<void>): Promise<{ kept: unknown[]; named: unknown[]; records: string[][] }> => {
    await keptByClient();
    const kept = sentMessages();
    matrix.emulator.reset();
    await named();
    return { kept, named: sentMessages(), records: await matrix.session.conversations() };
  };

  /**
   * The first prompt of each way's conversation keeps every message its turn sent, in order, and shows a reviewer
   * the user's words: the question and the instruction after it, not only the last of them.
   */
  const expectFirstPromptsKeepEveryMessage = async (roles: readonly string[]): Promise<void> => {
    const firsts = (await readPrompts(matrix.session.medplum)).filter((prompt) => prompt.payload?.[0]?.contentString === FEW_SHOT.question);
    expect(firsts).toHaveLength(2);
    for (const prompt of firsts) {
      const described = prompt.extension?.filter((extension) => extension.url === 'urn:fhirgate:extension:message') ?? [];
      expect(described.map((message) => message.extension?.find((field) => field.url === 'role')?.valueCode)).toEqual(roles);
      expect(prompt.payload?.map((item) => item.contentString)).toEqual([FEW_SHOT.question, QUESTION, INSTRUCTION]);
    }
  };

  test('the openai SDK, chat completions: conversation_id with only the new messages', async () => {
    const openai = new OpenAI({ baseURL: matrix.session.baseURL, apiKey: matrix.session.apiKey, defaultHeaders: matrix.session.headers, maxRetries: 0 });
    const tools: OpenAI.ChatCompletionTool[] = [{ type: 'function', function: WEATHER_TOOL }];
    const complete = async (body: Record<string, unknown>): Promise<FhirgateCompletion> =>
      (await openai.chat.completions.create({ model: CHAT_MODEL, tools, ...body } as unknown as OpenAI.ChatCompletionCreateParamsNonStreaming)) as FhirgateCompletion;
    const opening: OpenAI.ChatCompletionMessageParam[] = [
      { role: 'system', content: SYSTEM },
      { role: 'user', content: FEW_SHOT.question },
      { role: 'assistant', content: FEW_SHOT.answer },
      { role: 'user', content: QUESTION },
      { role: 'user', content: INSTRUCTION },
    ];
    const result: OpenAI.ChatCompletionToolMessageParam = { role: 'tool', tool_call_id: CALL_ID, content: weatherIn('Lyon') };
    const last: OpenAI.ChatCompletionUserMessageParam = { role: 'user', name: 'dr_lee', content: [{ type: 'text', text: 'And ' }, { type: 'text', text: 'Spain?' }] };

    const outcome = await bothWays(
      async () => {
        const messages = [...opening];
        for (const next of [[], [{ role: 'user', content: ASK_WEATHER }], [result], [last]] as OpenAI.ChatCompletionMessageParam[][]) {
          messages.push(...next);
          messages.push((await complete({ messages })).choices[0].message as OpenAI.ChatCompletionMessageParam);
        }
      },
      async () => {
        const first = await complete({ messages: opening });
        const conversation_id = first.conversation_id;
        await complete({ conversation_id, messages: [{ role: 'user', content: ASK_WEATHER }] });
        await complete({ conversation_id, messages: [result] });
        // The system message again, as clients that resend it with every request do: sent once.
        await complete({ conversation_id, messages: [{ role: 'system', content: SYSTEM }, last] });
      }
    );

    expect(outcome.named).toEqual(outcome.kept);
    expect((outcome.named[1] as { role: string }[]).map((message) => message.role)).toEqual(SECOND_TURN_ROLES);
    expect(outcome.named[3]).toEqual([
      { role: 'system', content: SYSTEM },
      { role: 'user', content: FEW_SHOT.question },
      { role: 'assistant', content: FEW_SHOT.answer },
      { role: 'user', content: QUESTION },
      { role: 'user', content: INSTRUCTION },
      { role: 'assistant', content: `Echo: ${INSTRUCTION}` },
      { role: 'user', content: ASK_WEATHER },
      { role: 'assistant', content: null, tool_calls: [{ id: CALL_ID, type: 'function', function: { name: 'get_weather', arguments: '{"city":"Lyon"}' } }] },
      { role: 'tool', tool_call_id: CALL_ID, content: 'Sunny in Lyon' },
      { role: 'assistant', content: `Echo: ${ASK_WEATHER}` },
      { role: 'user', name: 'dr_lee', content: [{ type: 'text', text: 'And ' }, { type: 'text', text: 'Spain?' }] },
    ]);
    // One conversation each way, and the same turns on record either way.
    expect(outcome.records).toHaveLength(2);
    expect(outcome.records[1]).toEqual(outcome.records[0]);
    await expectFirstPromptsKeepEveryMessage(['system', 'user', 'assistant', 'user', 'user']);
  });

  test("the openai SDK, Responses: previous_response_id with only the new input items; each request's instructions its own", async () => {
    const openai = new OpenAI({ baseURL: matrix.session.baseURL, apiKey: matrix.session.apiKey, defaultHeaders: matrix.session.headers, maxRetries: 0 });
    const tools: OpenAI.Responses.FunctionTool[] = [{ type: 'function', ...WEATHER_TOOL, strict: true }];
    const create = (body: Omit<OpenAI.Responses.ResponseCreateParamsNonStreaming, 'model'>): Promise<OpenAI.Responses.Response> =>
      openai.responses.create({ model: CHAT_MODEL, instructions: 'You assist clinicians.', tools, ...body });
    const opening: OpenAI.Responses.ResponseInputItem[] = [
      { role: 'developer', content: SYSTEM },
      { role: 'user', content: FEW_SHOT.question },
      { role: 'assistant', content: FEW_SHOT.answer },
      { role: 'user', content: QUESTION },
      { role: 'user', content: INSTRUCTION },
    ];
    const output: OpenAI.Responses.ResponseInputItem = { type: 'function_call_output', call_id: CALL_ID, output: weatherIn('Lyon') };
    const last: OpenAI.Responses.ResponseInputItem = { role: 'user', content: [{ type: 'input_text', text: 'And ' }, { type: 'input_text', text: 'Spain?' }] };

    const outcome = await bothWays(
      async () => {
        const input = [...opening];
        for (const next of [[], [{ role: 'user', content: ASK_WEATHER }], [output], [last]] as OpenAI.Responses.ResponseInputItem[][]) {
          input.push(...next);
          input.push(...((await create({ input })).output as OpenAI.Responses.ResponseInputItem[]));
        }
      },
      async () => {
        let previous = await create({ input: opening });
        for (const input of [[{ role: 'user', content: ASK_WEATHER }], [output], [last]] as OpenAI.Responses.ResponseInputItem[][]) {
          previous = await create({ previous_response_id: previous.id, input });
        }
      }
    );

    expect(outcome.named).toEqual(outcome.kept);
    // The request's instructions first, then the developer message of the first turn's input, as OpenAI keeps it.
    expect((outcome.named[1] as { role: string; content: string }[]).slice(0, 3)).toEqual([
      { role: 'system', content: 'You assist clinicians.' },
      { role: 'developer', content: SYSTEM },
      { role: 'user', content: FEW_SHOT.question },
    ]);
    expect(outcome.records[1]).toEqual(outcome.records[0]);
    await expectFirstPromptsKeepEveryMessage(['developer', 'user', 'assistant', 'user', 'user']);
  });

  test('the AI SDK with @ai-sdk/openai (Responses): previousResponseId, a tool loop among the turns, its system sent with each request', async () => {
    const provider = createOpenAI({ baseURL: matrix.session.baseURL, apiKey: matrix.session.apiKey, headers: matrix.session.headers });
    const tools = { get_weather: tool({ description: WEATHER_TOOL.description, inputSchema: z.object({ city: z.string() }), execute: async ({ city }) => weatherIn(city) }) };
    const opening: ModelMessage[] = [
      { role: 'user', content: FEW_SHOT.question },
      { role: 'assistant', content: FEW_SHOT.answer },
      { role: 'user', content: QUESTION },
      { role: 'user', content: INSTRUCTION },
    ];
    const generate = (fields: { messages: ModelMessage[]; previousResponseId?: string }) =>
      generateText({
        model: provider(CHAT_MODEL),
        system: SYSTEM,
        messages: fields.messages,
        tools,
        stopWhen: stepCountIs(2),
        maxRetries: 0,
        ...(fields.previousResponseId ? { providerOptions: { openai: { previousResponseId: fields.previousResponseId } } } : {}),
      });
    const responseIdOf = (result: { providerMetadata?: { openai?: { responseId?: unknown } } }): string => String(result.providerMetadata?.openai?.responseId);

    const outcome = await bothWays(
      async () => {
        const messages = [...opening];
        for (const next of [[], [{ role: 'user', content: ASK_WEATHER }], [{ role: 'user', content: LAST }]] as ModelMessage[][]) {
          messages.push(...next);
          messages.push(...(await generate({ messages })).responseMessages);
        }
      },
      async () => {
        let previous = await generate({ messages: opening });
        for (const next of [[{ role: 'user', content: ASK_WEATHER }], [{ role: 'user', content: LAST }]] as ModelMessage[][]) {
          previous = await generate({ messages: next, previousResponseId: responseIdOf(previous) });
        }
      }
    );

    // The tool loop is two requests: four in all, each the same both ways.
    expect(outcome.named).toHaveLength(4);
    expect(outcome.named).toEqual(outcome.kept);
    expect((outcome.named[1] as { role: string }[]).map((message) => message.role)).toEqual(SECOND_TURN_ROLES);
    expect(outcome.records[1]).toEqual(outcome.records[0]);
  });

  test('the AI SDK with @ai-sdk/openai-compatible (chat completions): conversation_id in providerOptions', async () => {
    const fhirgate = createOpenAICompatible({ name: 'fhirgate', baseURL: matrix.session.baseURL, apiKey: matrix.session.apiKey, headers: matrix.session.headers });
    const opening: ModelMessage[] = [
      { role: 'user', content: FEW_SHOT.question },
      { role: 'assistant', content: FEW_SHOT.answer },
      { role: 'user', content: QUESTION },
      { role: 'user', content: INSTRUCTION },
    ];
    const generate = (messages: ModelMessage[], conversationId?: string): ReturnType<typeof generateText> =>
      generateText({ model: fhirgate(CHAT_MODEL), system: SYSTEM, messages, maxRetries: 0, ...(conversationId ? { providerOptions: { fhirgate: { conversation_id: conversationId } } } : {}) });

    const outcome = await bothWays(
      async () => {
        const messages = [...opening];
        for (const next of [[], [{ role: 'user', content: 'And Germany?' }], [{ role: 'user', content: LAST }]] as ModelMessage[][]) {
          messages.push(...next);
          messages.push(...(await generate(messages)).responseMessages);
        }
      },
      async () => {
        const first = await generate(opening);
        const conversationId = String(first.response.headers?.['x-conversation-id']);
        await generate([{ role: 'user', content: 'And Germany?' }], conversationId);
        await generate([{ role: 'user', content: LAST }], conversationId);
      }
    );

    expect(outcome.named).toEqual(outcome.kept);
    expect((outcome.named[1] as { role: string }[]).map((message) => message.role)).toEqual(SECOND_TURN_ROLES);
    expect(outcome.records[1]).toEqual(outcome.records[0]);
    await expectFirstPromptsKeepEveryMessage(['system', 'user', 'assistant', 'user', 'user']);
  });

  test("LangChain's ChatOpenAI (chat completions): conversation_id in modelKwargs, a tool round trip among the turns", async () => {
    const chatModel = (modelKwargs?: Record<string, unknown>): ChatOpenAI =>
      new ChatOpenAI({ model: CHAT_MODEL, apiKey: matrix.session.apiKey, configuration: { baseURL: matrix.session.baseURL, defaultHeaders: matrix.session.headers }, maxRetries: 0, modelKwargs, __includeRawResponse: true });
    const withTools = (model: ChatOpenAI): ReturnType<ChatOpenAI['bindTools']> => model.bindTools([{ type: 'function', function: WEATHER_TOOL }]);
    const opening: BaseMessage[] = [new SystemMessage(SYSTEM), new HumanMessage(FEW_SHOT.question), new AIMessage(FEW_SHOT.answer), new HumanMessage(QUESTION), new HumanMessage(INSTRUCTION)];
    const result = new ToolMessage({ tool_call_id: CALL_ID, content: weatherIn('Lyon') });

    const outcome = await bothWays(
      async () => {
        const model = withTools(chatModel());
        const messages = [...opening];
        for (const next of [[], [new HumanMessage(ASK_WEATHER)], [result], [new HumanMessage({ content: LAST, name: 'dr_lee' })]]) {
          messages.push(...next);
          const answer = await model.invoke(messages);
          // What the client keeps is the message it got, as LangChain hands it back.
          messages.push(new AIMessage({ content: answer.content, tool_calls: answer.tool_calls }));
        }
      },
      async () => {
        const first = await withTools(chatModel()).invoke(opening);
        const raw = first.additional_kwargs.__raw_response as { conversation_id: string };
        const model = withTools(chatModel({ conversation_id: raw.conversation_id }));
        await model.invoke([new HumanMessage(ASK_WEATHER)]);
        await model.invoke([result]);
        await model.invoke([new SystemMessage(SYSTEM), new HumanMessage({ content: LAST, name: 'dr_lee' })]);
      }
    );

    expect(outcome.named).toEqual(outcome.kept);
    expect((outcome.named[1] as { role: string }[]).map((message) => message.role)).toEqual(SECOND_TURN_ROLES);
    expect(outcome.records[1]).toEqual(outcome.records[0]);
    await expectFirstPromptsKeepEveryMessage(['system', 'user', 'assistant', 'user', 'user']);
  });

  test("LlamaIndex's OpenAI LLM: conversation_id in additionalChatOptions, text parts among the messages", async () => {
    const client = new OpenAI({ baseURL: matrix.session.baseURL, apiKey: matrix.session.apiKey, defaultHeaders: matrix.session.headers, maxRetries: 0 });
    const llm = new LlamaIndexOpenAI({ model: CHAT_MODEL, session: client as unknown as Awaited<LlamaIndexOpenAI['session']> });
    const opening: LlamaIndexMessage[] = [
      { role: 'system', content: SYSTEM },
      { role: 'user', content: FEW_SHOT.question },
      { role: 'assistant', content: FEW_SHOT.answer },
      { role: 'user', content: QUESTION },
      { role: 'user', content: INSTRUCTION },
    ];
    const last: LlamaIndexMessage = { role: 'user', content: [{ type: 'text', text: 'And ' }, { type: 'text', text: 'Spain?' }] };

    const outcome = await bothWays(
      async () => {
        const messages = [...opening];
        for (const next of [[], [{ role: 'user', content: 'And Germany?' }], [last]] as LlamaIndexMessage[][]) {
          messages.push(...next);
          messages.push((await llm.chat({ messages })).message);
        }
      },
      async () => {
        const first = await llm.chat({ messages: opening });
        const conversationId = (first.raw as { conversation_id: string }).conversation_id;
        for (const messages of [[{ role: 'user', content: 'And Germany?' }], [last]] as LlamaIndexMessage[][]) {
          await llm.chat({ messages, additionalChatOptions: { conversation_id: conversationId } as Record<string, unknown> });
        }
      }
    );

    expect(outcome.named).toEqual(outcome.kept);
    expect((outcome.named[1] as { role: string }[]).map((message) => message.role)).toEqual(SECOND_TURN_ROLES);
    expect(outcome.records[1]).toEqual(outcome.records[0]);
    await expectFirstPromptsKeepEveryMessage(['system', 'user', 'assistant', 'user', 'user']);
  });

  test("the OpenAI Agents SDK: previousResponseId on each run, or the run's history as the next input; the agent's instructions its own", async () => {
    setTracingDisabled(true);
    const client = new OpenAI({ baseURL: matrix.session.baseURL, apiKey: matrix.session.apiKey, defaultHeaders: matrix.session.headers, maxRetries: 0 });
    const runner = new Runner({ modelProvider: new OpenAIProvider({ openAIClient: client }) });
    const getWeather = agentTool({ name: 'get_weather', description: WEATHER_TOOL.description, parameters: z.object({ city: z.string() }), execute: async ({ city }) => weatherIn(city) });
    const agent = new Agent({ name: 'Assistant', instructions: 'You assist clinicians.', model: CHAT_MODEL, tools: [getWeather] });
    const opening: AgentInputItem[] = [
      { role: 'system', content: SYSTEM },
      { role: 'user', content: FEW_SHOT.question },
      { role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: FEW_SHOT.answer }] },
      { role: 'user', content: QUESTION },
      { role: 'user', content: INSTRUCTION },
    ];
    const user = (content: string): AgentInputItem => ({ role: 'user', content });

    const outcome = await bothWays(
      async () => {
        let items = opening;
        for (const next of [[], [user(ASK_WEATHER)], [user(LAST)]]) {
          items = (await runner.run(agent, [...items, ...next])).history;
        }
      },
      async () => {
        let previous = await runner.run(agent, opening);
        for (const next of [[user(ASK_WEATHER)], [user(LAST)]]) {
          previous = await runner.run(agent, next, { previousResponseId: previous.lastResponseId });
        }
      }
    );

    // The run with the tool is two requests: four in all, each the same both ways.
    expect(outcome.named).toHaveLength(4);
    expect(outcome.named).toEqual(outcome.kept);
    expect((outcome.named[1] as { role: string }[]).map((message) => message.role)).toEqual(['system', ...SECOND_TURN_ROLES]);
    expect(outcome.records[1]).toEqual(outcome.records[0]);
  });

  test("Genkit's OpenAI-compatible plugin: a structured request's prompt keeps the user's question and Genkit's schema message; both go on as history", async () => {
    const ai = genkit({ plugins: [openAICompatible({ name: 'fhirgate', apiKey: await matrix.session.apiKey(), baseURL: matrix.session.baseURL, defaultHeaders: matrix.session.headers, maxRetries: 0 })] });
    // Genkit's schemas are its own zod's.
    const vitals = genkitZod.object({ systolic: genkitZod.number().int().min(90), trend: genkitZod.enum(['stable', 'rising']) });
    // Genkit asks for the schema in a user message of its own, after the question: the emulated model answers JSON.
    matrix.emulator.enqueue({ reply: '{"systolic": 90, "trend": "stable"}' });
    const first = await ai.generate({ model: `fhirgate/${CHAT_MODEL}`, prompt: 'Latest vitals as JSON.', output: { schema: vitals } });
    const sentFirst = matrix.emulator.received[0].body.messages as { role: string; content: string }[];
    const [prompt] = await readPrompts(matrix.session.medplum);
    // fhirgate's conversation_id goes in Genkit's config, which the plugin puts in the body.
    await ai.generate({ model: `fhirgate/${CHAT_MODEL}`, prompt: 'And the trend?', config: { conversation_id: prompt.partOf?.[0]?.reference?.replace('Communication/', '') } });

    expect(first.output).toEqual({ systolic: 90, trend: 'stable' });
    expect(sentFirst.map((message) => message.content.split('\n')[0])).toEqual(['Latest vitals as JSON.', 'Output should be in JSON format and conform to the following schema:']);
    // On record: the user's question first, then the schema message, both in the payload a reviewer reads.
    expect(prompt.payload?.map((item) => item.contentString)).toEqual(sentFirst.map((message) => message.content));
    // The continued turn is sent every message of the first, as it was sent.
    expect(matrix.emulator.received[1].body.messages).toEqual([...sentFirst, { role: 'assistant', content: '{"systolic": 90, "trend": "stable"}' }, { role: 'user', content: 'And the trend?' }]);
  });
});
