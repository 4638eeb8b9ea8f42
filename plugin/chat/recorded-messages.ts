/**
 * Reads the conversation's messages back from its Communications, as communication-builders.ts wrote them: a
 * prompt is the messages its turn added (prompt-messages.ts; one written before those were described is its tool
 * results, payload items marked with the call they answer, and its user text); a reply is the assistant's text and
 * the calls it asked the client for.
 */
import type { Communication, CommunicationPayload, Extension } from '@medplum/fhirtypes';
import type { ChatFinishReason, ChatMessage, ChatToolCall, ChatUsage } from '../llm/chat-model.ts';
import { CATEGORY, EXTENSION } from './fhir-vocabulary.ts';
import { payloadText } from './fhir-text.ts';
import { recordedPromptMessages } from './prompt-messages.ts';

/** The category code of a stored Communication: `ai-conversation`, `ai-prompt` or `ai-response` for fhirgate's. */
export function categoryOf(communication: Communication): string | undefined {
  return communication.category?.[0]?.coding?.[0]?.code;
}

/** The id a `Communication/<id>` reference names (a root, a prompt); undefined for anything else. */
export function communicationIdOf(reference: string | undefined): string | undefined {
  return reference?.startsWith('Communication/') ? reference.slice('Communication/'.length) : undefined;
}

/** The messages a stored prompt or reply stands for, in order; none for a failed reply or another record. */
export function messagesOf(communication: Communication): ChatMessage[] {
  const code = categoryOf(communication);
  if (code === CATEGORY.prompt.code) {
    const described = recordedPromptMessages(communication);
    if (described) {
      return described;
    }
    // A prompt recorded before its messages were described: its tool results, then the user's text.
    // Consecutive items of the same message (a long text is several pieces) make one message.
    const groups: { answers: string | undefined; items: CommunicationPayload[] }[] = [];
    for (const item of communication.payload ?? []) {
      const answers = item.extension?.find((extension) => extension.url === EXTENSION.toolResult)?.valueString;
      const group = groups.at(-1);
      if (group && group.answers === answers) {
        group.items.push(item);
      } else {
        groups.push({ answers, items: [item] });
      }
    }
    return groups.map(({ answers, items }): ChatMessage => {
      const content = payloadText(items);
      return answers ? { role: 'tool', content, toolCallId: answers } : { role: 'user', content };
    });
  }
  if (code === CATEGORY.response.code && communication.status !== 'not-done') {
    const content = replyText(communication);
    const toolCalls = toolCallsOf(communication);
    if (!content && toolCalls.length === 0) {
      return [];
    }
    return [toolCalls.length > 0 ? { role: 'assistant', content, toolCalls } : { role: 'assistant', content }];
  }
  return [];
}

/** A reply's text ('' when it has none). */
export function replyText(reply: Communication): string {
  return payloadText(reply.payload ?? []);
}

/** What a reply's record says of its answer: the model that gave it, why it stopped, the provider's token counts. */
export function replyFacts(reply: Communication): { readonly modelId: string; readonly finishReason?: ChatFinishReason; readonly usage?: ChatUsage } {
  const extensionOf = (url: string): Extension | undefined => reply.extension?.find((extension) => extension.url === url);
  const usage = extensionOf(EXTENSION.usage)?.extension;
  const count = (url: string): number => usage?.find((extension) => extension.url === url)?.valueInteger ?? 0;
  return {
    modelId: extensionOf(EXTENSION.model)?.valueString ?? '',
    finishReason: extensionOf(EXTENSION.finishReason)?.valueCode as ChatFinishReason | undefined,
    usage: usage ? { promptTokens: count('prompt-tokens'), completionTokens: count('completion-tokens') } : undefined,
  };
}

/** The request body a prompt recorded, as the client sent it (JSON text). */
export function recordedRequest(prompt: Communication): string | undefined {
  const pieces = (prompt.extension ?? []).filter((extension) => extension.url === EXTENSION.chatRequest).map((extension) => extension.valueString ?? '');
  return pieces.length > 0 ? pieces.join('') : undefined;
}

/** The calls a reply asked the client to make, in order. */
export function toolCallsOf(reply: Communication): ChatToolCall[] {
  return (reply.extension ?? [])
    .filter((extension) => extension.url === EXTENSION.toolCall)
    .map((extension) => ({ id: partOf(extension, 'id'), name: partOf(extension, 'name'), arguments: partOf(extension, 'arguments') || '{}' }));
}

function partOf(extension: Extension, url: string): string {
  return extension.extension?.find((part) => part.url === url)?.valueString ?? '';
}

/**
 * The messages as a provider accepts them: a tool call must be answered by a tool message before the
 * conversation goes on, and a tool message must answer a call. A call nobody answered (the client asked
 * something else instead, or the history window cut its result off) is left out of its message, and a result
 * whose call is not there (the window cut the call off) is left out; an assistant message left with neither
 * text nor calls goes too.
 */
export function withAnsweredCallsOnly(messages: readonly ChatMessage[]): ChatMessage[] {
  const answered = new Set<string>();
  const called = new Set<string>();
  for (const [index, message] of messages.entries()) {
    if (message.role !== 'assistant' || !message.toolCalls) {
      continue;
    }
    // Results count only in the run of tool messages right after the call.
    for (let next = index + 1; next < messages.length; next++) {
      const following = messages[next];
      if (following.role !== 'tool') {
        break;
      }
      if (message.toolCalls.some((call) => call.id === following.toolCallId)) {
        answered.add(following.toolCallId);
      }
    }
  }
  const kept: ChatMessage[] = [];
  for (const message of messages) {
    if (message.role === 'tool') {
      if (called.has(message.toolCallId)) {
        kept.push(message);
      }
      continue;
    }
    if (message.role !== 'assistant' || !message.toolCalls) {
      kept.push(message);
      continue;
    }
    const toolCalls = message.toolCalls.filter((call) => answered.has(call.id));
    toolCalls.forEach((call) => called.add(call.id));
    const { toolCalls: _asked, ...withoutCalls } = message;
    if (toolCalls.length > 0) {
      kept.push({ ...withoutCalls, toolCalls });
    } else if (message.content) {
      kept.push(withoutCalls);
    }
  }
  return kept;
}
