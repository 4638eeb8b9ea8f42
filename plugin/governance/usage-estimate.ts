/**
 * Tokens fhirgate counts itself where the provider did not say: what a turn is expected to cost when it is admitted
 * (the budget it reserves, budgets.ts), and what a reply that did not complete cost when the provider's own usage
 * never came (the client left and the call was cancelled, the server stopped, the provider failed after some
 * output, or the process died: chat-turn.ts, reply-records.ts).
 *
 * The estimate is the rule of thumb of OpenAI's and Anthropic's tokenizers for English text: about four characters a
 * token, rounded up, plus each message's framing (its role and separators: 4 tokens). It is an estimate, and the
 * reply that records one says so (`estimated` in its usage extension, communication-builders.ts). It cannot see
 * what a reasoning model thought before it wrote, nor what the provider charges for its own tools: for those the
 * estimate is low.
 */
import type { ChatMessage, ChatTool, ChatUsage } from '../llm/chat-model.ts';

/** Characters a token, about, in English text. */
export const CHARACTERS_PER_TOKEN = 4;
/** Each message's role and separators, in tokens. */
const TOKENS_PER_MESSAGE = 4;

/** Token counts a reply records: the provider's, or fhirgate's estimate (`estimated`). */
export interface RecordedUsage extends ChatUsage {
  /** True when fhirgate estimated the counts because the provider reported none. */
  readonly estimated?: boolean;
}

/** The tokens of `characters` characters of text, rounded up. */
export function estimateTokensOfLength(characters: number): number {
  return Math.ceil(Math.max(0, characters) / CHARACTERS_PER_TOKEN);
}

/** The tokens of what a model is sent: its messages (with their calls and results) and the tools it is offered. */
export function estimatePromptTokens(messages: readonly ChatMessage[], tools: readonly ChatTool[] = []): number {
  let characters = 0;
  for (const message of messages) {
    characters += message.content.length + (message.role !== 'tool' && message.name ? message.name.length : 0);
    if (message.role === 'assistant') {
      for (const call of message.toolCalls ?? []) {
        characters += call.name.length + call.arguments.length;
      }
    }
  }
  for (const tool of tools) {
    characters += tool.name.length + (tool.description?.length ?? 0) + JSON.stringify(tool.parameters).length;
  }
  return estimateTokensOfLength(characters) + TOKENS_PER_MESSAGE * messages.length;
}

/** The usage of a reply that did not complete: the prompt's tokens and those of what was generated, estimated. */
export function estimatedUsage(promptTokens: number, generatedCharacters: number): RecordedUsage {
  return { promptTokens, completionTokens: estimateTokensOfLength(generatedCharacters), estimated: true };
}
