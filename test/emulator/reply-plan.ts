// Decides what the emulated model says and what usage it reports, from the request and the behaviour,
// before any wire format is involved, so all three providers answer the same request the same way.
import type { EmulatorBehaviour } from './behaviour.ts';
import { exampleOf } from './json-schema-example.ts';
import type { ChatRequest, NormalizedMessage, PlannedReply, PlannedToolCall, TokenLogprob } from './provider-format.ts';
import { countTokens, createNumberedTokens, splitIntoTokens } from './tokenizer.ts';

/** The default reply: `Echo: <text of the last user message>` (`Echo:` alone when there is none). */
export function createDefaultReplyText(messages: readonly NormalizedMessage[]): string {
  for (let index = messages.length - 1; index >= 0; index--) {
    if (messages[index].role === 'user') {
      return `Echo: ${messages[index].content}`;
    }
  }
  return 'Echo:';
}

/** What prompt counting reads of a message: its text and its calls (a `ChatMessage` of fhirgate's port fits). */
export interface CountedMessage {
  readonly content: string;
  readonly toolCalls?: readonly { readonly name: string; readonly arguments: string }[];
}

/** What prompt counting reads of an offered tool. */
export interface CountedTool {
  readonly name: string;
  readonly description?: string;
  readonly parameters: Readonly<Record<string, unknown>>;
}

/**
 * Prompt tokens: the words of every message (system and tool results included), each call's name and the words of
 * its arguments, and each offered tool's name, description and the words of its schema. JSON is counted by its
 * words, punctuation aside, so `{"patientId":"p1"}` is 2 tokens however it is spaced.
 */
export function countPromptTokens(messages: readonly CountedMessage[], tools: readonly CountedTool[] = []): number {
  let total = 0;
  for (const message of messages) {
    total += countTokens(message.content);
    for (const call of message.toolCalls ?? []) {
      total += countTokens(call.name) + countJsonTokens(call.arguments);
    }
  }
  for (const tool of tools) {
    total += countTokens(tool.name) + countTokens(tool.description ?? '') + countJsonTokens(JSON.stringify(tool.parameters));
  }
  return total;
}

/** The words of JSON text, its punctuation taken as spaces. */
export function countJsonTokens(text: string): number {
  return countTokens(text.replace(/[{}[\],:"]/g, ' '));
}

/**
 * The calls the model makes for this request, or none: a request that offers no tools, or says `none`, gets text;
 * so does one whose tool-call rounds since its last user message already made every step.
 */
export function chooseToolCalls(request: ChatRequest, behaviour: EmulatorBehaviour): PlannedToolCall[] {
  const steps = behaviour.toolCalls;
  if (steps === undefined || request.tools.length === 0 || request.toolChoice === 'none') {
    return [];
  }
  const step = steps[countToolRounds(request.messages)];
  if (step === undefined) {
    return [];
  }
  return step.map((call, index) => ({
    index,
    id: call.id,
    name: call.name,
    input: call.arguments,
    arguments: JSON.stringify(call.arguments),
  }));
}

/** Assistant messages with calls after the last user message: the rounds of calls the model already made. */
function countToolRounds(messages: readonly NormalizedMessage[]): number {
  let rounds = 0;
  for (let index = messages.length - 1; index >= 0 && messages[index].role !== 'user'; index--) {
    if (messages[index].role === 'assistant' && (messages[index].toolCalls?.length ?? 0) > 0) {
      rounds++;
    }
  }
  return rounds;
}

/**
 * Plans the reply to one request: its tokens, its calls, the finish reason (after the request's token cap: a reply
 * cut by it makes no calls) and usage.
 */
export function planReply(request: ChatRequest, behaviour: EmulatorBehaviour, sequence: number): PlannedReply {
  let tokens: readonly string[];
  let toolCalls: readonly PlannedToolCall[] = chooseToolCalls(request, behaviour);
  if (behaviour.replyTokens !== undefined) {
    tokens = createNumberedTokens(behaviour.replyTokens);
  } else if (behaviour.reply === undefined && toolCalls.length > 0) {
    // A step without a fixed reply is only its calls, as a model that calls at once.
    tokens = [];
  } else {
    tokens = splitIntoTokens(behaviour.reply ?? (request.output.responseFormat ? createStructuredReplyText(request) : createDefaultReplyText(request.messages)));
  }
  let finishReason: PlannedReply['finishReason'] = toolCalls.length > 0 ? 'tool_calls' : 'stop';
  if (request.maxTokens !== undefined && tokens.length > request.maxTokens) {
    tokens = tokens.slice(0, request.maxTokens);
    toolCalls = [];
    finishReason = 'length';
  }
  let completionTokens = tokens.length;
  for (const call of toolCalls) {
    completionTokens += countTokens(call.name) + countJsonTokens(call.arguments);
  }
  return {
    sequence,
    model: request.model,
    tokens,
    text: tokens.join(''),
    toolCalls,
    finishReason,
    promptTokens: behaviour.usage?.promptTokens ?? countPromptTokens(request.messages, request.tools),
    completionTokens: behaviour.usage?.completionTokens ?? completionTokens,
    createdAt: Math.floor(Date.now() / 1000),
    ...(request.output.logprobs ? { logprobs: createLogprobs(tokens, request.output.logprobs.top) } : {}),
    choices: request.output.choices,
  };
}

/**
 * The reply to a request for structured output: JSON following the schema (`exampleOf`), or, with no schema,
 * `{"echo": <the default reply>}`; indented, so it streams as several tokens.
 */
export function createStructuredReplyText(request: Pick<ChatRequest, 'messages' | 'output'>): string {
  const format = request.output.responseFormat;
  const value = format?.schema ? exampleOf(format.schema) : { echo: createDefaultReplyText(request.messages) };
  return JSON.stringify(value, null, 1);
}

/**
 * Log probabilities that depend only on the position: token i has -0.1 × (i mod 5 + 1); its alternatives are the
 * token itself, then `alt1`, `alt2`, ..., each 1 lower than the one before.
 */
export function createLogprobs(tokens: readonly string[], top: number): TokenLogprob[] {
  return tokens.map((token, index) => {
    const logprob = -Math.round((index % 5) + 1) / 10;
    return {
      token,
      logprob,
      top: Array.from({ length: top }, (_, rank) => ({ token: rank === 0 ? token : `alt${rank}`, logprob: logprob - rank })),
    };
  });
}

/** Splits a call's arguments text into a few pieces, as providers stream them; joined, they are the text. */
export function splitArguments(text: string, pieces = 3): string[] {
  const size = Math.max(1, Math.ceil(text.length / pieces));
  const parts: string[] = [];
  for (let start = 0; start < text.length; start += size) {
    parts.push(text.slice(start, start + size));
  }
  return parts;
}
