import type { Communication, Extension } from '@medplum/fhirtypes';
import { buildConversationRoot, buildPrompt, buildReply, type ConversationParties, type ReplyRecord } from './communication-builders.ts';
import { payloadText } from './fhir-text.ts';
import { ERROR_CODE_SYSTEM, EXTENSION, MODEL_MEDIUM_SYSTEM } from './fhir-vocabulary.ts';
import { EXCHANGE_DIGEST_SYSTEM, THREAD_DIGEST_SYSTEM } from './thread-digest.ts';

const SYSTEM = 'https://example.org/categories';
const PARTIES: ConversationParties = {
  categorySystem: SYSTEM,
  caller: { reference: 'Practitioner/alice' },
  agent: { reference: 'Device/agent' },
  subject: { reference: 'Patient/p1' },
};
const SENT = '2026-11-28T10:00:00.000Z';

const REPLY: ReplyRecord = {
  id: 'reply-1',
  rootId: 'root-1',
  promptId: 'prompt-1',
  text: 'Glucose is 105 mg/dL.',
  status: 'completed',
  modelId: 'openai/gpt-4o',
  history: { count: 0 },
  sent: SENT,
};

function extensions(resource: Communication, url: string): Extension[] {
  return (resource.extension ?? []).filter((extension) => extension.url === url);
}

function sub(extension: Extension | undefined, url: string): Extension[] {
  return (extension?.extension ?? []).filter((part) => part.url === url);
}

describe('the conversation root', () => {
  test('in progress, in the ai-conversation category, from the caller to the agent, about the patient', () => {
    expect(buildConversationRoot(PARTIES, SENT)).toEqual({
      resourceType: 'Communication',
      status: 'in-progress',
      category: [{ coding: [{ system: SYSTEM, code: 'ai-conversation', display: 'AI Conversation' }] }],
      subject: { reference: 'Patient/p1' },
      sender: { reference: 'Practitioner/alice' },
      recipient: [{ reference: 'Device/agent' }],
      sent: SENT,
    });
  });
});

describe('the prompt (the spec: ai-prompt)', () => {
  const body = { model: 'openai/gpt-4o', messages: [{ role: 'user', content: 'Latest glucose?' }], temperature: 0.2 };

  test('as the spec table has it: completed, ai-prompt, the caller the sender, the text the payload, part of the root, no inResponseTo', () => {
    const prompt = buildPrompt(PARTIES, { rootId: 'root-1', messages: [{ role: 'user', content: 'Latest glucose?' }], requestBody: body, sent: SENT });
    expect(prompt).toMatchObject({
      resourceType: 'Communication',
      status: 'completed',
      category: [{ coding: [{ system: SYSTEM, code: 'ai-prompt', display: 'AI Prompt' }] }],
      subject: { reference: 'Patient/p1' },
      sender: { reference: 'Practitioner/alice' },
      recipient: [{ reference: 'Device/agent' }],
      sent: SENT,
      payload: [{ contentString: 'Latest glucose?' }],
      partOf: [{ reference: 'Communication/root-1' }],
    });
    expect(prompt.category).toHaveLength(1);
    expect(prompt).not.toHaveProperty('inResponseTo');
    expect(prompt.id).toBeUndefined();
  });

  test('the whole request body is kept as sent, as JSON, after the messages', () => {
    const prompt = buildPrompt(PARTIES, { rootId: 'root-1', messages: [{ role: 'user', content: 'Latest glucose?' }], requestBody: body, sent: SENT });
    const [request] = extensions(prompt, EXTENSION.chatRequest);
    expect(JSON.parse(request?.valueString ?? '')).toEqual(body);
    expect(prompt.extension?.at(-1)?.url).toBe(EXTENSION.chatRequest);
    expect(extensions(prompt, EXTENSION.message)).toHaveLength(1);
  });

  test('a request body over a FHIR string is kept in several extensions, in order', () => {
    const long = { messages: [{ role: 'user', content: 'x'.repeat(1_500_000) }] };
    const prompt = buildPrompt(PARTIES, { rootId: 'root-1', messages: [{ role: 'user', content: 'short' }], requestBody: long, sent: SENT });
    const pieces = extensions(prompt, EXTENSION.chatRequest).map((extension) => extension.valueString ?? '');
    expect(pieces).toHaveLength(2);
    expect(JSON.parse(pieces.join(''))).toEqual(long);
  });

  test('a turn that adds no text (only instructions) has no payload', () => {
    const prompt = buildPrompt(PARTIES, { rootId: 'root-1', messages: [{ role: 'system', content: 'Be brief.' }], requestBody: {}, sent: SENT });
    expect(prompt.payload).toBeUndefined();
  });

  test("a side request's prompt has the side request's category second", () => {
    const prompt = buildPrompt(PARTIES, { rootId: 'root-1', messages: [{ role: 'user', content: 'Title?' }], requestBody: {}, sent: SENT, sideRequest: true });
    expect(prompt.category).toEqual([
      { coding: [{ system: SYSTEM, code: 'ai-prompt', display: 'AI Prompt' }] },
      { coding: [{ system: SYSTEM, code: 'ai-side-request', display: 'AI Side Request' }] },
    ]);
  });

  test('a conversation about no patient has no subject', () => {
    const prompt = buildPrompt({ ...PARTIES, subject: undefined }, { rootId: 'root-1', messages: [{ role: 'user', content: 'Hi' }], requestBody: {}, sent: SENT });
    expect(prompt.subject).toBeUndefined();
  });
});

