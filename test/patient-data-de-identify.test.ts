/**
 * A project that sends turns about a patient de-identified to a model not cleared for patient data
 * (`AI_PATIENT_DATA_POLICY=de-identify`), side by side with a cleared model: the emulators' recorded requests show
 * the cleared model got the real chart and the other nothing identifying (the patient's name, identifiers, birth
 * date, address, phone, e-mail and id appear nowhere in any request body, its summary, history, prompt and FHIR
 * tool results included), and the caller's replies, JSON and streamed, come back re-identified. The records keep
 * what the user typed and saw, and what the model received and said; the AuditEvents say the records went
 * pseudonymised. Real openai SDK against the standalone host; MedplumClient reads the records back.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AuditEvent, Communication, Extension } from '@medplum/fhirtypes';
import OpenAI from 'openai';
import { EXTENSION } from '../plugin/chat/fhir-vocabulary.ts';
import { payloadText } from '../plugin/chat/fhir-text.ts';
import { CLEARED_MODEL, identifyingIn, MARIA, metricValue, OTHER_MODEL, patientDataProject, startTwoModelHost, type PatientDataProject, type TwoModelHost } from './support/two-model-host.ts';
import type { FhirgateCompletion } from './support/chat-clients.ts';
import { journaledTurn } from './support/journaled-turns.ts';
import { waitFor } from './support/wait-for.ts';

type FhirgateChunk = OpenAI.ChatCompletionChunk & { conversation_id?: string; communication_id?: string };

/** A question that names the patient and every contact detail she has on record. */
const QUESTION = `Is ${MARIA.given} ${MARIA.family} (born ${MARIA.birthDate}, ${MARIA.mrn}, ${MARIA.phone}, ${MARIA.email}, ${MARIA.line}, ${MARIA.city} ${MARIA.postalCode}) better since 2026-10-15?`;

/** A sub-extension's text, joined from its pieces. */
const part = (extension: Extension | undefined, url: string): string =>
  (extension?.extension ?? []).filter((item) => item.url === url).map((item) => item.valueString ?? '').join('');

