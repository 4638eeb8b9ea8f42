/**
 * A model not cleared for patient data, behind de-identification: everything a call sends crosses
 * `deIdentifyRequest` (every message, whatever its role, and each of its text parts: system and developer messages
 * and the chart summary, the history, the user's prompt, the calls and results of tools with their ids and
 * function names; the tools' names, descriptions and schemas, property keys included; the tool choice; the
 * request's options: stop sequences, the response format's name and schema, metadata keys and values, ...), and
 * what the model answers crosses re-identification before anyone else sees it: its text, streamed or whole, and
 * the names of the functions it calls (mapped back to the names the request gave).
 *
 * The arguments of its calls are re-identified only where they stay inside fhirgate or the project allows it: a
 * call of fhirgate's own FHIR tools is run re-identified (it reads the chart, and its result goes back to the model
 * de-identified), but a call of the request's own tools goes to the client, which runs it wherever it likes (a web
 * search, another service): it keeps the model's pseudonyms unless the project sets
 * `AI_PATIENT_DATA_TOOL_ARGUMENTS=re-identify`. Otherwise a model not cleared for patient data could make the
 * client carry the patient's identifiers anywhere its tools reach.
 *
 * The wrapper sits right around the provider, below the FHIR tools' loop and inside the retries and fallbacks, so
 * no path to the provider goes round it. What the model wrote, before re-identification, is kept for the reply's
 * record.
 */
import type { ChatGenerationOptions, ChatMessage, ChatModel, ChatModelRequest, ChatStreamEvent, ChatToolCall } from '../llm/chat-model.ts';
import type { Pseudonymizer } from './de-identify-text.ts';
import { StreamReIdentifier } from './re-identify-stream.ts';

/** What the model of a de-identified turn wrote, as it wrote it (its text, over every step of a tool loop). */
export class ModelTranscript {
  #text = '';

  get text(): string {
    return this.#text;
  }

  add(text: string): void {
    this.#text += text;
  }
}

/** Whose tools a turn offers the model, and what the client gets of a call to its own. */
export interface ToolCallRule {
  /** The request has tools of its own (the client's); then fhirgate offers none of its own in the turn. */
  readonly clientTools: boolean;
  /** The client's calls come back with their arguments re-identified (`AI_PATIENT_DATA_TOOL_ARGUMENTS=re-identify`). */
  readonly reIdentifyClientArguments: boolean;
}

/** How a de-identified model is wrapped for one turn. */
export interface DeIdentifiedModelOptions {
  readonly toolCalls: ToolCallRule;
  /** Called before each request goes out. */
  readonly onSend?: () => void;
}

/** `model` with de-identified requests and re-identified answers. */
export function deIdentifiedModel(model: ChatModel, pseudonyms: Pseudonymizer, transcript: ModelTranscript, options: DeIdentifiedModelOptions): ChatModel {
  const onSend = options.onSend ?? ((): void => undefined);
  return {
    provider: model.provider,
    // Which fields the provider takes does not depend on the text in them.
    ...(model.checkRequest ? { checkRequest: model.checkRequest.bind(model) } : {}),
    complete: async (request) => {
      onSend();
      const completion = await model.complete(deIdentifyRequest(request, pseudonyms));
      transcript.add(completion.text);
      const answerCall = callAnswer(request, pseudonyms, options.toolCalls);
      return { ...completion, text: pseudonyms.reIdentify(completion.text), toolCalls: completion.toolCalls?.map(answerCall) };
    },
    stream: (request) => {
      onSend();
      return reIdentifiedStream(model.stream(deIdentifyRequest(request, pseudonyms)), pseudonyms, transcript, request.signal, callAnswer(request, pseudonyms, options.toolCalls));
    },
  };
}

/** A request as a model not cleared for patient data may receive it. */
export function deIdentifyRequest(request: ChatModelRequest, pseudonyms: Pseudonymizer): ChatModelRequest {
  const toolChoice = request.toolChoice;
  const names = sentToolNames(request, pseudonyms);
  return {
    ...request,
    messages: deIdentifyMessages(request.messages, pseudonyms),
    tools: request.tools?.map((tool, index) => ({
      ...tool,
      name: names[index],
      description: tool.description && pseudonyms.deIdentify(tool.description),
      parameters: pseudonyms.deIdentifyStrings(tool.parameters),
    })),
    toolChoice: typeof toolChoice === 'object' ? { name: names[request.tools?.findIndex((tool) => tool.name === toolChoice.name) ?? -1] ?? pseudonyms.deIdentifyName(toolChoice.name) } : toolChoice,
    options: request.options && deIdentifyOptions(request.options, pseudonyms),
  };
}

/**
 * The names the request's tools are sent under, in order: each de-identified as a name, and told apart by a suffix
 * where two would be sent the same (`lookup_123456789` and `lookup_123-45-6789` are both `lookup_ID-2`), so a call is
 * always mapped back to the tool the model was offered.
 */
