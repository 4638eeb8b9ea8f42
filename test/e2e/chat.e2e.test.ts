/**
 * End to end, from the outside, on any server with fhirgate mounted (e2e-target.ts): practitioners sign in with
 * email and password, chat with the openai SDK, and the project administrator reads what was stored with
 * MedplumClient, as docs/api.md describes it. Nothing here assumes which model answers: the checks compare what
 * the client got with what was stored.
 */
import type { AuditEvent, Communication } from '@medplum/fhirtypes';
import OpenAI from 'openai';
import { payloadText } from '../../plugin/chat/fhir-text.ts';
import { EXTENSION } from '../../plugin/chat/fhir-vocabulary.ts';
import { createE2eFixture, type E2eFixture } from './e2e-fixture.ts';
import { connectE2eTarget, reportsRepositoryOperations, type E2eTarget } from './e2e-target.ts';
import type { FhirgateCompletion } from '../support/chat-clients.ts';

const CATEGORY = 'urn:fhirgate:communication-category';

function categoryOf(record: Communication): string | undefined {
  return record.category?.[0]?.coding?.find((coding) => coding.system === CATEGORY)?.code;
}

describe('fhirgate end to end: chat', () => {
  let target: E2eTarget;
  let fixture: E2eFixture;
  let model: string;

  beforeAll(async () => {
    target = await connectE2eTarget();
    fixture = await createE2eFixture(target);
    const models = await fixture.clinician.openai.models.list();
    model = process.env.E2E_MODEL ?? models.data[0]?.id ?? '';
  }, 180_000);

  afterAll(async () => {
    await target?.close();
  });

  const read = (id: string): Promise<Communication> => target.admin.readResource('Communication', id, { cache: 'no-cache' });

  test('a signed-in practitioner gets the model list', async () => {
    const models = await fixture.clinician.openai.models.list();
    expect(models.data.length).toBeGreaterThan(0);
    expect(models.data.every((entry) => entry.object === 'model' && entry.id.includes('/'))).toBe(true);
  });

  test('a turn in JSON is stored: the prompt as sent, the reply as returned, threaded under the conversation', async () => {
    const question = `Say hello to run ${fixture.run}.`;
    const completion = (await fixture.clinician.openai.chat.completions.create({ model, messages: [{ role: 'user', content: question }] })) as FhirgateCompletion;
    const answer = completion.choices[0].message.content ?? '';
    expect(answer.length).toBeGreaterThan(0);

    const reply = await read(completion.communication_id);
    const prompt = await target.admin.readReference<Communication>(reply.inResponseTo?.[0] as { reference: string }, { cache: 'no-cache' });
    const root = await read(completion.conversation_id);
    expect(categoryOf(root)).toBe('ai-conversation');
    expect(categoryOf(prompt)).toBe('ai-prompt');
    expect(categoryOf(reply)).toBe('ai-response');
    expect(payloadText(prompt.payload ?? [])).toBe(question);
    expect(payloadText(reply.payload ?? [])).toBe(answer);
    expect(reply.status).toBe('completed');
    expect(prompt.sender?.reference).toBe(fixture.clinician.profileReference);
    expect(reply.recipient?.[0]?.reference).toBe(fixture.clinician.profileReference);
    expect(reply.sender?.reference).toBe(`Device/${target.provisioned.agentDevice.id}`);
    for (const record of [prompt, reply]) {
      expect(record.partOf?.[0]?.reference).toBe(`Communication/${completion.conversation_id}`);
    }
    expect(prompt.meta?.author?.reference).toBe(fixture.clinician.profileReference);
  });

  test('a streamed turn: what the SDK read is the reply stored', async () => {
    const stream = await fixture.clinician.openai.chat.completions.create({ model, stream: true, messages: [{ role: 'user', content: `Stream for run ${fixture.run}.` }] });
    let text = '';
    let finishReason: string | null = null;
    let replyId: string | undefined;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta?.content ?? '';
      finishReason = chunk.choices[0]?.finish_reason ?? finishReason;
      replyId = (chunk as unknown as { communication_id?: string }).communication_id ?? replyId;
    }
    expect(text.length).toBeGreaterThan(0);
    expect(finishReason).toBe('stop');
    const reply = await read(replyId ?? '');
    expect(payloadText(reply.payload ?? [])).toBe(text);
    expect(reply.status).toBe('completed');
  });

  test('a conversation goes on from its stored history', async () => {
    const first = (await fixture.clinician.openai.chat.completions.create({ model, messages: [{ role: 'user', content: 'Remember the number 7.' }] })) as unknown as FhirgateCompletion;
    const second = (await fixture.clinician.openai.chat.completions.create({
      model,
      messages: [{ role: 'user', content: 'Which number did I give you?' }],
      // @ts-expect-error fhirgate's extra request field
      conversation_id: first.conversation_id,
    })) as unknown as FhirgateCompletion;
    expect(second.conversation_id).toBe(first.conversation_id);
    const reply = await read(second.communication_id);
    const history = reply.extension?.find((extension) => extension.url === EXTENSION.history);
    const count = history?.extension?.find((extension) => extension.url === 'count')?.valueInteger;
    expect(count).toBeGreaterThanOrEqual(2);
    const turns = await target.admin.searchResources('Communication', { 'part-of': `Communication/${first.conversation_id}`, _count: '10' }, { cache: 'no-cache' });
    expect(turns.map(categoryOf).sort()).toEqual(['ai-prompt', 'ai-prompt', 'ai-response', 'ai-response']);
  });

  test('a history the client keeps (the whole exchange sent again, no conversation named) is one conversation', async () => {
    const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: 'user', content: 'Remember the number 9.' }];
    const first = (await fixture.clinician.openai.chat.completions.create({ model, messages })) as unknown as FhirgateCompletion;
    messages.push(first.choices[0].message as OpenAI.ChatCompletionMessageParam, { role: 'user', content: 'Which number did I give you?' });
    const second = (await fixture.clinician.openai.chat.completions.create({ model, messages })) as unknown as FhirgateCompletion;

    expect(second.conversation_id).toBe(first.conversation_id);
    const turns = await target.admin.searchResources('Communication', { 'part-of': `Communication/${first.conversation_id}`, _sort: 'sent', _count: '10' }, { cache: 'no-cache' });
    expect(turns.map(categoryOf)).toEqual(['ai-prompt', 'ai-response', 'ai-prompt', 'ai-response']);
    // The second prompt records what the request added, not the history it sent again.
    expect(payloadText(turns[2].payload ?? [])).toBe('Which number did I give you?');
  });

  test('a turn about a care-team patient: the model got the chart the practitioner may read, on record in the reply and an AuditEvent', async () => {
    const completion = (await fixture.clinician.openai.chat.completions.create({
      model,
      messages: [{ role: 'user', content: 'What should I watch at the next visit?' }],
      // @ts-expect-error fhirgate's extra request field
      patient_id: fixture.patient.id,
    })) as unknown as FhirgateCompletion;
    const reply = await read(completion.communication_id);
    expect(reply.subject?.reference).toBe(`Patient/${fixture.patient.id}`);
    const shared = (reply.about ?? []).map((reference) => reference.reference);
    expect(shared).toEqual(expect.arrayContaining([`Patient/${fixture.patient.id}`, `Condition/${fixture.condition.id}`, `Observation/${fixture.observation.id}`]));
    const summary = reply.extension?.find((extension) => extension.url === EXTENSION.patientContext)?.valueString ?? '';
    expect(summary).toContain(fixture.condition.code?.text ?? 'missing');

    const audits = await target.admin.searchResources('AuditEvent', { entity: `Communication/${completion.communication_id}` }, { cache: 'no-cache' });
    expect(audits).toHaveLength(1);
    const audit = audits[0] as AuditEvent;
    expect(audit.entity?.some((entity) => entity.what?.reference === `Patient/${fixture.patient.id}`)).toBe(true);
    expect(audit.agent?.find((agent) => agent.requestor)?.who?.reference).toBe(fixture.clinician.profileReference);
  });

  test("the AccessPolicy decides: another patient is 403, an unknown one 404, a colleague's conversation 404; nothing is stored", async () => {
    const refusal = async (call: Promise<unknown>): Promise<{ status: number; code: unknown }> => {
      try {
        await call;
        return { status: 200, code: undefined };
      } catch (error) {
        if (!(error instanceof OpenAI.APIError)) {
          throw error;
        }
        return { status: error.status ?? 0, code: error.code };
      }
    };
    const ask = (practitioner: 'clinician' | 'colleague', extra: Record<string, unknown>): Promise<unknown> =>
      fixture[practitioner].openai.chat.completions.create({ model, messages: [{ role: 'user', content: 'Tell me about this.' }], ...extra });

    expect(await refusal(ask('clinician', { patient_id: fixture.otherPatient.id }))).toEqual({ status: 403, code: 'forbidden' });
    expect(await refusal(ask('clinician', { patient_id: `unknown-${fixture.run}` }))).toEqual({ status: 404, code: 'not_found' });
    const own = (await ask('clinician', {})) as FhirgateCompletion;
    expect(await refusal(ask('colleague', { conversation_id: own.conversation_id }))).toEqual({ status: 404, code: 'conversation_not_found' });

    const aboutOther = await target.admin.searchResources('Communication', { subject: `Patient/${fixture.otherPatient.id}` }, { cache: 'no-cache' });
    expect(aboutOther.length).toBe(0);
    const inOwn = await target.admin.searchResources('Communication', { 'part-of': `Communication/${own.conversation_id}` }, { cache: 'no-cache' });
    expect(inOwn).toHaveLength(2);
  });

  // What each kind of turn asks of the server (each operation costs quota points inside a Medplum server), printed
  // for the run and held to what the audit trail needs.
  (reportsRepositoryOperations ? test : test.skip)('what a turn asks of the server: a new conversation three writes, a continued one a search and two writes beside its checks', async () => {
    const turn = async (extra: Record<string, unknown>): Promise<{ completion: FhirgateCompletion; operations: Record<string, number> }> => {
      const { data, response } = await fixture.clinician.openai.chat.completions
        .create({ model, messages: [{ role: 'user', content: `Count for run ${fixture.run}.` }], ...extra } as never)
        .withResponse();
      const header = response.headers.get('x-fhirgate-repository-operations') ?? '';
      return { completion: data as unknown as FhirgateCompletion, operations: Object.fromEntries(header.split('; ').map((part) => [part.split('=')[0], Number(part.split('=')[1])])) };
    };
    // The first turn of a process in a project also finds the AI agent's Device (once).
    await turn({});
    const fresh = await turn({});
    const continued = await turn({ conversation_id: fresh.completion.conversation_id });
    const aboutPatient = await turn({ patient_id: fixture.patient.id, patient_context: 'none' });
    const continuedAboutPatient = await turn({ patient_id: fixture.patient.id, patient_context: 'none', conversation_id: aboutPatient.completion.conversation_id });
    const sharingChart = await turn({ patient_id: fixture.patient.id, patient_context: 'summary' });
    const rows = { 'new conversation': fresh, 'continued turn': continued, 'new, about a patient': aboutPatient, 'continued, about a patient': continuedAboutPatient, 'new, sharing the chart': sharingChart };
    console.info(['repository operations per turn (reads / searches / writes):', ...Object.entries(rows).map(([name, row]) => `  ${name}: ${row.operations.reads} / ${row.operations.searches} / ${row.operations.writes}`)].join('\n'));

    expect(fresh.operations).toEqual({ reads: 0, searches: 0, writes: 3 });
    // The conversation's root is read under the caller's policy; the history is one search.
    expect(continued.operations).toEqual({ reads: 1, searches: 1, writes: 2 });
    // The patient the request names is read under the caller's policy too.
    expect(continuedAboutPatient.operations).toEqual({ reads: 2, searches: 1, writes: 2 });
    // Sharing the chart: a search per shared type, and the disclosure's AuditEvent.
    expect(sharingChart.operations.writes).toBe(4);
  });
});
