/** What every turn of the delivery tests (deliver-json, deliver-stream) shares: its parties, ids and model request. */
import type { ChatMessage } from '../../plugin/llm/chat-model.ts';

/** The turn's fixed fields around `messages`, with an AbortController of its own. */
export function deliveryTurnFields(messages: ChatMessage[]) {
  return {
    parties: { categorySystem: 'urn:c', caller: { reference: 'Practitioner/alice' }, agent: { reference: 'Device/agent' } },
    rootId: 'root-1',
    promptId: 'prompt-1',
    replyId: 'reply-1',
    history: { messages: [] },
    completionId: 'chatcmpl-1',
    created: 1_700_000_000,
    modelRequest: { model: 'gpt-4o', messages, maxTokens: 50 },
    controller: new AbortController(),
  };
}
