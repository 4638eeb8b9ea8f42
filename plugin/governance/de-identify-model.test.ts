import type { ChatModel, ChatModelRequest, ChatStreamEvent } from '../llm/chat-model.ts';
import { deIdentifiedModel, ModelTranscript } from './de-identify-model.ts';
import { Pseudonymizer } from './de-identify-text.ts';
import { IDENTIFIED_PATIENT, IDENTIFYING_STRINGS } from './de-identify-text.test.ts';

/** A model that answers with a fixed text (and calls), and keeps what it was sent. */
function scriptedModel(text: string, calls: { id: string; name: string; arguments: string }[] = []): ChatModel & { received: ChatModelRequest[] } {
  const received: ChatModelRequest[] = [];
  return {
    provider: 'script',
    received,
    complete: async (request) => {
      received.push(request);
      return { text, toolCalls: calls, finishReason: 'stop', usage: { promptTokens: 1, completionTokens: 1 } };
    },
    stream: async function* (request): AsyncGenerator<ChatStreamEvent> {
      received.push(request);
      for (let start = 0; start < text.length; start += 3) {
        yield { type: 'text', text: text.slice(start, start + 3) };
      }
      for (const [index, call] of calls.entries()) {
        yield { type: 'tool_call', index, id: call.id, name: call.name, arguments: call.arguments.slice(0, 5) };
        yield { type: 'tool_call', index, arguments: call.arguments.slice(5) };
      }
      yield { type: 'finish', finishReason: 'stop', usage: undefined };
    },
  };
}

const request = (): ChatModelRequest => ({
  model: 'm',
  maxTokens: 100,
  signal: new AbortController().signal,
  messages: [
    { role: 'system', content: 'Chart: María López-García, born 1958-03-14, MRN-004512, phone +1 (555) 010-0199, 12 Elm Street, Springfield' },
    { role: 'developer', content: 'Address her as Ms. Lopez.', name: 'ward_app' },
    { role: 'user', content: 'How is Maria Lopez since 2024-01-05? Her email is maria.lopez@example.org.', parts: ['How is Maria Lopez since 2024-01-05?', ' Her email is maria.lopez@example.org.'], name: 'maria_lopez' },
    { role: 'assistant', content: 'Calling', toolCalls: [{ id: 'c1', name: 'lookup', arguments: '{"name":"Maria Lopez","ssn":"123-45-6789"}' }] },
    { role: 'tool', toolCallId: 'c1', content: '{"contact":"Carlos Ruiz 555-010-0777","photo":[{"data":"iVBORw0KGgo="}]}' },
  ],
  tools: [{ name: 'lookup', description: 'Looks up Maria Lopez', parameters: { type: 'object', properties: { name: { type: 'string', default: 'Lopez' } } } }],
  options: {
    stop: ['Maria'],
    endUser: { user: 'maria.lopez@example.org' },
    metadata: { about: 'Maria Lopez' },
    responseFormat: { type: 'json_schema', name: 'summary', schema: { type: 'object', properties: { patient: { type: 'string', description: 'Always "Maria Lopez"' } } } },
  },
});

describe('deIdentifiedModel', () => {
  const pseudonyms = new Pseudonymizer(IDENTIFIED_PATIENT, -100);
  const answer = 'Ms. [FAMILY-2] was last seen 2023-09-27; ask [GIVEN-1].';
  const call = { id: 'k', name: 'note', arguments: '{"about":"[GIVEN-1] [FAMILY-2]","on":"2023-09-27"}' };

  test('nothing identifying reaches the model, in any message, tool or field; the answer comes back re-identified', async () => {
    const model = scriptedModel(answer, [call]);
    const transcript = new ModelTranscript();
    const completion = await deIdentifiedModel(model, pseudonyms, transcript).complete(request());

    const sent = JSON.stringify({ ...model.received[0], signal: undefined });
    for (const identifying of [...IDENTIFYING_STRINGS, 'iVBORw0KGgo', '2024-01-05']) {
      expect([identifying, sent.toLowerCase().includes(identifying.toLowerCase())]).toEqual([identifying, false]);
    }
    // A participant name that is no identifier stays; one that is goes.
    expect(model.received[0].messages.map((message) => ('name' in message ? message.name : undefined))).toEqual([undefined, 'ward_app', undefined, undefined, undefined]);
    expect(completion.text).toBe('Ms. López was last seen 2024-01-05; ask María.');
    expect(JSON.parse(completion.toolCalls?.[0].arguments ?? '')).toEqual({ about: 'María López', on: '2024-01-05' });
    expect(transcript.text).toBe(answer);
  });

  test('a stream comes back re-identified, its calls whole after the text', async () => {
    const model = scriptedModel(answer, [call]);
    const transcript = new ModelTranscript();
    const events: ChatStreamEvent[] = [];
    for await (const event of deIdentifiedModel(model, pseudonyms, transcript).stream(request())) {
      events.push(event);
    }
    const text = events.flatMap((event) => (event.type === 'text' ? [event.text] : [])).join('');
    expect(text).toBe('Ms. López was last seen 2024-01-05; ask María.');
    expect(events.filter((event) => event.type === 'tool_call')).toEqual([{ type: 'tool_call', index: 0, id: 'k', name: 'note', arguments: '{"about":"María López","on":"2024-01-05"}' }]);
    expect(events.at(-1)?.type).toBe('finish');
    expect(transcript.text).toBe(answer);
  });
});