describe('patient data egress: de-identified for a model not cleared', () => {
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
    await subject.setSettings({ AI_PATIENT_DATA_POLICY: 'de-identify' });
    openai = await subject.openai();
  });

  const ask = (body: Record<string, unknown>): Promise<FhirgateCompletion> => openai.chat.completions.create(body as never) as unknown as Promise<FhirgateCompletion>;
  const reply = (id: string): Promise<Communication> => subject.medplum.readResource('Communication', id, { cache: 'no-cache' });
  const deIdentifiedOf = (record: Communication): Extension | undefined => record.extension?.find((extension) => extension.url === EXTENSION.deIdentified);
  const auditsOf = (replyId: string): Promise<AuditEvent[]> => subject.medplum.searchResources('AuditEvent', { entity: `Communication/${replyId}` }, { cache: 'no-cache' });

  test('side by side: the cleared model gets the real chart, the other one nothing identifying, and both replies read the same to the caller', async () => {
    const turnsBefore = await metricValue(models.host, 'fhirgate_governance_de_identified_turns_total', { fhirgate_project_id: subject.project.projectId });
    const clearedAnswer = await ask({ model: CLEARED_MODEL, messages: [{ role: 'user', content: QUESTION }], patient_id: subject.patientId });
    const otherAnswer = await ask({ model: OTHER_MODEL, messages: [{ role: 'user', content: QUESTION }], patient_id: subject.patientId });

    const clearedBody = JSON.stringify(models.cleared.received[0].body);
    expect(clearedBody).toContain(`${MARIA.given} ${MARIA.family}, female, born ${MARIA.birthDate}`);
    expect(clearedBody).toContain(`called from ${MARIA.phone}`);

    const otherRequest = models.other.received[0];
    expect(identifyingIn(JSON.stringify(otherRequest.body), subject.patientId)).toEqual([]);
    // The chart is there, its clinical content intact, the patient pseudonymised and its dates shifted.
    const context = otherRequest.messages.find((message) => message.role === 'system')?.content ?? '';
    expect(context).toContain('[GIVEN-1] [FAMILY-1], female, born ');
    expect(context).toContain('Essential hypertension (since ');
    expect(context).toContain('[GIVEN-1] [FAMILY-1] called from [PHONE-1] about dizziness since ');
    expect(context).not.toContain('2021-03-04');
    // The birth date as the age, never a date a provider could move back.
    expect(context).toContain('[GIVEN-1] [FAMILY-1], female, born [age ');
    expect(otherRequest.messages.at(-1)?.content).toMatch(/^Is \[GIVEN-1\] \[FAMILY-1\] \(born \[age \d+\], \[ID-1\], \[PHONE-1\], \[EMAIL-1\], \[ADDRESS-1\], \[CITY-1\] \[POSTCODE-1\]\) better since \d{4}-\d{2}-\d{2}\?$/);

    // Re-identified for the caller: the echo reads as the question the user asked.
    expect(clearedAnswer.choices[0].message.content).toBe(`Echo: ${QUESTION}`);
    expect(otherAnswer.choices[0].message.content).toBe(`Echo: ${QUESTION}`);
    expect(await metricValue(models.host, 'fhirgate_governance_de_identified_turns_total', { fhirgate_project_id: subject.project.projectId })).toBe(turnsBefore + 1);

    // On record: the user's prompt as typed, the reply as the caller saw it, and what the model received and said.
    const record = await reply(otherAnswer.communication_id);
    const prompt = await subject.medplum.readReference(record.inResponseTo?.[0] as never) as Communication;
    expect(payloadText(prompt.payload ?? [])).toBe(QUESTION);
    expect(payloadText(record.payload ?? [])).toBe(`Echo: ${QUESTION}`);
    expect(record.extension?.find((extension) => extension.url === EXTENSION.patientContext)?.valueString).toBe(context);
    const deIdentified = deIdentifiedOf(record);
    const shift = deIdentified?.extension?.find((item) => item.url === 'date-shift-days')?.valueInteger ?? 0;
    expect(shift).toBeGreaterThanOrEqual(-365);
    expect(shift).toBeLessThanOrEqual(-30);
    expect(part(deIdentified, 'reply')).toBe(`Echo: ${otherRequest.messages.at(-1)?.content}`);
    expect(JSON.parse(part(deIdentified, 'request'))).toEqual([{ role: 'user', content: otherRequest.messages.at(-1)?.content }]);
    expect(deIdentifiedOf(await reply(clearedAnswer.communication_id))).toBeUndefined();

    // The disclosures say in which form the records left.
    const [otherAudit] = await auditsOf(otherAnswer.communication_id);
    const [clearedAudit] = await auditsOf(clearedAnswer.communication_id);
    const labels = (audit: AuditEvent): (string | undefined)[] => (audit.entity ?? []).filter((entity) => entity.role?.code !== '3').flatMap((entity) => entity.securityLabel?.map((label) => label.code) ?? [undefined]);
    expect(new Set(labels(otherAudit))).toEqual(new Set(['PSEUDED']));
    expect(otherAudit.outcomeDesc).toContain('de-identified');
    expect(new Set(labels(clearedAudit))).toEqual(new Set([undefined]));
    // An auditor's question, "what of this patient reached a model, and in which form?", is one search.
    const disclosures = await subject.medplum.searchResources('AuditEvent', { patient: `Patient/${subject.patientId}` }, { cache: 'no-cache' });
    expect(disclosures.map((audit) => [audit.id, labels(audit).includes('PSEUDED')]).sort()).toEqual([[clearedAudit.id, false], [otherAudit.id, true]].sort());
  });

  test('a continued conversation: its history and the new prompt go de-identified with the same date shift, and the streamed reply comes back re-identified', async () => {
    const first = await ask({ model: OTHER_MODEL, messages: [{ role: 'user', content: QUESTION }], patient_id: subject.patientId });
    // A date far from today (moved by the shift) and one next week (written relative to today).
    const far = new Date(Date.now() + 200 * 86_400_000).toISOString().slice(0, 10);
    const soon = new Date(Date.now() + 3 * 86_400_000).toISOString().slice(0, 10);
    const followUp = `And should ${MARIA.given} call ${MARIA.phone} before ${far}, or on ${soon}?`;
    const stream = (await openai.chat.completions.create({
      model: OTHER_MODEL,
      stream: true,
      messages: [{ role: 'user', content: followUp }],
      conversation_id: first.conversation_id,
    } as never)) as unknown as AsyncIterable<FhirgateChunk>;
    let streamed = '';
    let replyId = '';
    for await (const chunk of stream) {
      streamed += chunk.choices[0]?.delta?.content ?? '';
      replyId ||= chunk.communication_id ?? '';
    }
    expect(streamed).toBe(`Echo: ${followUp}`);

    const continued = models.other.received[1];
    expect(identifyingIn(JSON.stringify(continued.body), subject.patientId)).toEqual([]);
    // The history: the first prompt and its reply, both de-identified as they were the first time.
    const firstSent = models.other.received[0].messages.at(-1)?.content;
    expect(continued.messages.filter((message) => message.role !== 'system').map((message) => message.content)).toEqual([
      firstSent,
      `Echo: ${firstSent}`,
      expect.stringMatching(/^And should \[GIVEN-1\] call \[PHONE-1\] before \d{4}-\d{2}-\d{2}, or on \[in 3 days\]\?$/),
    ]);
    const shiftOf = async (id: string): Promise<number | undefined> => deIdentifiedOf(await reply(id))?.extension?.find((item) => item.url === 'date-shift-days')?.valueInteger;
    expect(await shiftOf(replyId)).toBe(await shiftOf(first.communication_id));
    expect(payloadText((await reply(replyId)).payload ?? [])).toBe(`Echo: ${followUp}`);
  });

  test("the client's own tools: a call comes back named as the client named it, with the model's pseudonyms in its arguments unless the project allows re-identifying them", async () => {
    const tool = { type: 'function' as const, name: `lookup_${MARIA.given}${MARIA.family}`, parameters: { type: 'object', properties: { query: { type: 'string' } } } };
    // The model calls the tool by the name it was given.
    const behaviour = JSON.stringify({ toolCalls: [[{ name: 'lookup_GIVEN-1FAMILY-1', arguments: { query: `${MARIA.mrn} ${MARIA.phone} born ${MARIA.birthDate}` } }]] });
    const ask = async (client: OpenAI): Promise<OpenAI.Responses.ResponseFunctionToolCall> => {
      const stream = client.responses.stream({ model: OTHER_MODEL, input: `Look her up. [emulator-behaviour ${behaviour}]`, tools: [tool], patient_id: subject.patientId } as never);
      for await (const event of stream) {
        void event;
      }
      return (await stream.finalResponse()).output.find((item) => item.type === 'function_call') as OpenAI.Responses.ResponseFunctionToolCall;
    };

    const pseudonymised = await ask(openai);
    // The model saw the tool under a name without her identifiers, and the client gets its own name back.
    expect(models.other.received[0].tools.map((offered) => offered.name)).toEqual(['lookup_GIVEN-1FAMILY-1']);
    expect(identifyingIn(JSON.stringify(models.other.received[0].body), subject.patientId)).toEqual([]);
    expect(pseudonymised.name).toBe(tool.name);
    expect(JSON.parse(pseudonymised.arguments)).toEqual({ query: expect.stringMatching(/^\[ID-1\] \[PHONE-1\] born \[age \d+\]$/) });

    await subject.setSettings({ AI_PATIENT_DATA_TOOL_ARGUMENTS: 're-identify' });
    const reIdentified = await ask(await subject.openai());
    expect(JSON.parse(reIdentified.arguments)).toEqual({ query: `${MARIA.mrn} ${MARIA.phone} born ${MARIA.birthDate}` });
  });

  test("FHIR tools: the model's calls reach the chart re-identified, their results reach the model de-identified, and the record keeps them as sent", async () => {
    const steps = [
      [{ name: 'read_record', arguments: { reference: `Patient/${subject.patientId}` } }],
      [{ name: 'search_patient_records', arguments: { resource_type: 'Observation', params: { date: 'ge2026-10-19', _sort: '-date' } } }],
    ];
    const answer = await ask({
      model: OTHER_MODEL,
      messages: [{ role: 'user', content: `What did ${MARIA.given} report? [emulator-behaviour ${JSON.stringify({ toolCalls: steps })}]` }],
      patient_id: subject.patientId,
      patient_context: 'tools',
    });
    expect(answer.choices[0].message.content).toMatch(new RegExp(`^Echo: What did ${MARIA.given} report\\?`));

    const received = models.other.received;
    expect(received).toHaveLength(3);
    for (const request of received) {
      expect(identifyingIn(JSON.stringify(request.body), subject.patientId)).toEqual([]);
    }
    // The model asked for `Patient/[PATIENT-1]`: fhirgate read the real record and handed it back pseudonymised.
    expect(received[1].messages.at(-2)?.toolCalls?.[0].arguments).toBe('{"reference":"Patient/[PATIENT-1]"}');
    const patientResult = JSON.parse(received[1].messages.at(-1)?.content ?? '') as { records: { name: { given: string[]; family: string }[]; birthDate: string }[] };
    expect(patientResult.records[0].name[0]).toEqual({ given: ['[GIVEN-1]'], family: '[FAMILY-1]' });
    // The search's date, shifted for the model, was shifted back for the chart: the note of 2026-10-20 and the pulse of 2026-11-01.
    const searchResult = JSON.parse(received[2].messages.at(-1)?.content ?? '') as { records: { id: string; valueString?: string }[] };
    expect(searchResult.records.map((record) => record.id)).toEqual([subject.chart.pulse.id, subject.chart.note.id]);
    expect(searchResult.records[1].valueString).toMatch(/^\[GIVEN-1\] \[FAMILY-1\] called from \[PHONE-1\] about dizziness since \d{4}-\d{2}-\d{2}; daughter lives at \[ADDRESS-1\]\.$/);

    const record = await reply(answer.communication_id);
    expect(record.about?.map((reference) => reference.reference)).toEqual([`Patient/${subject.patientId}`, `Observation/${subject.chart.pulse.id}`, `Observation/${subject.chart.note.id}`]);
    const calls = (record.extension ?? []).filter((extension) => extension.url === EXTENSION.fhirToolCall);
    expect(calls.map((call) => part(call, 'result'))).toEqual([received[1].messages.at(-1)?.content, received[2].messages.at(-1)?.content]);
    expect(identifyingIn(JSON.stringify(calls), subject.patientId)).toEqual([]);
    const audits = await auditsOf(answer.communication_id);
    expect(audits).toHaveLength(2);
    for (const audit of audits) {
      expect(audit.entity?.find((entity) => entity.role?.code === '1')?.securityLabel?.[0]?.code).toBe('PSEUDED');
    }
  });
});

