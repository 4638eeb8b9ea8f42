/**
 * A request for a conversation's title or tags sent in the conversation (`conversation_id`) is recorded as a side
 * request of it, not as a turn; the same words opening a new conversation are an ordinary turn. Checked with the
 * openai SDK and MedplumClient reading the prompts' categories.
 */
import type { MedplumClient } from '@medplum/core';
import OpenAI from 'openai';
import { chatClients, type FhirgateCompletion } from './support/chat-clients.ts';
import { CHAT_MODEL as MODEL, startChatHost, type ChatHost } from './support/chat-host.ts';

const LABEL_REQUEST = 'Generate a short title for this conversation.';

describe('a request for the conversation’s title', () => {
  let chatHost: ChatHost;
  let openai: OpenAI;
  let medplum: MedplumClient;

  beforeAll(async () => {
    chatHost = await startChatHost();
    ({ openai, medplum } = await chatClients(chatHost.host));
  });
  afterAll(() => chatHost.close());

  const ask = async (content: string, conversationId?: string): Promise<FhirgateCompletion> =>
    (await openai.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content }], ...(conversationId ? { conversation_id: conversationId } : {}) } as never)) as unknown as FhirgateCompletion;
  /** Each prompt of the conversation: its text and whether it is a side request. */
  const prompts = async (rootId: string): Promise<[string, boolean][]> =>
    (await medplum.searchResources('Communication', { 'part-of': `Communication/${rootId}`, _sort: 'sent' }, { cache: 'no-cache' }))
      .filter((record) => record.category?.some((concept) => concept.coding?.some((coding) => coding.code === 'ai-prompt')))
      .map((record) => [record.payload?.[0]?.contentString ?? '', record.category?.some((concept) => concept.coding?.some((coding) => coding.code === 'ai-side-request')) ?? false]);

  test('in a conversation it is a side request of it; opening a new conversation it is a turn', async () => {
    const first = await ask('Her glucose this week?');
    await ask(LABEL_REQUEST, first.conversation_id);
    expect(await prompts(first.conversation_id)).toEqual([
      ['Her glucose this week?', false],
      [LABEL_REQUEST, true],
    ]);

    const opening = await ask(LABEL_REQUEST);
    expect(await prompts(opening.conversation_id)).toEqual([[LABEL_REQUEST, false]]);
  });
});
