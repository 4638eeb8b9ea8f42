/**
 * A turn is about every patient of what it takes in, not only the one its `patient_id` names: a Responses
 * `item_reference` to a reply about Maria Lopez, or a conversation one of whose turns was about her, makes the turn
 * about her, with the governance of one (egress refused or de-identified on a model not cleared, the reply's
 * `subject` and `about`, the disclosure's AuditEvent); a turn that would take in two patients is refused naming the
 * field. Real openai SDK against the standalone host, one emulator per model; the records read back with the
 * project's system repository.
 */
import type { AuditEvent, Communication } from '@medplum/fhirtypes';
import OpenAI from 'openai';
import type { FhirgateCompletion } from './support/chat-clients.ts';
import { CLEARED_MODEL, identifyingIn, MARIA, OTHER_MODEL, patientDataProject, startTwoModelHost, type PatientDataProject, type TwoModelHost } from './support/two-model-host.ts';

/** A question that names the patient and her identifiers: the reply (an echo) holds them too. */
const QUESTION = `How is ${MARIA.given} ${MARIA.family} (born ${MARIA.birthDate}, ${MARIA.mrn}, ${MARIA.phone}, ${MARIA.line}) doing?`;

describe('the patient of a turn is the union of what it takes in', () => {
  let models: TwoModelHost;
  let subject: PatientDataProject;
  let openai: OpenAI;

  beforeAll(async () => {
    models = await startTwoModelHost();
  });
  afterAll(() => models.close());
  beforeEach(async () => {
    models.cleared.reset();
    models.other.reset();
    subject = await patientDataProject(models.host);
    openai = await subject.openai();
  });

  const ask = (body: Record<string, unknown>): Promise<FhirgateCompletion> => openai.chat.completions.create(body as never) as unknown as Promise<FhirgateCompletion>;
  const respond = (body: Record<string, unknown>): Promise<OpenAI.Responses.Response> => openai.responses.create(body as never) as Promise<OpenAI.Responses.Response>;
  const failure = <T>(promise: Promise<T>): Promise<unknown> => promise.then(
    () => undefined,
    (error: unknown) => error
  );
  const stored = async (): Promise<number> => (await subject.system.searchResources<Communication>({ resourceType: 'Communication', count: 1000 })).length;
  const reply = (id: string): Promise<Communication> => subject.system.readResource<Communication>('Communication', id);
  const replyIdOf = (response: { id: string }): string => response.id.replace(/^resp_/, '');
  const aboutMaria = async (): Promise<FhirgateCompletion> => ask({ model: CLEARED_MODEL, patient_id: subject.patientId, patient_context: 'none', messages: [{ role: 'user', content: QUESTION }] });
  const maria = (): string => `Patient/${subject.patientId}`;

  test('an item_reference to a reply about a patient, in a turn that names no patient, is refused on a model not cleared (refuse): nothing stored, nothing sent', async () => {
    const earlier = await aboutMaria();
    const before = await stored();

    const refused = await failure(respond({ model: OTHER_MODEL, input: [{ type: 'item_reference', id: `msg_${earlier.communication_id}` }, { role: 'user', content: 'Rewrite that for a referral letter.' }] }));

    expect(refused).toMatchObject({ status: 403, error: { code: 'patient_data_not_allowed', param: 'model' } });
    expect(models.other.received).toHaveLength(0);
    expect(await stored()).toBe(before);
  });

  test('the same under de-identify: the identifiers never reach the model; the reply is about the patient, names the record it took in, and its disclosure is audited', async () => {
    await subject.setSettings({ AI_PATIENT_DATA_POLICY: 'de-identify' });
    openai = await subject.openai();
    const earlier = await aboutMaria();

    const answer = await respond({ model: OTHER_MODEL, patient_context: 'none', input: [{ type: 'item_reference', id: `msg_${earlier.communication_id}` }, { role: 'user', content: 'Rewrite that for a referral letter.' }] });

    const sent = models.other.received[0];
    expect(identifyingIn(JSON.stringify(sent.body), subject.patientId)).toEqual([]);
    expect(sent.messages[0]).toMatchObject({ role: 'assistant', content: expect.stringContaining('[GIVEN-1] [FAMILY-1]') });
    const record = await reply(replyIdOf(answer));
    expect(record.subject?.reference).toBe(maria());
    expect(record.about?.map((reference) => reference.reference)).toEqual([`Communication/${earlier.communication_id}`]);
    const root = await reply(record.partOf?.[0]?.reference?.split('/')[1] ?? '');
    expect(root.subject?.reference).toBe(maria());
    const audits = await subject.system.searchResources<AuditEvent>({ resourceType: 'AuditEvent', filters: [{ code: 'entity', operator: 'eq', value: `Communication/${record.id}` }] });
    expect(audits).toHaveLength(1);
    expect(audits[0].entity?.find((entity) => entity.role?.code === '1')).toMatchObject({ what: { reference: maria() }, securityLabel: [{ code: 'PSEUDED' }] });
    expect(audits[0].entity?.find((entity) => entity.role?.code === '4')?.what?.reference).toBe(`Communication/${earlier.communication_id}`);
    expect(audits[0].outcomeDesc).toContain('item_reference');
  });

  test('on a cleared model the turn goes as it is, about the patient, and its disclosure is audited', async () => {
    const earlier = await aboutMaria();
    const answer = await respond({ model: CLEARED_MODEL, patient_context: 'none', input: [{ type: 'item_reference', id: `msg_${earlier.communication_id}` }, { role: 'user', content: 'Shorter, please.' }] });

    expect(models.cleared.received.at(-1)?.messages[0]).toEqual({ role: 'assistant', content: `Echo: ${QUESTION}` });
    const record = await reply(replyIdOf(answer));
    expect(record.subject?.reference).toBe(maria());
    const audits = await subject.system.searchResources<AuditEvent>({ resourceType: 'AuditEvent', filters: [{ code: 'entity', operator: 'eq', value: `Communication/${record.id}` }] });
    expect(audits.map((audit) => audit.entity?.find((entity) => entity.role?.code === '1')?.what?.reference)).toEqual([maria()]);
  });

  test('only the records about the patient are taken in: an item about no patient beside hers is neither on the reply nor disclosed, and items about no patient disclose nothing', async () => {
    const earlier = await aboutMaria();
    const general = await ask({ model: CLEARED_MODEL, messages: [{ role: 'user', content: 'What is a normal resting heart rate?' }] });

    const both = await respond({
      model: CLEARED_MODEL,
      patient_context: 'none',
      input: [{ type: 'item_reference', id: `msg_${earlier.communication_id}` }, { type: 'item_reference', id: `msg_${general.communication_id}` }, { role: 'user', content: 'Put both together.' }],
    });
    const record = await reply(replyIdOf(both));
    expect(record.subject?.reference).toBe(maria());
    expect(record.about?.map((reference) => reference.reference)).toEqual([`Communication/${earlier.communication_id}`]);
    const audits = await subject.system.searchResources<AuditEvent>({ resourceType: 'AuditEvent', filters: [{ code: 'entity', operator: 'eq', value: `Communication/${record.id}` }] });
    expect(audits.map((audit) => audit.entity?.filter((entity) => entity.role?.code === '4').map((entity) => entity.what?.reference))).toEqual([[`Communication/${earlier.communication_id}`]]);

    const aboutNobody = await respond({ model: OTHER_MODEL, input: [{ type: 'item_reference', id: `msg_${general.communication_id}` }, { role: 'user', content: 'Shorter, please.' }] });
    const unrelated = await reply(replyIdOf(aboutNobody));
    expect(unrelated.subject).toBeUndefined();
    expect(unrelated.about).toBeUndefined();
    expect(await subject.system.searchResources<AuditEvent>({ resourceType: 'AuditEvent', filters: [{ code: 'entity', operator: 'eq', value: `Communication/${unrelated.id}` }] })).toEqual([]);
  });

  test('an item about one patient in a turn about another, or two items about different patients: 400 naming the item, nothing stored, nothing sent', async () => {
    const earlier = await aboutMaria();
    const james = subject.project.ids['patient-in-care-team-2'];
    const aboutJames = await ask({ model: CLEARED_MODEL, patient_id: james, patient_context: 'none', messages: [{ role: 'user', content: 'And James?' }] });
    const before = await stored();
    const calls = models.cleared.received.length;

    const otherPatient = await failure(respond({ model: CLEARED_MODEL, patient_id: james, input: [{ type: 'item_reference', id: `msg_${earlier.communication_id}` }, { role: 'user', content: 'Compare.' }] }));
    expect(otherPatient).toMatchObject({ status: 400, error: { code: 'invalid_request', param: 'input.0.id' } });
    expect((otherPatient as { message: string }).message).toContain('input.0.id: the referenced item is about another patient than patient_id names;');

    const twoPatients = await failure(
      respond({
        model: CLEARED_MODEL,
        input: [{ type: 'item_reference', id: `msg_${earlier.communication_id}` }, { type: 'item_reference', id: `msg_${aboutJames.communication_id}` }, { role: 'user', content: 'Compare.' }],
      })
    );
    expect(twoPatients).toMatchObject({ status: 400, error: { code: 'invalid_request', param: 'input.1.id' } });
    expect((twoPatients as { message: string }).message).toContain('input.1.id: the referenced item is about another patient than the referenced item is about;');

    const intoConversation = await failure(respond({ model: CLEARED_MODEL, conversation: aboutJames.conversation_id, input: [{ type: 'item_reference', id: `msg_${earlier.communication_id}` }, { role: 'user', content: 'Compare.' }] }));
    expect(intoConversation).toMatchObject({ status: 400, error: { code: 'invalid_request', param: 'input.0.id' } });
    expect((intoConversation as { message: string }).message).toContain('input.0.id: the referenced item is about another patient than patient_id names;');
    expect(models.cleared.received).toHaveLength(calls);
    expect(await stored()).toBe(before);
  });

  test('a conversation started about no patient that became about one: continuing it is about that patient, by conversation_id and by previous_response_id', async () => {
    const start = await respond({ model: CLEARED_MODEL, input: 'Some general questions first.' });
    const startRoot = (await reply(replyIdOf(start))).partOf?.[0]?.reference?.split('/')[1] ?? '';
    const aboutHer = await respond({ model: CLEARED_MODEL, previous_response_id: start.id, patient_id: subject.patientId, patient_context: 'none', input: QUESTION });
    expect((await reply(replyIdOf(aboutHer))).subject?.reference).toBe(maria());
    expect((await reply(startRoot)).subject).toBeUndefined();
    const aboutJames = await ask({ model: CLEARED_MODEL, patient_id: subject.project.ids['patient-in-care-team-2'], patient_context: 'none', messages: [{ role: 'user', content: 'And James?' }] });
    const before = await stored();

    // Under refuse: the uncleared model gets nothing, whichever way the conversation is continued.
    const byId = await failure(ask({ model: OTHER_MODEL, conversation_id: startRoot, messages: [{ role: 'user', content: 'Summarise our conversation.' }] }));
    expect(byId).toMatchObject({ status: 403, error: { code: 'patient_data_not_allowed' } });
    const byPrevious = await failure(respond({ model: OTHER_MODEL, previous_response_id: aboutHer.id, input: 'Summarise our conversation.' }));
    expect(byPrevious).toMatchObject({ status: 403, error: { code: 'patient_data_not_allowed' } });
    // Nor may the conversation be taken to another patient.
    const james = await failure(ask({ model: CLEARED_MODEL, conversation_id: startRoot, patient_id: subject.project.ids['patient-in-care-team-2'], messages: [{ role: 'user', content: 'And James?' }] }));
    expect(james).toMatchObject({ status: 400, error: { code: 'invalid_request', param: 'patient_id' } });
    // Nor may a record about another patient be taken into it; the refusal says what it conflicts with.
    const jamesInto = await failure(respond({ model: CLEARED_MODEL, conversation: startRoot, input: [{ type: 'item_reference', id: `msg_${aboutJames.communication_id}` }, { role: 'user', content: 'Compare.' }] }));
    expect(jamesInto).toMatchObject({ status: 400, error: { code: 'invalid_request', param: 'input.0.id' } });
    expect((jamesInto as { message: string }).message).toContain('input.0.id: the referenced item is about another patient than the conversation is about;');
    expect(models.other.received).toHaveLength(0);
    expect(await stored()).toBe(before);

    // Under de-identify: sent without her identifiers, and recorded as about her.
    await subject.setSettings({ AI_PATIENT_DATA_POLICY: 'de-identify' });
    openai = await subject.openai();
    const continued = await respond({ model: OTHER_MODEL, previous_response_id: aboutHer.id, patient_context: 'none', input: 'Summarise our conversation.' });
    expect(identifyingIn(JSON.stringify(models.other.received[0].body), subject.patientId)).toEqual([]);
    expect(models.other.received[0].messages.map((message) => message.role)).toEqual(['user', 'assistant', 'user', 'assistant', 'user']);
    expect((await reply(replyIdOf(continued))).subject?.reference).toBe(maria());
  });

  test('a client that keeps the history, continuing such a conversation on chat completions, is about the patient too', async () => {
    const start = await ask({ model: CLEARED_MODEL, messages: [{ role: 'user', content: 'Some general questions first.' }] });
    await ask({ model: CLEARED_MODEL, conversation_id: start.conversation_id, patient_id: subject.patientId, patient_context: 'none', messages: [{ role: 'user', content: QUESTION }] });
    const before = await stored();

    // The request repeats the conversation's latest exchange and names no conversation: it continues that one.
    const refused = await failure(
      ask({ model: OTHER_MODEL, messages: [{ role: 'user', content: QUESTION }, { role: 'assistant', content: `Echo: ${QUESTION}` }, { role: 'user', content: 'Go on.' }] })
    );
    expect(refused).toMatchObject({ status: 403, error: { code: 'patient_data_not_allowed' } });
    expect(models.other.received).toHaveLength(0);
    expect(await stored()).toBe(before);
  });
});