describe('patient data egress: the reply journal of a de-identified turn', () => {
  let models: TwoModelHost;
  let journalDir: string;

  beforeAll(async () => {
    journalDir = mkdtempSync(join(tmpdir(), 'fhirgate-de-identify-journal-'));
    models = await startTwoModelHost({ replyJournalDir: journalDir });
  });
  afterAll(async () => {
    await models.close();
    rmSync(journalDir, { recursive: true, force: true });
  });

  test('while the turn streams, its journal holds the chart summary and each FHIR tool call as the model was sent them, as its reply then states them', async () => {
    models.other.reset();
    const subject = await patientDataProject(models.host);
    await subject.setSettings({ AI_PATIENT_DATA_POLICY: 'de-identify' });
    const openai = await subject.openai();
    const steps = [[{ name: 'read_record', arguments: { reference: `Patient/${subject.patientId}` } }]];
    // The answer after the call streams slowly: the turn is still running when the journal is read.
    const behaviour = { toolCalls: steps, tokensPerSecond: 4 };
    const stream = (await openai.chat.completions.create({
      model: OTHER_MODEL,
      stream: true,
      messages: [{ role: 'user', content: `How is ${MARIA.given}? [emulator-behaviour ${JSON.stringify(behaviour)}]` }],
      patient_id: subject.patientId,
      patient_context: 'both',
    } as never)) as unknown as AsyncIterable<FhirgateChunk> & { controller: AbortController };
    let replyId = '';
    for await (const chunk of stream) {
      // A chunk's id is `chatcmpl-` and the reply's record id.
      replyId = chunk.id.replace(/^chatcmpl-/, '');
      if (chunk.choices[0]?.delta?.content) {
        break;
      }
    }

    // Streaming now: the journal has what the model was sent, de-identified.
    const received = models.other.received;
    const sentContext = received[0].messages.find((message) => message.role === 'system')?.content;
    const turn = journaledTurn(journalDir, replyId);
    expect(turn?.reply.patientContext?.text).toBe(sentContext);
    expect(turn?.reply.fhirTools?.map((call) => [call.name, call.arguments, call.result])).toEqual([
      ['read_record', received[1].messages.at(-2)?.toolCalls?.[0].arguments, received[1].messages.at(-1)?.content],
    ]);
    // Its texts name nothing identifying (the records shared are named by reference, for the reply's `about`).
    const texts = [turn?.reply.patientContext?.text, ...(turn?.reply.fhirTools ?? []).flatMap((call) => [call.arguments, call.result])];
    expect(identifyingIn(JSON.stringify(texts), subject.patientId)).toEqual([]);

    // The reply, stopped when its client left, states the same.
    stream.controller.abort();
    const record = await waitFor(async () => {
      const stored = await subject.medplum.readResource('Communication', replyId, { cache: 'no-cache' }).catch(() => undefined);
      return stored?.status === 'stopped' ? stored : undefined;
    });
    expect(record.extension?.find((extension) => extension.url === EXTENSION.patientContext)?.valueString).toBe(turn?.reply.patientContext?.text);
    const calls = (record.extension ?? []).filter((extension) => extension.url === EXTENSION.fhirToolCall);
    expect(calls.map((call) => [call.extension?.find((item) => item.url === 'name')?.valueString, part(call, 'arguments'), part(call, 'result')])).toEqual(
      turn?.reply.fhirTools?.map((call) => [call.name, call.arguments, call.result])
    );
  }, 30_000);
});

