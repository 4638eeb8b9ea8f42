/**
 * Clients that keep the history themselves (the `openai` SDK's message list, an agent's tool loop) send the whole
 * exchange again with each request instead of a `conversation_id`. fhirgate recognises the caller's own latest
 * exchange and records the request as the next turn of that conversation: one conversation on record, the model
 * given each message once. Checked with the openai SDK, the emulator's request log and MedplumClient reading the
 * records.
 */
import type { MedplumClient } from '@medplum/core';
import type { Communication, ProjectMembership } from '@medplum/fhirtypes';
import OpenAI from 'openai';
import type { SeededProject } from '../plugin/hosts/standalone/seed.ts';
import { chatClients, type FhirgateCompletion } from './support/chat-clients.ts';
import { CHAT_MODEL as MODEL, startChatHost, type ChatHost } from './support/chat-host.ts';
import { projectAdministrator } from './support/project-administrator.ts';

type Message = OpenAI.ChatCompletionMessageParam;

describe('a history the client keeps', () => {
  let chatHost: ChatHost;
  let project: SeededProject;
  let openai: OpenAI;
  let medplum: MedplumClient;

  beforeAll(async () => {
    chatHost = await startChatHost();
  });
  afterAll(() => chatHost.close());

  beforeEach(async () => {
    chatHost.emulator.reset();
    ({ project, openai, medplum } = await chatClients(chatHost.host));
  });

  const send = async (messages: Message[], fields: Record<string, unknown> = {}, client = openai): Promise<FhirgateCompletion> =>
    (await client.chat.completions.create({ model: MODEL, messages, ...fields } as never)) as unknown as FhirgateCompletion;
  /** Sends `messages`, then adds the reply to them, as a client keeping its history does. */
  const turn = async (messages: Message[], content: string, fields: Record<string, unknown> = {}, client = openai): Promise<FhirgateCompletion> => {
    messages.push({ role: 'user', content });
    const completion = await send(messages, fields, client);
    messages.push(completion.choices[0].message as Message);
    return completion;
  };
  const conversation = (rootId: string): Promise<Communication[]> =>
    medplum.searchResources('Communication', { 'part-of': `Communication/${rootId}`, _sort: 'sent' }, { cache: 'no-cache' });
  const texts = (records: Communication[]): string[] => records.map((record) => `${record.category?.[0]?.coding?.[0]?.code}: ${record.payload?.map((item) => item.contentString).join('') ?? ''}`);
  const sentToModel = (): unknown => chatHost.emulator.received.at(-1)?.messages;

  test('three turns that each send the whole history are one conversation, and the model gets each message once', async () => {
    const messages: Message[] = [{ role: 'system', content: 'Be brief.' }];
    const first = await turn(messages, 'Remember 7.');
    const second = await turn(messages, 'And 8?');
    const third = await turn(messages, 'Sum them.');

    expect([second.conversation_id, third.conversation_id]).toEqual([first.conversation_id, first.conversation_id]);
    expect(sentToModel()).toEqual([
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Remember 7.' },
      { role: 'assistant', content: 'Echo: Remember 7.' },
      { role: 'user', content: 'And 8?' },
      { role: 'assistant', content: 'Echo: And 8?' },
      { role: 'user', content: 'Sum them.' },
    ]);
    // Each prompt records what its request added; the replies answer them in order.
    const records = await conversation(first.conversation_id);
    expect(texts(records)).toEqual([
      'ai-prompt: Remember 7.',
      'ai-response: Echo: Remember 7.',
      'ai-prompt: And 8?',
      'ai-response: Echo: And 8?',
      'ai-prompt: Sum them.',
      'ai-response: Echo: Sum them.',
    ]);
    expect(records[5].inResponseTo?.[0]?.reference).toBe(`Communication/${records[4].id}`);
  });

  test('a streamed turn is recognised like a JSON one, and the instructions may change between requests', async () => {
    const messages: Message[] = [{ role: 'system', content: 'It is Monday.' }];
    const first = await turn(messages, 'Remember 7.');
    messages[0] = { role: 'system', content: 'It is Tuesday.' };
    messages.push({ role: 'user', content: 'And 8?' });
    const stream = await openai.chat.completions.create({ model: MODEL, messages, stream: true });
    let text = '';
    let conversationId: string | undefined;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta?.content ?? '';
      conversationId ??= (chunk as unknown as { conversation_id?: string }).conversation_id;
    }
    messages.push({ role: 'assistant', content: text });
    const third = await turn(messages, 'Sum them.');

    expect(conversationId).toBe(first.conversation_id);
    expect(third.conversation_id).toBe(first.conversation_id);
    expect(texts(await conversation(first.conversation_id))).toHaveLength(6);
  });

  test('a history whose earlier reply was changed by the client starts a conversation of its own', async () => {
    const messages: Message[] = [];
    const first = await turn(messages, 'Remember 7.');
    messages[1] = { role: 'assistant', content: 'Echo: Remember 9.' };
    const second = await turn(messages, 'And 8?');

    expect(second.conversation_id).not.toBe(first.conversation_id);
    expect(texts(await conversation(first.conversation_id))).toEqual(['ai-prompt: Remember 7.', 'ai-response: Echo: Remember 7.']);
    // The new conversation's prompt is the whole request (its user messages: the text), not only its last question.
    expect(texts(await conversation(second.conversation_id))).toEqual(['ai-prompt: Remember 7.And 8?', 'ai-response: Echo: And 8?']);
    // The model still gets the history as the client sent it.
    expect(sentToModel()).toEqual([
      { role: 'user', content: 'Remember 7.' },
      { role: 'assistant', content: 'Echo: Remember 9.' },
      { role: 'user', content: 'And 8?' },
    ]);
  });

  test("another user who sends the same exchange starts a conversation of their own; the first user's is untouched", async () => {
    const admin = await projectAdministrator(chatHost.host, project);
    const bobMembership: ProjectMembership = await admin.post(`admin/projects/${project.projectId}/invite`, {
      resourceType: 'Practitioner',
      firstName: 'Bob',
      lastName: 'Stone',
      membership: { accessPolicy: { reference: `AccessPolicy/${project.ids['policy-own-conversations']}` } },
    });
    const bob = new OpenAI({ baseURL: `${chatHost.host.url}v1`, apiKey: await chatHost.host.accessTokenFor(bobMembership.id as string), defaultHeaders: { 'X-Project-ID': project.projectId }, maxRetries: 0 });
    const messages: Message[] = [];
    const first = await turn(messages, 'Remember 7.');
    const bobs = await send([...messages, { role: 'user', content: 'And 8?' }], {}, bob);

    expect(bobs.conversation_id).not.toBe(first.conversation_id);
    expect(texts(await conversation(first.conversation_id))).toEqual(['ai-prompt: Remember 7.', 'ai-response: Echo: Remember 7.']);
  });

  test('a request about another patient than the recognised conversation starts a conversation of its own', async () => {
    const messages: Message[] = [];
    const first = await turn(messages, 'Remember 7.', { patient_id: project.ids['patient-in-care-team-1'], patient_context: 'none' });
    const samePatient = await send([...messages, { role: 'user', content: 'And 8?' }], { patient_id: project.ids['patient-in-care-team-1'], patient_context: 'none' });
    const noPatient = await send([...messages, { role: 'user', content: 'And 9?' }]);

    expect(samePatient.conversation_id).toBe(first.conversation_id);
    expect(noPatient.conversation_id).not.toBe(first.conversation_id);
  });

  test('a named conversation whose request also sends its latest exchange again gets that exchange once', async () => {
    const opening = await send([{ role: 'user', content: 'Remember 7.' }]);
    // A tool loop that names the conversation and keeps the call's history: its first step, then the whole call.
    const stepHistory: Message[] = [];
    await turn(stepHistory, 'And 8?', { conversation_id: opening.conversation_id });
    stepHistory.push({ role: 'user', content: 'Sum them.' });
    const last = await send(stepHistory, { conversation_id: opening.conversation_id });

    expect(last.conversation_id).toBe(opening.conversation_id);
    expect(sentToModel()).toEqual([
      { role: 'user', content: 'Remember 7.' },
      { role: 'assistant', content: 'Echo: Remember 7.' },
      { role: 'user', content: 'And 8?' },
      { role: 'assistant', content: 'Echo: And 8?' },
      { role: 'user', content: 'Sum them.' },
    ]);
    expect(texts(await conversation(opening.conversation_id))).toHaveLength(6);
  });

  test("a named conversation whose request brings an exchange that is not the conversation's latest gets all of it, after the conversation's history", async () => {
    const opening = await send([{ role: 'user', content: 'Remember 7.' }]);
    // An example exchange the client puts before its question: not the conversation's latest, so the turn's own.
    const withExample: Message[] = [
      { role: 'user', content: 'Example: 2 and 2?' },
      { role: 'assistant', content: 'Example: 4.' },
      { role: 'user', content: 'Add 8 to it.' },
    ];
    const next = await send(withExample, { conversation_id: opening.conversation_id });

    expect(next.conversation_id).toBe(opening.conversation_id);
    expect(sentToModel()).toEqual([{ role: 'user', content: 'Remember 7.' }, { role: 'assistant', content: 'Echo: Remember 7.' }, ...withExample]);
    expect(texts(await conversation(opening.conversation_id))).toEqual(['ai-prompt: Remember 7.', 'ai-response: Echo: Remember 7.', 'ai-prompt: Example: 2 and 2?Add 8 to it.', 'ai-response: Echo: Add 8 to it.']);
  });

  test("each completed reply carries the exchange's digests as identifiers (the whole exchange, and its last question and answer); they name no text", async () => {
    const messages: Message[] = [];
    const first = await turn(messages, 'Remember 7.');
    const reply = await medplum.readResource('Communication', first.communication_id, { cache: 'no-cache' });

    expect(reply.identifier).toEqual([
      { system: 'urn:fhirgate:thread-digest', value: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/) },
      { system: 'urn:fhirgate:exchange-digest', value: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/) },
    ]);
  });
});
