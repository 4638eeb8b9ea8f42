/**
 * A model not cleared for patient data, behind de-identification: everything a call sends crosses
 * `deIdentifyRequest` (every message, whatever its role, and each of its text parts: system and developer messages
 * and the chart summary, the history, the user's prompt, the calls and results of tools; the tools' descriptions
 * and schemas; the request's options: stop sequences, the response format's schema, metadata, ...), and
 * everything the model answers crosses re-identification before anyone else sees it (its text, streamed or whole,
 * and the arguments of the calls it makes). The wrapper sits right around the provider, below the FHIR tools' loop
 * and inside the retries and fallbacks, so no path to the provider goes round it. What the model wrote, before
 * re-identification, is kept for the reply's record.
 */
import type { ChatMessage, ChatModel, ChatModelRequest, ChatStreamEvent, ChatToolCall } from '../llm/chat-model.ts';
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

/** `model` with de-identified requests and re-identified answers; `onSend` is called before each request goes out. */
export function deIdentifiedModel(model: ChatModel, pseudonyms: Pseudonymizer, transcript: ModelTranscript, onSend: () => void = () => undefined): ChatModel {
  return {
    provider: model.provider,
    // Which fields the provider takes does not depend on the text in them.
    ...(model.checkRequest ? { checkRequest: model.checkRequest.bind(model) } : {}),
    complete: async (request) => {
      onSend();
      const completion = await model.complete(deIdentifyRequest(request, pseudonyms));
      transcript.add(completion.text);
      return {
        ...completion,
        text: pseudonyms.reIdentify(completion.text),
        toolCalls: completion.toolCalls?.map((call) => reIdentifyCall(call, pseudonyms)),
      };
    },
    stream: (request) => {
      onSend();
      return reIdentifiedStream(model.stream(deIdentifyRequest(request, pseudonyms)), pseudonyms, transcript, request.signal);
    },
  };
}

/** A request as a model not cleared for patient data may receive it. */
export function deIdentifyRequest(request: ChatModelRequest, pseudonyms: Pseudonymizer): ChatModelRequest {
  return {
    ...request,
    messages: deIdentifyMessages(request.messages, pseudonyms),
    tools: request.tools?.map((tool) => ({ ...tool, description: tool.description && pseudonyms.deIdentify(tool.description), parameters: pseudonyms.deIdentifyStrings(tool.parameters) })),
    options: request.options && pseudonyms.deIdentifyStrings(request.options),
  };
}

/**
 * Messages as a model not cleared for patient data receives them. A participant `name` that holds one of the
 * patient's identifiers is left out: OpenAI takes only letters, digits, `_` and `-` there, so no pseudonym fits.
 */
export function deIdentifyMessages(messages: readonly ChatMessage[], pseudonyms: Pseudonymizer): ChatMessage[] {
  return messages.map((message): ChatMessage => {
    if (message.role === 'tool') {
      return { ...message, content: pseudonyms.deIdentifyToolResult(message.content) };
    }
    const { name, ...rest } = message;
    const named = name === undefined || pseudonyms.deIdentify(name) !== name ? {} : { name };
    if (rest.role === 'assistant') {
      const toolCalls = rest.toolCalls?.map((call) => ({ ...call, arguments: pseudonyms.deIdentify(call.arguments) }));
      return { ...rest, ...named, content: pseudonyms.deIdentify(rest.content), ...(toolCalls ? { toolCalls } : {}) };
    }
    const parts = rest.parts?.map((part) => pseudonyms.deIdentify(part));
    return { ...rest, ...named, content: pseudonyms.deIdentify(rest.content), ...(parts ? { parts } : {}) };
  });
}

function reIdentifyCall(call: ChatToolCall, pseudonyms: Pseudonymizer): ChatToolCall {
  return { ...call, arguments: pseudonyms.reIdentify(call.arguments, true) };
}

/**
 * The stream re-identified: text as it comes (a pseudonym or date split across chunks held until it is whole), and
 * the calls whole, after the text, each as one event (their arguments must be whole to be re-identified).
 */
async function* reIdentifiedStream(
  events: AsyncIterable<ChatStreamEvent>,
  pseudonyms: Pseudonymizer,
  transcript: ModelTranscript,
  signal: AbortSignal
): AsyncGenerator<ChatStreamEvent> {
  const text = new StreamReIdentifier(pseudonyms);
  const calls: { index: number; id: string; name: string; arguments: string }[] = [];
  const ended = function* (): Generator<ChatStreamEvent> {
    const rest = text.flush();
    if (rest) {
      yield { type: 'text', text: rest };
    }
    for (const call of calls.filter((made) => made !== undefined)) {
      yield { type: 'tool_call', index: call.index, id: call.id, name: call.name, arguments: pseudonyms.reIdentify(call.arguments, true) };
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