describe('patient data egress: a schema beside json_object goes de-identified', () => {
  let models: TwoModelHost;

  beforeAll(async () => {
    // The model not cleared is an OpenAI-compatible server, which takes a schema beside json_object.
    models = await startTwoModelHost({ otherKind: 'openai-compatible' });
  });
  afterAll(() => models.close());

  test("instructor's JSON_SCHEMA mode about a patient: the schema's keys and strings reach the model de-identified, the prompt's record keeps them as sent", async () => {
    const subject = await patientDataProject(models.host);
    await subject.setSettings({ AI_PATIENT_DATA_POLICY: 'de-identify' });
    const openai = await subject.openai();
    const schema = {
      type: 'object',
      properties: { [`${MARIA.given.toLowerCase()}_${MARIA.family.toLowerCase()}_phone`]: { type: 'string', description: `Always ${MARIA.phone}` } },
      required: [`${MARIA.given.toLowerCase()}_${MARIA.family.toLowerCase()}_phone`],
    };
    const body = { model: OTHER_MODEL, messages: [{ role: 'user', content: `Her phone, as json? ${QUESTION}` }], response_format: { type: 'json_object', schema }, patient_id: subject.patientId };
    const completion = (await openai.chat.completions.create(body as never)) as unknown as FhirgateCompletion;

    const sent = models.other.received[0].body.response_format as { type: string; schema: { properties: Record<string, unknown> } };
    expect(sent.type).toBe('json_object');
    expect(identifyingIn(JSON.stringify(sent), subject.patientId)).toEqual([]);
    expect(Object.keys(sent.schema.properties)).toEqual(['[given-1]_[family-1]_phone']);
    const record = await subject.medplum.readResource('Communication', completion.communication_id, { cache: 'no-cache' });
    const prompt = (await subject.medplum.readReference(record.inResponseTo?.[0] as never)) as Communication;
    const recorded = JSON.parse(prompt.extension?.find((extension) => extension.url === EXTENSION.chatRequest)?.valueString ?? '{}');
    expect(recorded.response_format).toEqual({ type: 'json_object', schema });
  });
});