function sentToolNames(request: ChatModelRequest, pseudonyms: Pseudonymizer): string[] {
  const taken = new Set<string>();
  return (request.tools ?? []).map((tool, index) => {
    let name = pseudonyms.deIdentifyName(tool.name);
    if (taken.has(name)) {
      name = `${name.slice(0, 56)}_${index + 1}`;
    }
    taken.add(name);
    return name;
  });
}

/** The request's options: every string and key de-identified, the response format's name as a name. */
function deIdentifyOptions(options: ChatGenerationOptions, pseudonyms: Pseudonymizer): ChatGenerationOptions {
  const sent = pseudonyms.deIdentifyStrings(options);
  const format = options.responseFormat;
  return format?.type === 'json_schema' && sent.responseFormat?.type === 'json_schema' ? { ...sent, responseFormat: { ...sent.responseFormat, name: pseudonyms.deIdentifyName(format.name) } } : sent;
}

/**
 * Messages as a model not cleared for patient data receives them. A participant `name` that holds one of the
 * patient's identifiers is left out: OpenAI takes only letters, digits, `_` and `-` there, so no pseudonym fits.
 */
export function deIdentifyMessages(messages: readonly ChatMessage[], pseudonyms: Pseudonymizer): ChatMessage[] {
  return messages.map((message): ChatMessage => {
    if (message.role === 'tool') {
      return { ...message, content: pseudonyms.deIdentifyToolResult(message.content), toolCallId: pseudonyms.deIdentifyName(message.toolCallId) };
    }
    const { name, ...rest } = message;
    const named = name === undefined || pseudonyms.deIdentify(name) !== name ? {} : { name };
    if (rest.role === 'assistant') {
      const toolCalls = rest.toolCalls?.map((call) => ({ id: pseudonyms.deIdentifyName(call.id), name: pseudonyms.deIdentifyName(call.name), arguments: pseudonyms.deIdentify(call.arguments) }));
      return { ...rest, ...named, content: pseudonyms.deIdentify(rest.content), ...(toolCalls ? { toolCalls } : {}) };
    }
    const parts = rest.parts?.map((part) => pseudonyms.deIdentify(part));
    return { ...rest, ...named, content: pseudonyms.deIdentify(rest.content), ...(parts ? { parts } : {}) };
  });
}

/**
 * How a call the model made is answered to the caller of the model: its function's name as the request gave it
 * (a name that held the patient's identifiers was sent de-identified), its arguments re-identified only for a tool
 * of fhirgate's own or where the project allows it for the client's (see the file's comment).
 */
function callAnswer(request: ChatModelRequest, pseudonyms: Pseudonymizer, rule: ToolCallRule): (call: ChatToolCall) => ChatToolCall {
  const sent = sentToolNames(request, pseudonyms);
  const names = new Map((request.tools ?? []).map((tool, index) => [sent[index], tool.name]));
  return (call) => {
    const name = names.get(call.name);
    if (name === undefined) {
      // Not a tool the request offered: the caller gets it as the model wrote it.
      return call;
    }
    const reIdentified = !rule.clientTools || rule.reIdentifyClientArguments;
    return { ...call, name, arguments: reIdentified ? pseudonyms.reIdentify(call.arguments, true) : call.arguments };
  };
}

/**
 * The stream re-identified: text as it comes (a pseudonym or date split across chunks held until it is whole), and
 * the calls whole, after the text, each as one event (their arguments must be whole to be re-identified).
 */
async function* reIdentifiedStream(
  events: AsyncIterable<ChatStreamEvent>,
  pseudonyms: Pseudonymizer,
  transcript: ModelTranscript,
  signal: AbortSignal,
  answerCall: (call: ChatToolCall) => ChatToolCall
): AsyncGenerator<ChatStreamEvent> {
  const text = new StreamReIdentifier(pseudonyms);
  const calls: { index: number; id: string; name: string; arguments: string }[] = [];
  const ended = function* (): Generator<ChatStreamEvent> {
    const rest = text.flush();
    if (rest) {
      yield { type: 'text', text: rest };
    }
    for (const call of calls.filter((made) => made !== undefined)) {
      yield { type: 'tool_call', index: call.index, ...answerCall({ id: call.id, name: call.name, arguments: call.arguments }) };
    }
    calls.length = 0;
  };
  try {
    for await (const event of events) {
      if (event.type === 'text') {
        transcript.add(event.text);
        const ready = text.push(event.text);
        if (ready) {
          yield { type: 'text', text: ready };
        }
      } else if (event.type === 'tool_call') {
        const call = (calls[event.index] ??= { index: event.index, id: '', name: '', arguments: '' });
        call.id ||= event.id ?? '';
        call.name ||= event.name ?? '';
        call.arguments += event.arguments;
      } else {
        yield* ended();
        yield event;
      }
    }
  } catch (error) {
    // The text the model did send reaches the client (and the reply's record) before the failure does.
    const rest = text.flush();
    if (rest && !signal.aborted) {
      yield { type: 'text', text: rest };
    }
    throw error;
  }
}
