/**
 * What a chat turn costs the FHIR server, read from the outside: with `reportRepositoryOperations` each
 * non-streaming answer says how many reads, searches and writes its turn asked of the server. A new conversation
 * writes its root, its prompt and its reply; a continued one searches its history once (the page the model is
 * sent, the calls a tool result must answer) besides the read of its root the caller's AccessPolicy decides, and
 * writes its prompt and reply; a Responses turn continued with `previous_response_id` also reads that response,
 * and checks it is the latest from the same search; a turn that shares the chart searches each shared type and
 * writes the disclosure.
 */
import type { Communication } from '@medplum/fhirtypes';
import OpenAI from 'openai';
import type { SeededProject } from '../plugin/hosts/standalone/seed.ts';
import { REPOSITORY_OPERATIONS_HEADER } from '../plugin/telemetry/repository-operations.ts';
import { chatClients, type FhirgateCompletion } from './support/chat-clients.ts';
import { CHAT_MODEL as MODEL, startChatHost, type ChatHost } from './support/chat-host.ts';

interface Operations {
  readonly reads: number;
  readonly searches: number;
  readonly writes: number;
}

describe('repository operations of a chat turn', () => {
  let chatHost: ChatHost;
  let project: SeededProject;
  let openai: OpenAI;

  beforeAll(async () => {
    chatHost = await startChatHost({ plugin: { reportRepositoryOperations: true, history: { maxMessages: 4, maxCharacters: 100_000 } } });
    ({ project, openai } = await chatClients(chatHost.host));
    // The project's first turn also finds the AI agent's Device (once per project and process).
    await ask({});
  });
  afterAll(() => chatHost.close());

  async function ask(extra: Record<string, unknown>): Promise<{ completion: FhirgateCompletion; operations: Operations | undefined }> {
    const { data, response } = await openai.chat.completions
      .create({ model: MODEL, messages: [{ role: 'user', content: 'How is it going?' }], ...extra } as never)
      .withResponse();
    return { completion: data as unknown as FhirgateCompletion, operations: parse(response.headers.get(REPOSITORY_OPERATIONS_HEADER)) };
  }

  function parse(header: string | null): Operations | undefined {
    if (header === null) {
      return undefined;
    }
    const counts = Object.fromEntries(header.split('; ').map((part) => part.split('=')));
    return { reads: Number(counts.reads), searches: Number(counts.searches), writes: Number(counts.writes) };
  }

  test('a new conversation writes its root, its prompt and its reply, and asks nothing else', async () => {
    const { operations } = await ask({});
    expect(operations).toEqual({ reads: 0, searches: 0, writes: 3 });
  });

  test('a continued conversation: its root read, one search for its history, the prompt and the reply written', async () => {
    const first = await ask({});
    const second = await ask({ conversation_id: first.completion.conversation_id });
    expect(second.operations).toEqual({ reads: 1, searches: 1, writes: 2 });
    // Long enough for the history limit (4 messages): still one search.
    let conversationId = first.completion.conversation_id;
    for (let turn = 0; turn < 4; turn++) {
      conversationId = (await ask({ conversation_id: conversationId })).completion.conversation_id;
    }
    expect((await ask({ conversation_id: conversationId })).operations).toEqual({ reads: 1, searches: 1, writes: 2 });
  });

  test('a client that keeps the history: the search that finds the exchange it sends again is the history, and what it is about costs nothing more', async () => {
    const first = await ask({ messages: [{ role: 'user', content: 'The first question.' }] });
    const next = await ask({ messages: [{ role: 'user', content: 'The first question.' }, { role: 'assistant', content: 'Echo: The first question.' }, { role: 'user', content: 'The second question.' }] });
    expect(next.completion.conversation_id).toBe(first.completion.conversation_id);
    expect(next.operations).toEqual({ reads: 1, searches: 1, writes: 2 });
  });

  test('a turn about a patient reads the patient the caller names; sharing the chart adds a search per type and the disclosure', async () => {
    const patientId = project.ids['patient-in-care-team-1'];
    const unshared = await ask({ patient_id: patientId, patient_context: 'none' });
    expect(unshared.operations).toEqual({ reads: 1, searches: 0, writes: 3 });
    const continued = await ask({ patient_id: patientId, patient_context: 'none', conversation_id: unshared.completion.conversation_id });
    expect(continued.operations).toEqual({ reads: 2, searches: 1, writes: 2 });
    // Continued without naming her, nothing of her chart shared: her record is not read at all.
    const unnamed = await ask({ patient_context: 'none', conversation_id: unshared.completion.conversation_id });
    expect(unnamed.operations).toEqual({ reads: 1, searches: 1, writes: 2 });

    const shared = await ask({ patient_id: patientId, patient_context: 'summary' });
    // Condition, MedicationRequest, MedicationStatement, AllergyIntolerance, Observation; the AuditEvent besides the root, prompt and reply.
    expect(shared.operations).toEqual({ reads: 1, searches: 5, writes: 4 });
  });

  test('a page of history filled by records fhirgate did not write is followed by the next, until the limit is reached', async () => {
    const first = await ask({ messages: [{ role: 'user', content: 'The first question.' }] });
    // Written with the project's system rights, so not the AI agent's: on record, never sent to the model. Newer
    // than every genuine record, they fill the newest page.
    const system = await chatHost.host.standalone.host.getSystemRepo(project.projectId);
    const reply = await system.readResource<Communication>('Communication', first.completion.communication_id);
    for (let index = 0; index < 12; index++) {
      await system.createResource<Communication>({ ...reply, id: undefined, meta: undefined, sent: new Date(Date.now() + 60_000 + index).toISOString() });
    }
    const next = await ask({ conversation_id: first.completion.conversation_id, messages: [{ role: 'user', content: 'The second question.' }] });
    expect(next.operations).toEqual({ reads: 1, searches: 2, writes: 2 });
    const sent = chatHost.emulator.received.at(-1)?.messages.map((message) => message.content);
    expect(sent).toEqual(['The first question.', 'Echo: The first question.', 'The second question.']);
  });

  async function respond(fields: Record<string, unknown>): Promise<{ id: string; operations: Operations | undefined }> {
    const { data, response } = await openai.responses.create({ model: MODEL, input: 'How is it going?', ...fields } as never).withResponse();
    return { id: (data as OpenAI.Responses.Response).id, operations: parse(response.headers.get(REPOSITORY_OPERATIONS_HEADER)) };
  }

  test('a Responses turn continued with previous_response_id: that response and the root read, the same one search, the prompt and the reply written', async () => {
    const first = await respond({});
    expect(first.operations).toEqual({ reads: 0, searches: 0, writes: 3 });
    // Whether the previous response is still the conversation's latest is read from the history's page.
    const second = await respond({ previous_response_id: first.id });
    expect(second.operations).toEqual({ reads: 2, searches: 1, writes: 2 });
    const third = await respond({ previous_response_id: second.id });
    expect(third.operations).toEqual({ reads: 2, searches: 1, writes: 2 });
  });

  test('a page of failed replies is followed by the next until the latest reply that did not fail, which previous_response_id must name', async () => {
    const first = await respond({ input: 'One.' });
    const second = await respond({ input: 'Two.', previous_response_id: first.id });
    // Five failed turns: ten records newer than the latest reply, a whole page (history limit 4, page 10).
    for (let turn = 0; turn < 5; turn++) {
      const failing = `Fails. [emulator-behaviour ${JSON.stringify({ errorStatus: 400 })}]`;
      await expect(respond({ input: failing, previous_response_id: second.id })).rejects.toBeInstanceOf(OpenAI.InternalServerError);
    }
    const stale = await respond({ input: 'Fork?', previous_response_id: first.id }).catch((error: unknown) => error);
    expect(stale).toMatchObject({ status: 400, param: 'previous_response_id' });
    const next = await respond({ input: 'Three.', previous_response_id: second.id });
    expect(next.operations).toEqual({ reads: 2, searches: 2, writes: 2 });
  });

  test('a streamed answer does not carry the count (its headers leave before the reply is written)', async () => {
    const { data: stream, response } = await openai.chat.completions.create({ model: MODEL, stream: true, messages: [{ role: 'user', content: 'Stream it.' }] }).withResponse();
    for await (const _chunk of stream) {
      // Read to the end.
    }
    expect(response.headers.get(REPOSITORY_OPERATIONS_HEADER)).toBeNull();
  });
});
