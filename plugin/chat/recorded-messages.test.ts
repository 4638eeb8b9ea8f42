import type { Communication } from '@medplum/fhirtypes';
import type { ChatMessage } from '../llm/chat-model.ts';
import { buildPrompt, buildReply, type ConversationParties } from './communication-builders.ts';
import { messagesOf, withAnsweredCallsOnly } from './recorded-messages.ts';

const parties: ConversationParties = {
  categorySystem: 'urn:test',
  caller: { reference: 'Practitioner/p1' },
  agent: { reference: 'Device/agent' },
  subject: { reference: 'Patient/pt1' },
};
const sent = '2026-11-23T10:00:00.000Z';
const reply = { id: 'r1', rootId: 'root', promptId: 'p1', modelId: 'openai/m', history: { count: 0 }, sent };

describe('messages read back from the records', () => {
  test("a prompt's tool results and user text come back in order, each result naming its call", () => {
    const prompt = buildPrompt(parties, {
      rootId: 'root',
      messages: [
        { role: 'tool', content: '18 °C', toolCallId: 'call_1' },
        { role: 'tool', content: '', toolCallId: 'call_2' },
        { role: 'user', content: 'And tomorrow?' },
      ],
      requestBody: {},
      sent,
    });
    expect(messagesOf(prompt)).toEqual([
      { role: 'tool', content: '18 °C', toolCallId: 'call_1' },
      // FHIR strings are never empty: an empty result is stored as an empty text attachment and read back as ''.
      { role: 'tool', content: '', toolCallId: 'call_2' },
      { role: 'user', content: 'And tomorrow?' },
    ]);
    expect(prompt.payload?.[1]).toEqual({ extension: [{ url: 'urn:fhirgate:extension:tool-result', valueString: 'call_2' }], contentAttachment: { contentType: 'text/plain' } });
  });

  test('every message a turn added comes back as it was sent: instructions, few-shot pairs, calls and results, names and parts', () => {
    const messages: ChatMessage[] = [
      { role: 'system', content: 'Answer with one word.', parts: ['Answer with ', 'one word.'] },
      { role: 'developer', content: '  ' },
      { role: 'user', content: 'Capital of France?', name: 'dr_lee' },
      { role: 'assistant', content: 'Paris', name: 'tutor' },
      { role: 'user', content: 'Weather there?' },
      { role: 'assistant', content: '', toolCalls: [{ id: 'call_1', name: 'get_weather', arguments: '{"city":"Paris"}' }] },
      { role: 'tool', content: 'Sunny', toolCallId: 'call_1' },
      { role: 'user', content: 'Capital of Italy?', parts: ['Capital of ', '', 'Italy?'] },
      { role: 'user', content: 'Output should be JSON.' },
    ];
    const prompt = buildPrompt(parties, { rootId: 'root', messages, requestBody: {}, sent });

    expect(messagesOf(prompt)).toEqual(messages);
    // The reviewer reads the user's words and the tool results as the payload, in order; the rest is in extensions.
    expect(prompt.payload?.map((item) => item.contentString)).toEqual(['Capital of France?', 'Weather there?', 'Sunny', 'Capital of ', 'Italy?', 'Output should be JSON.']);
    expect(JSON.stringify(prompt)).not.toContain('""');
  });

  test('a prompt recorded before its messages were described is read as before: its tool results, then its user text', () => {
    const old = {
      resourceType: 'Communication',
      category: [{ coding: [{ system: 'urn:test', code: 'ai-prompt' }] }],
      status: 'completed',
      payload: [
        { extension: [{ url: 'urn:fhirgate:extension:tool-result', valueString: 'call_1' }], contentString: '18 °C' },
        { contentString: 'And ' },
        { contentString: 'tomorrow?' },
      ],
    } as const;
    expect(messagesOf(old as unknown as Communication)).toEqual([
      { role: 'tool', content: '18 °C', toolCallId: 'call_1' },
      { role: 'user', content: 'And tomorrow?' },
    ]);
  });

  test('a description edited by hand to give a field twice is read by its first: its role, name, payload count and call id', () => {
    const prompt: Communication = {
      resourceType: 'Communication',
      status: 'completed',
      category: [{ coding: [{ system: 'urn:test', code: 'ai-prompt' }] }],
      payload: [{ contentString: 'first' }, { contentString: 'second' }],
      extension: [
        {
          url: 'urn:fhirgate:extension:message',
          extension: [
            { url: 'role', valueCode: 'user' },
            { url: 'role', valueCode: 'system' },
            { url: 'name', valueString: 'ann' },
            { url: 'name', valueString: 'bob' },
            { url: 'payload', valueInteger: 1 },
            { url: 'payload', valueInteger: 2 },
          ],
        },
        {
          url: 'urn:fhirgate:extension:message',
          extension: [
            { url: 'role', valueCode: 'tool' },
            { url: 'tool-call-id', valueString: 'call_1' },
            { url: 'tool-call-id', valueString: 'call_2' },
            { url: 'payload', valueInteger: 1 },
          ],
        },
      ],
    };
    expect(messagesOf(prompt)).toStrictEqual([
      { role: 'user', content: 'first', name: 'ann' },
      { role: 'tool', content: 'second', toolCallId: 'call_1' },
    ]);
  });

  test("a side request's prompt and reply carry the side request's category after their own", () => {
    const prompt = buildPrompt(parties, { rootId: 'root', messages: [{ role: 'user', content: 'Generate a title for this conversation.' }], requestBody: {}, sent, sideRequest: true });
    const stored = buildReply(parties, { ...reply, text: 'Title', status: 'completed', sideRequest: true });
    for (const record of [prompt, stored]) {
      expect(record.category?.map((concept) => concept.coding?.[0]?.code)).toEqual([record === prompt ? 'ai-prompt' : 'ai-response', 'ai-side-request']);
    }
  });

  test('a reply with calls comes back as the assistant message that made them; its record has no empty strings', () => {
    const calls = [{ id: 'call_1', name: 'get_weather', arguments: '{"city":"Lyon"}' }];
    const stored = buildReply(parties, { ...reply, text: '', status: 'completed', finishReason: 'tool_calls', toolCalls: calls });
    expect(stored.payload).toBeUndefined();
    expect(messagesOf(stored)).toEqual([{ role: 'assistant', content: '', toolCalls: calls }]);
    expect(JSON.stringify(stored)).not.toContain('""');
  });

  test('a failed reply, and a reply with neither text nor calls, stand for no message', () => {
    expect(messagesOf(buildReply(parties, { ...reply, text: 'partial', status: 'not-done' }))).toEqual([]);
    expect(messagesOf(buildReply(parties, { ...reply, text: '', status: 'stopped' }))).toEqual([]);
    expect(messagesOf(buildReply(parties, { ...reply, text: 'cut', status: 'stopped' }))).toEqual([{ role: 'assistant', content: 'cut' }]);
  });

  test("the records a reply's FHIR tools shared join the summary's in about, once each", () => {
    const stored = buildReply(parties, {
      ...reply,
      text: 'Glucose is rising.',
      status: 'completed',
      patientContext: { text: 'summary', shared: [{ reference: 'Patient/pt1' }, { reference: 'Observation/o1' }] },
      fhirTools: [{ id: 'call_1', name: 'search_patient_records', arguments: '{}', result: '{"count":2}', shared: [{ reference: 'Observation/o1' }, { reference: 'Observation/o2' }] }],
    });
    expect(stored.about).toEqual([{ reference: 'Patient/pt1' }, { reference: 'Observation/o1' }, { reference: 'Observation/o2' }]);
    expect(stored.extension?.find((extension) => extension.url === 'urn:fhirgate:extension:fhir-tool-call')?.extension).toEqual([
      { url: 'id', valueString: 'call_1' },
      { url: 'name', valueString: 'search_patient_records' },
      { url: 'arguments', valueString: '{}' },
      { url: 'result', valueString: '{"count":2}' },
    ]);
  });
});

