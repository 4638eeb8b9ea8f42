import type { Communication, Extension, Patient } from '@medplum/fhirtypes';
import type { ChatMessage } from '../llm/chat-model.ts';
import { buildReply, type ConversationParties, type ReplyRecord } from '../chat/communication-builders.ts';
import { EXTENSION } from '../chat/fhir-vocabulary.ts';
import { Pseudonymizer } from './de-identify-text.ts';
import { recordedReply, TurnDeIdentification } from './patient-data-record.ts';

const PATIENT: Patient = {
  resourceType: 'Patient',
  id: 'p1',
  name: [{ given: ['Henrietta'], family: 'Okonkwo' }],
  birthDate: '1961-07-09',
  identifier: [{ system: 'urn:oid:1.2.3.4', value: 'MRN-778812' }],
};
const NAMES = ['Henrietta', 'Okonkwo', '778812'];

const PARTIES: ConversationParties = {
  categorySystem: 'urn:fhirgate:category',
  caller: { reference: 'Practitioner/alice' },
  agent: { reference: 'Device/agent' },
  subject: { reference: 'Patient/p1' },
};

/** The reply as the caller was shown it: re-identified. */
const REPLY: ReplyRecord = {
  id: 'reply-1',
  rootId: 'root-1',
  promptId: 'prompt-1',
  text: 'Henrietta Okonkwo (MRN-778812) is stable.',
  status: 'completed',
  modelId: 'uncleared/model',
  history: { count: 2 },
  patientContext: { text: 'Patient: Henrietta Okonkwo, MRN-778812, born 1961-07-09.', shared: [{ reference: 'Patient/p1' }, { reference: 'Observation/o1' }] },
  fhirTools: [{ id: 'call_1', name: 'search_observations', arguments: '{"patient":"Henrietta Okonkwo"}', result: '{"resourceType":"Bundle","note":"Okonkwo, MRN-778812"}', shared: [{ reference: 'Observation/o2' }] }],
  sent: '2026-11-28T10:00:00.000Z',
};

const NOW = new Date('2026-11-28T10:00:00Z');

function extensionOf(resource: Communication, url: string): Extension[] {
  return (resource.extension ?? []).filter((extension) => extension.url === url);
}

function parts(extension: Extension | undefined, url: string): (string | number | undefined)[] {
  return (extension?.extension ?? []).filter((part) => part.url === url).map((part) => part.valueString ?? part.valueInteger);
}

describe('recordedReply', () => {
  test('a turn that was not de-identified is recorded as any reply', () => {
    expect(recordedReply(undefined, PARTIES, REPLY)).toEqual(buildReply(PARTIES, REPLY));
  });

  test('de-identified: the payload is what the caller was shown; the patient context and tool calls as the model got them', () => {
    const pseudonyms = new Pseudonymizer(PATIENT, -120, NOW);
    const resource = recordedReply(new TurnDeIdentification(pseudonyms, []), PARTIES, REPLY);

    expect(resource.payload?.[0]?.contentString).toBe(REPLY.text);

    const [context] = extensionOf(resource, EXTENSION.patientContext);
    expect(context?.valueString).toBe(pseudonyms.deIdentify(REPLY.patientContext?.text ?? ''));
    for (const name of NAMES) {
      expect(context?.valueString).not.toContain(name);
    }

    const [call] = extensionOf(resource, EXTENSION.fhirToolCall);
    expect(parts(call, 'id')).toEqual(['call_1']);
    expect(parts(call, 'name')).toEqual(['search_observations']);
    expect(parts(call, 'arguments')).toEqual([pseudonyms.deIdentify('{"patient":"Henrietta Okonkwo"}')]);
    expect(parts(call, 'result')).toEqual([pseudonyms.deIdentifyToolResult('{"resourceType":"Bundle","note":"Okonkwo, MRN-778812"}')]);
    for (const name of NAMES) {
      expect(JSON.stringify(call)).not.toContain(name);
    }

    // Which records reached the model is the same whatever form they went in.
    expect(resource.about).toEqual([{ reference: 'Patient/p1' }, { reference: 'Observation/o1' }, { reference: 'Observation/o2' }]);
    // The reply's other extensions are kept, the de-identified one last.
    expect(resource.extension?.map((extension) => extension.url)).toEqual([
      EXTENSION.model,
      EXTENSION.patientContext,
      EXTENSION.fhirToolCall,
      EXTENSION.history,
      EXTENSION.deIdentified,
    ]);
  });

  test('a de-identified turn without patient context or tool calls records neither', () => {
    const pseudonyms = new Pseudonymizer(PATIENT, -120, NOW);
    const resource = recordedReply(new TurnDeIdentification(pseudonyms, []), PARTIES, { ...REPLY, patientContext: undefined, fhirTools: undefined });
    expect(extensionOf(resource, EXTENSION.patientContext)).toEqual([]);
    expect(extensionOf(resource, EXTENSION.fhirToolCall)).toEqual([]);
    expect(resource.about).toBeUndefined();
  });

  test("a tool's result is recorded without the patient's photo, as the model got it", () => {
    const pseudonyms = new Pseudonymizer(PATIENT, -120, NOW);
    const result = JSON.stringify({ resourceType: 'Patient', id: 'p1', photo: [{ contentType: 'image/png', data: 'iVBORw0KGgo=' }] });
    const resource = recordedReply(new TurnDeIdentification(pseudonyms, []), PARTIES, { ...REPLY, fhirTools: [{ ...REPLY.fhirTools![0]!, result }] });
    const [recorded] = parts(extensionOf(resource, EXTENSION.fhirToolCall)[0], 'result');
    expect(recorded).not.toContain('iVBORw0KGgo=');
    expect(recorded).not.toContain('photo');
  });
});

