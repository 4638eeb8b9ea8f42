/**
 * `Idempotency-Key` across instances: two hosts serving one store (as instances behind a load balancer share one
 * database), each with its own turns and journal, so neither knows the other's running turn. The key's derived
 * prompt id is what the store itself refuses twice: a request sent to both at once makes one turn, and the other
 * is told it is in progress (409), as the same request sent twice to one instance is.
 */
import type { MedplumClient } from '@medplum/core';
import type { Communication, Resource } from '@medplum/fhirtypes';
import OpenAI, { type APIError } from 'openai';
import { chatClients, type FhirgateCompletion } from './support/chat-clients.ts';
import { CHAT_MODEL as MODEL, startChatHost, type ChatHost } from './support/chat-host.ts';
import { withWriteFaults, type FaultyStore } from './support/faulty-store.ts';

const isPrompt = (resource: Resource): boolean => resource.resourceType === 'Communication' && resource.category?.[0]?.coding?.[0]?.code === 'ai-prompt';

describe('Idempotency-Key on two instances of one store', () => {
  let one: ChatHost;
  let other: ChatHost;
  let slowOnOne: FaultyStore;

  beforeAll(async () => {
    one = await startChatHost({
      host: {
        wrapStore: (store) => {
          slowOnOne = withWriteFaults(store);
          return slowOnOne.repo;
        },
      },
    });
    other = await startChatHost({ host: { sharesStoreWith: one.host } });
  });

  afterAll(async () => {
    await other.close();
    await one.close();
  });

  test('a request sent to both at once: one turn, and the instance whose prompt came second answers 409 with nothing of its own left', async () => {
    const { openai, medplum, project } = await chatClients(one.host);
    const onOther = new OpenAI({
      baseURL: `${other.host.url}v1`,
      apiKey: await other.host.accessTokenFor(project.ids['practitioner-membership']),
      defaultHeaders: { 'X-Project-ID': project.projectId },
      maxRetries: 0,
    });
    const body = { model: MODEL, messages: [{ role: 'user' as const, content: 'Once, on either.' }] };
    const options = { headers: { 'Idempotency-Key': 'both-instances' } };

    // The first instance is slow to write its prompt: the other, asked meanwhile, finds none under the key and
    // writes its own first.
    slowOnOne.delay(isPrompt, 500);
    const onFirst = openai.chat.completions.create(body, options).catch((error: unknown) => error as APIError);
    await new Promise((resolve) => setTimeout(resolve, 100));
    const answered = (await onOther.chat.completions.create(body, options)) as FhirgateCompletion;
    const refused = await onFirst;
    slowOnOne.heal();

    expect(answered.choices[0]?.message.content).toBe('Echo: Once, on either.');
    expect(refused).toMatchObject({ status: 409, error: { code: 'conflict' } });
    expect((refused as APIError).headers?.get('x-should-retry')).toBe('true');
    // Its retry gets the turn's answer, from the records.
    expect(await openai.chat.completions.create(body, options)).toEqual(answered);
    // One conversation: its root, its prompt and its reply; the refused instance's root was taken back.
    const stored = await medplum.searchResources('Communication', { _count: '100' }, { cache: 'no-cache' });
    expect(stored.map((record: Communication) => (record.id === answered.conversation_id ? 'root' : record.category?.[0]?.coding?.[0]?.code)).sort()).toEqual(['ai-prompt', 'ai-response', 'root']);
    expect(one.emulator.received.length + other.emulator.received.length).toBe(1);
  });
});