describe('withAnsweredCallsOnly', () => {
  const ask: ChatMessage = { role: 'assistant', content: 'Let me check.', toolCalls: [{ id: 'a', name: 'f', arguments: '{}' }, { id: 'b', name: 'f', arguments: '{}' }] };

  test('an exchange whose calls are all answered is kept as it is', () => {
    const messages: ChatMessage[] = [{ role: 'user', content: 'q' }, ask, { role: 'tool', content: '1', toolCallId: 'a' }, { role: 'tool', content: '2', toolCallId: 'b' }];
    expect(withAnsweredCallsOnly(messages)).toEqual(messages);
  });

  test('a call nobody answered is left out of its message; the message keeps its text', () => {
    const messages: ChatMessage[] = [{ role: 'user', content: 'q' }, ask, { role: 'tool', content: '1', toolCallId: 'a' }, { role: 'user', content: 'never mind' }];
    expect(withAnsweredCallsOnly(messages)).toEqual([
      { role: 'user', content: 'q' },
      { role: 'assistant', content: 'Let me check.', toolCalls: [{ id: 'a', name: 'f', arguments: '{}' }] },
      { role: 'tool', content: '1', toolCallId: 'a' },
      { role: 'user', content: 'never mind' },
    ]);
  });

  test('a result without its call, and a message left with neither text nor calls, are left out', () => {
    const silent: ChatMessage = { role: 'assistant', content: '', toolCalls: [{ id: 'c', name: 'f', arguments: '{}' }] };
    expect(withAnsweredCallsOnly([{ role: 'tool', content: 'orphan', toolCallId: 'z' }, { role: 'user', content: 'q' }, silent, { role: 'user', content: 'again' }])).toEqual([
      { role: 'user', content: 'q' },
      { role: 'user', content: 'again' },
    ]);
  });
});