describe('the reply (the spec: ai-response)', () => {
  test('as the spec table has it: its id, completed, ai-response, the agent the sender, the text the payload, part of the root, in response to the prompt', () => {
    const reply = buildReply(PARTIES, REPLY);
    expect(reply).toMatchObject({
      resourceType: 'Communication',
      id: 'reply-1',
      status: 'completed',
      category: [{ coding: [{ system: SYSTEM, code: 'ai-response', display: 'AI Response' }] }],
      medium: [{ coding: [{ system: MODEL_MEDIUM_SYSTEM, code: 'openai/gpt-4o' }] }],
      subject: { reference: 'Patient/p1' },
      sender: { reference: 'Device/agent' },
      recipient: [{ reference: 'Practitioner/alice' }],
      sent: SENT,
      payload: [{ contentString: 'Glucose is 105 mg/dL.' }],
      partOf: [{ reference: 'Communication/root-1' }],
      inResponseTo: [{ reference: 'Communication/prompt-1' }],
    });
    expect(reply.category).toHaveLength(1);
    // Nothing to say beyond the text: no identifiers, no status reason, no records shared.
    expect(reply.identifier).toBeUndefined();
    expect(reply.statusReason).toBeUndefined();
    expect(reply.about).toBeUndefined();
  });

  test('the model first, the history window last; with nothing else, nothing else', () => {
    const reply = buildReply(PARTIES, REPLY);
    expect(reply.extension).toEqual([
      { url: EXTENSION.model, valueString: 'openai/gpt-4o' },
      { url: EXTENSION.history, extension: [{ url: 'count', valueInteger: 0 }] },
    ]);
  });

  test("the history sent: how many messages, the oldest one's record, the prompt whose instructions it carried", () => {
    const reply = buildReply(PARTIES, { ...REPLY, history: { count: 6, oldest: 'c-1', instructions: 'c-0' } });
    expect(extensions(reply, EXTENSION.history)).toEqual([
      {
        url: EXTENSION.history,
        extension: [
          { url: 'count', valueInteger: 6 },
          { url: 'oldest', valueReference: { reference: 'Communication/c-1' } },
          { url: 'instructions', valueReference: { reference: 'Communication/c-0' } },
        ],
      },
    ]);
  });

  test('why the model stopped, the usage with its total and cost, an estimate said to be one', () => {
    const reply = buildReply(PARTIES, { ...REPLY, finishReason: 'length', usage: { promptTokens: 120, completionTokens: 30 }, cost: 2_500_000 });
    expect(extensions(reply, EXTENSION.finishReason)).toEqual([{ url: EXTENSION.finishReason, valueCode: 'length' }]);
    expect(extensions(reply, EXTENSION.usage)).toEqual([
      {
        url: EXTENSION.usage,
        extension: [
          { url: 'prompt-tokens', valueInteger: 120 },
          { url: 'completion-tokens', valueInteger: 30 },
          { url: 'total-tokens', valueInteger: 150 },
          { url: 'cost', valueMoney: { value: 0.0025, currency: 'USD' } },
        ],
      },
    ]);
    const estimated = buildReply(PARTIES, { ...REPLY, usage: { promptTokens: 10, completionTokens: 3, estimated: true } });
    expect(sub(extensions(estimated, EXTENSION.usage)[0], 'estimated')).toEqual([{ url: 'estimated', valueBoolean: true }]);
    expect(sub(extensions(estimated, EXTENSION.usage)[0], 'cost')).toEqual([]);
    expect(extensions(estimated, EXTENSION.finishReason)).toEqual([]);
    // A cost of nothing is still a cost.
    expect(sub(extensions(buildReply(PARTIES, { ...REPLY, usage: { promptTokens: 1, completionTokens: 1 }, cost: 0 }), EXTENSION.usage)[0], 'cost')).toEqual([
      { url: 'cost', valueMoney: { value: 0, currency: 'USD' } },
    ]);
  });

  test('a reply that did not complete: its status, and why (the reason as text, the error code as a coding)', () => {
    const failed = buildReply(PARTIES, { ...REPLY, text: '', status: 'not-done', reason: 'The provider did not answer.', errorCode: 'upstream_error' });
    expect(failed.status).toBe('not-done');
    expect(failed.statusReason).toEqual({ coding: [{ system: ERROR_CODE_SYSTEM, code: 'upstream_error' }], text: 'The provider did not answer.' });
    // No text delivered: no payload (FHIR has no empty strings).
    expect(failed.payload).toBeUndefined();
    expect(buildReply(PARTIES, { ...REPLY, status: 'stopped', reason: 'The client went away.' }).statusReason).toEqual({ text: 'The client went away.' });
    expect(buildReply(PARTIES, { ...REPLY, status: 'not-done', errorCode: 'upstream_timeout' }).statusReason).toEqual({ coding: [{ system: ERROR_CODE_SYSTEM, code: 'upstream_timeout' }] });
  });

  test('a reply over a FHIR string is in several payload items that join into it', () => {
    const text = 'y'.repeat(1_200_000);
    const reply = buildReply(PARTIES, { ...REPLY, text });
    expect(reply.payload).toHaveLength(2);
    expect(payloadText(reply.payload ?? [])).toBe(text);
  });

  test('the patient context sent, each FHIR tool call with its result, each call for the client: in that order', () => {
    const reply = buildReply(PARTIES, {
      ...REPLY,
      patientContext: { text: 'Patient: ...', shared: [{ reference: 'Patient/p1' }] },
      fhirTools: [
        { id: 'call_1', name: 'search_patient_records', arguments: '{"resource_type":"Observation"}', result: '{"count":1}', shared: [{ reference: 'Observation/o1' }] },
        { id: 'call_2', name: 'read_record', arguments: '{}', result: ' ', shared: [] },
      ],
      toolCalls: [{ id: 'call_3', name: 'get_weather', arguments: '{"city":"Paris"}' }],
    });
    expect(reply.extension?.map((extension) => extension.url)).toEqual([EXTENSION.model, EXTENSION.patientContext, EXTENSION.fhirToolCall, EXTENSION.fhirToolCall, EXTENSION.toolCall, EXTENSION.history]);
    expect(extensions(reply, EXTENSION.patientContext)).toEqual([{ url: EXTENSION.patientContext, valueString: 'Patient: ...' }]);
    const [first, second] = extensions(reply, EXTENSION.fhirToolCall);
    expect(first?.extension).toEqual([
      { url: 'id', valueString: 'call_1' },
      { url: 'name', valueString: 'search_patient_records' },
      { url: 'arguments', valueString: '{"resource_type":"Observation"}' },
      { url: 'result', valueString: '{"count":1}' },
    ]);
    // A blank result is no string (FHIR strings are never blank).
    expect(second?.extension).toEqual([
      { url: 'id', valueString: 'call_2' },
      { url: 'name', valueString: 'read_record' },
      { url: 'arguments', valueString: '{}' },
    ]);
    expect(extensions(reply, EXTENSION.toolCall)).toEqual([
      { url: EXTENSION.toolCall, extension: [{ url: 'id', valueString: 'call_3' }, { url: 'name', valueString: 'get_weather' }, { url: 'arguments', valueString: '{"city":"Paris"}' }] },
    ]);
  });

  test("every record that reached the model is in `about` once: the summary's, those taken in, the tools'", () => {
    const reply = buildReply(PARTIES, {
      ...REPLY,
      patientContext: { text: 'Patient: ...', shared: [{ reference: 'Patient/p1' }, { reference: 'Observation/o1' }] },
      takenIn: [{ reference: 'Communication/earlier' }, { reference: 'Observation/o1' }],
      fhirTools: [{ id: 'c', name: 'read_record', arguments: '{}', result: '{}', shared: [{ reference: 'Condition/k1' }, { display: 'no reference' }, { reference: 'Patient/p1' }] }],
    });
    expect(reply.about).toEqual([{ reference: 'Patient/p1' }, { reference: 'Observation/o1' }, { reference: 'Communication/earlier' }, { reference: 'Condition/k1' }]);
  });

  test('the digests of a completed turn as identifiers: the thread, then the exchange', () => {
    expect(buildReply(PARTIES, { ...REPLY, threadDigest: 'aaa', exchangeDigest: 'bbb' }).identifier).toEqual([
      { system: THREAD_DIGEST_SYSTEM, value: 'aaa' },
      { system: EXCHANGE_DIGEST_SYSTEM, value: 'bbb' },
    ]);
    expect(buildReply(PARTIES, { ...REPLY, exchangeDigest: 'bbb' }).identifier).toEqual([{ system: EXCHANGE_DIGEST_SYSTEM, value: 'bbb' }]);
  });

  test("a side request's reply has the side request's category second", () => {
    expect(buildReply(PARTIES, { ...REPLY, sideRequest: true }).category).toEqual([
      { coding: [{ system: SYSTEM, code: 'ai-response', display: 'AI Response' }] },
      { coding: [{ system: SYSTEM, code: 'ai-side-request', display: 'AI Side Request' }] },
    ]);
  });
});
