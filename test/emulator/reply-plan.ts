// Decides what the emulated model says and what usage it reports, from the request and the behaviour,
// before any wire format is involved, so all three providers answer the same request the same way.
import type { EmulatorBehaviour } from './behaviour.ts';
import type { ChatRequest, NormalizedMessage, PlannedReply } from './provider-format.ts';
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

/** Prompt tokens: the words of every message (system included), as counted by the emulator's tokenizer. */
export function countPromptTokens(messages: readonly NormalizedMessage[]): number {
  let total = 0;
  for (const message of messages) {
    total += countTokens(message.content);
  }
  return total;
}

/** Plans the reply to one request: its tokens, finish reason (after the request's token cap) and usage. */
export function planReply(request: ChatRequest, behaviour: EmulatorBehaviour, sequence: number): PlannedReply {
  let tokens: readonly string[];
  if (behaviour.replyTokens !== undefined) {
    tokens = createNumberedTokens(behaviour.replyTokens);
  } else {
    tokens = splitIntoTokens(behaviour.reply ?? createDefaultReplyText(request.messages));
  }
  let finishReason: PlannedReply['finishReason'] = 'stop';
  if (request.maxTokens !== undefined && tokens.length > request.maxTokens) {
    tokens = tokens.slice(0, request.maxTokens);
    finishReason = 'length';
  }
  return {
    sequence,
    model: request.model,
    tokens,
    text: tokens.join(''),
    finishReason,
    promptTokens: behaviour.usage?.promptTokens ?? countPromptTokens(request.messages),
    completionTokens: behaviour.usage?.completionTokens ?? tokens.length,
    createdAt: Math.floor(Date.now() / 1000),
  };
}
