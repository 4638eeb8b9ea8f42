/**
 * What one caller sends never lands in another's turn, even within one project and about one patient: the same
 * `Idempotency-Key` from two callers is two turns, and an exchange a colleague sends again, word for word, starts a
 * conversation of the colleague's own rather than continuing the first caller's, even in a project that shares
 * conversations. Checked with the openai SDK and
 * MedplumClient reading the records; the colleague is in the patient's care team, so he may read her conversation.
 */
import type { MedplumClient } from '@medplum/core';
import type { Project } from '@medplum/fhirtypes';
import OpenAI from 'openai';
import type { SeededProject } from '../plugin/hosts/standalone/seed.ts';
import { chatClients, type FhirgateCompletion } from './support/chat-clients.ts';
import { CHAT_MODEL as MODEL, startChatHost, type ChatHost } from './support/chat-host.ts';
import { colleagueOf } from './support/colleague.ts';

describe("one caller's requests and another's", () => {
  let chatHost: ChatHost;
  let project: SeededProject;
  let carter: OpenAI;
  let colin: OpenAI;
  let medplum: MedplumClient;
  let patientId: string;

  beforeAll(async () => {
    chatHost = await startChatHost();
    ({ project, openai: carter, medplum } = await chatClients(chatHost.host));
    patientId = project.ids['patient-in-care-team-1'];
    const colleague = await colleagueOf(chatHost.host, project, patientId);
    colin = clientFor(colleague.token);
  });
  afterAll(() => chatHost.close());
  beforeEach(() => chatHost.emulator.reset());

  const clientFor = (token: string): OpenAI => new OpenAI({ baseURL: `${chatHost.host.url}v1`, apiKey: token, defaultHeaders: { 'X-Project-ID': project.projectId }, maxRetries: 0 });
  const create = async (client: OpenAI, messages: OpenAI.ChatCompletionMessageParam[], headers: Record<string, string> = {}): Promise<FhirgateCompletion> =>
    (await client.chat.completions.create({ model: MODEL, messages, patient_id: patientId, patient_context: 'none' } as never, { headers })) as unknown as FhirgateCompletion;
  const prompts = async (rootId: string): Promise<string[]> =>
    (await medplum.searchResources('Communication', { 'part-of': `Communication/${rootId}`, _sort: 'sent' }, { cache: 'no-cache' })).map(
      (record) => record.payload?.map((item) => item.contentString).join('') ?? ''
    );

  test('the same Idempotency-Key from two callers is two turns, each answered with its own reply', async () => {
    const headers = { 'Idempotency-Key': 'ward-round-1' };
    const first = await create(carter, [{ role: 'user', content: 'Her glucose today?' }], headers);
    const second = await create(colin, [{ role: 'user', content: 'Her blood pressure today?' }], headers);

    expect(second.choices[0].message.content).toBe('Echo: Her blood pressure today?');
    expect(second.conversation_id).not.toBe(first.conversation_id);
    expect(chatHost.emulator.received).toHaveLength(2);
    expect(await prompts(first.conversation_id)).toEqual(['Her glucose today?', 'Echo: Her glucose today?']);
  });

  test("an exchange a colleague sends again word for word starts his own conversation, even where the project shares conversations; the first caller's is untouched", async () => {
    const current = await chatHost.host.store.readResource<Project>('Project', project.projectId);
    await chatHost.host.store.updateResource<Project>({ ...current, setting: [...(current.setting ?? []), { name: 'AI_SHARED_CONVERSATIONS', valueString: 'true' }] });
    // Callers are cached for a few seconds: new tokens read the project again.
    const sharingCarter = clientFor(await chatHost.host.accessTokenFor(project.ids['practitioner-membership']));
    const sharingColin = clientFor((await colleagueOf(chatHost.host, project, patientId)).token);

    const opening: OpenAI.ChatCompletionMessageParam = { role: 'user', content: 'Remember her last HbA1c.' };
    const first = await create(sharingCarter, [opening]);
    const colins = await create(sharingColin, [opening, { role: 'assistant', content: first.choices[0].message.content ?? '' }, { role: 'user', content: 'And the one before?' }]);

    expect(colins.conversation_id).not.toBe(first.conversation_id);
    expect(await prompts(first.conversation_id)).toEqual(['Remember her last HbA1c.', 'Echo: Remember her last HbA1c.']);
  });
});
