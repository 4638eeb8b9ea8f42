/**
 * A conversation's instructions: a turn continued by `conversation_id` without a system message of its own is sent
 * the instructions the conversation opened with; one that opens with its own is sent those alone, never both.
 * Checked with the openai SDK and the emulator's request log.
 */
import OpenAI from 'openai';
import { chatClients, type FhirgateCompletion } from './support/chat-clients.ts';
import { CHAT_MODEL as MODEL, startChatHost, type ChatHost } from './support/chat-host.ts';

describe("a conversation's instructions", () => {
  let chatHost: ChatHost;
  let openai: OpenAI;

  beforeAll(async () => {
    chatHost = await startChatHost();
    ({ openai } = await chatClients(chatHost.host));
  });
  afterAll(() => chatHost.close());

  const ask = async (messages: OpenAI.ChatCompletionMessageParam[], conversationId?: string): Promise<FhirgateCompletion> =>
    (await openai.chat.completions.create({ model: MODEL, messages, ...(conversationId ? { conversation_id: conversationId } : {}) } as never)) as unknown as FhirgateCompletion;
  const systemSent = (): unknown[] => (chatHost.emulator.received.at(-1)?.messages ?? []).filter((message) => message.role === 'system').map((message) => message.content);

  test('carried to a turn that brings none, replaced by those a turn brings', async () => {
    const first = await ask([
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Remember 7.' },
    ]);
    expect(systemSent()).toEqual(['Be brief.']);

    await ask([{ role: 'user', content: 'And 8?' }], first.conversation_id);
    expect(systemSent()).toEqual(['Be brief.']);

    await ask(
      [
        { role: 'system', content: 'Explain in detail.' },
        { role: 'user', content: 'Sum them.' },
      ],
      first.conversation_id
    );
    expect(systemSent()).toEqual(['Explain in detail.']);
  });
});