describe('the de-identified extension: the date shift, the request as sent, the reply as the model wrote it', () => {
  test("the request's messages in OpenAI's words, de-identified; the model's own text", () => {
    const pseudonyms = new Pseudonymizer(PATIENT, -120, NOW);
    const messages: ChatMessage[] = [
      { role: 'system', content: 'You help clinicians.' },
      { role: 'user', content: 'How is Henrietta Okonkwo?', name: 'alice' },
      { role: 'user', content: 'both parts', parts: ['Look at Okonkwo', 'and MRN-778812'] },
      { role: 'assistant', content: '', toolCalls: [{ id: 'call_9', name: 'lookup', arguments: '{"name":"Henrietta"}' }] },
      { role: 'tool', content: 'Okonkwo: stable', toolCallId: 'call_9' },
    ];
    const turn = new TurnDeIdentification(pseudonyms, messages);
    turn.transcript.add('[GIVEN-1] is ');
    turn.transcript.add('stable.');

    const extension = turn.extension();
    expect(extension.url).toBe(EXTENSION.deIdentified);
    expect(parts(extension, 'date-shift-days')).toEqual([-120]);
    expect(parts(extension, 'reply')).toEqual(['[GIVEN-1] is stable.']);

    const request = JSON.parse(parts(extension, 'request').join('')) as unknown[];
    expect(request).toEqual([
      { role: 'system', content: 'You help clinicians.' },
      { role: 'user', content: pseudonyms.deIdentify('How is Henrietta Okonkwo?'), name: 'alice' },
      { role: 'user', content: [{ type: 'text', text: pseudonyms.deIdentify('Look at Okonkwo') }, { type: 'text', text: pseudonyms.deIdentify('and MRN-778812') }] },
      { role: 'assistant', content: '', tool_calls: [{ id: 'call_9', name: 'lookup', arguments: pseudonyms.deIdentify('{"name":"Henrietta"}') }] },
      { role: 'tool', content: pseudonyms.deIdentifyToolResult('Okonkwo: stable'), tool_call_id: 'call_9' },
    ]);
    for (const name of NAMES) {
      expect(JSON.stringify(request)).not.toContain(name);
    }
  });

  test('a name that would identify the patient is not recorded (it was not sent)', () => {
    const pseudonyms = new Pseudonymizer(PATIENT, -120, NOW);
    const turn = new TurnDeIdentification(pseudonyms, [{ role: 'user', content: 'hello', name: 'Henrietta' }]);
    expect(JSON.parse(parts(turn.extension(), 'request').join(''))).toEqual([{ role: 'user', content: 'hello' }]);
  });

  test('nothing written by the model: no reply part; blank text is no part either (FHIR strings are never blank)', () => {
    const pseudonyms = new Pseudonymizer(PATIENT, -120, NOW);
    const turn = new TurnDeIdentification(pseudonyms, [{ role: 'user', content: 'hello' }]);
    expect(turn.extension().extension?.map((part) => part.url)).toStrictEqual(['date-shift-days', 'request']);
    turn.transcript.add('  \n ');
    expect(turn.extension().extension?.map((part) => part.url)).toStrictEqual(['date-shift-days', 'request']);
  });

  test('a message whose parts are named but absent is sent, and recorded, as its content', () => {
    const pseudonyms = new Pseudonymizer(PATIENT, -120, NOW);
    const turn = new TurnDeIdentification(pseudonyms, [{ role: 'user', content: 'How is Okonkwo?', parts: undefined }]);
    expect(JSON.parse(parts(turn.extension(), 'request').join(''))).toEqual([{ role: 'user', content: pseudonyms.deIdentify('How is Okonkwo?') }]);
  });

  test('the context of a turn that had none stays none', () => {
    const turn = new TurnDeIdentification(new Pseudonymizer(PATIENT, -120, NOW), []);
    expect(turn.asSentContext(undefined)).toBeUndefined();
  });
});
