/**
 * A burst of chat requests on an instance that prepares one turn at a time (`chatLimits.maxPreparingTurns: 1`):
 * every request is answered and recorded, JSON and streamed alike, and a request refused during preparation
 * gives its place back, so the ones after it are not stuck behind it.
 */
import type { Communication } from '@medplum/fhirtypes';
import { chatClients, type ChatClients } from './support/chat-clients.ts';
import { CHAT_MODEL, startChatHost, type ChatHost } from './support/chat-host.ts';

describe('turns prepared one at a time', () => {
  let chatHost: ChatHost;
  let clients: ChatClients;

  beforeAll(async () => {
    chatHost = await startChatHost({ plugin: { chatLimits: { maxPreparingTurns: 1 } } });
    clients = await chatClients(chatHost.host);
  });

  afterAll(async () => {
    await chatHost.close();
  });

  test('a burst is answered in full, each turn on record, after requests refused while being prepared', async () => {
    const { openai, medplum } = clients;
    // Refused during preparation: an unknown model (400) and a conversation that does not exist (404).
    await expect(openai.chat.completions.create({ model: 'openai/no-such-model', messages: [{ role: 'user', content: 'hi' }] })).rejects.toMatchObject({ status: 400 });
    await expect(
      openai.chat.completions.create({ model: CHAT_MODEL, messages: [{ role: 'user', content: 'hi' }], conversation_id: 'no-such-conversation' } as never)
    ).rejects.toMatchObject({ status: 404 });

    const prompts = Array.from({ length: 8 }, (_, index) => `question ${index}`);
    const answers = await Promise.all(
      prompts.map(async (content, index) => {
        if (index % 2 === 0) {
          const completion = await openai.chat.completions.create({ model: CHAT_MODEL, messages: [{ role: 'user', content }] });
          return completion.choices[0].message.content;
        }
        const stream = await openai.chat.completions.create({ model: CHAT_MODEL, messages: [{ role: 'user', content }], stream: true });
        let text = '';
        for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
        return text;
      })
    );

    expect(answers).toEqual(prompts.map((content) => `Echo: ${content}`));
    const stored = await medplum.searchResources('Communication', { _count: '1000' }, { cache: 'no-cache' });
    const texts = (code: string): string[] =>
      stored
        .filter((communication: Communication) => communication.category?.[0]?.coding?.[0]?.code === code)
        .map((communication: Communication) => communication.payload?.[0]?.contentString ?? '')
        .sort();
    expect(texts('ai-prompt')).toEqual([...prompts].sort());
    expect(texts('ai-response')).toEqual(prompts.map((content) => `Echo: ${content}`).sort());
  });

  test("a turn gives its place back once its provider call starts: a long stream does not hold up the next turn's preparation", async () => {
    const { openai } = clients;
    chatHost.emulator.setBehaviour({ replyTokens: 200, tokensPerSecond: 20 });
    const stream = await openai.chat.completions.create({ model: CHAT_MODEL, messages: [{ role: 'user', content: 'A long story.' }], stream: true });
    const chunks = stream[Symbol.asyncIterator]();
    await chunks.next();
    let streaming = true;
    const reading = (async () => {
      for (let chunk = await chunks.next(); !chunk.done; chunk = await chunks.next());
      streaming = false;
    })();

    chatHost.emulator.reset();
    const next = await openai.chat.completions.create({ model: CHAT_MODEL, messages: [{ role: 'user', content: 'A short one.' }] });
    expect(next.choices[0].message.content).toBe('Echo: A short one.');
    // Answered while the ten-second stream still runs.
    expect(streaming).toBe(true);
    stream.controller.abort();
    await reading.catch(() => undefined);
  }, 30_000);
});
