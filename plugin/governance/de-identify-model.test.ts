import type { ChatModel, ChatModelRequest, ChatStreamEvent } from '../llm/chat-model.ts';
import { deIdentifiedModel, ModelTranscript, type ToolCallRule } from './de-identify-model.ts';
import { Pseudonymizer } from './de-identify-text.ts';
import { IDENTIFIED_PATIENT, IDENTIFYING_STRINGS, TURN_TIME } from './de-identify-text.test.ts';

/** A turn with the client's own tools, the default: their calls' arguments stay pseudonymised. */
const CLIENT_TOOLS: ToolCallRule = { clientTools: true, reIdentifyClientArguments: false };

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
    { role: 'assistant', content: 'Calling', toolCalls: [{ id: 'call_123456789', name: 'lookup_MariaLopez', arguments: '{"name":"Maria Lopez","ssn":"123-45-6789"}' }] },
    { role: 'tool', toolCallId: 'call_123456789', content: '{"contact":"Carlos Ruiz 555-010-0777","photo":[{"data":"iVBORw0KGgo="}]}' },
  ],
  tools: [
    { name: 'lookup_MariaLopez', description: 'Looks up Maria Lopez', parameters: { type: 'object', properties: { name: { type: 'string', default: 'Lopez' }, maria_lopez_ssn: { type: 'string' } } } },
    { name: 'web_search', parameters: { type: 'object', properties: { query: { type: 'string' } } } },
  ],
  toolChoice: { name: 'lookup_MariaLopez' },
  options: {
    stop: ['Maria'],
    endUser: { user: 'maria.lopez@example.org' },
    metadata: { about: 'Maria Lopez', 'MariaLopez-19580314': 'x' },
    responseFormat: { type: 'json_schema', name: 'summary_MariaLopez', schema: { type: 'object', properties: { maria_lopez: { type: 'string', description: 'Always "Maria Lopez"' } } } },
  },
});

describe('deIdentifiedModel', () => {
  const pseudonyms = new Pseudonymizer(IDENTIFIED_PATIENT, -100, TURN_TIME);
  const answer = 'Ms. [FAMILY-2] was last seen 2023-09-27; ask [GIVEN-1].';
  // The model calls the request's tool by the name it was given, with pseudonyms in its arguments.
  const call = { id: 'k', name: 'lookup_GIVEN-1FAMILY-2', arguments: '{"about":"[GIVEN-1] [FAMILY-2]","on":"2023-09-27"}' };

  test('nothing identifying reaches the model, in any message, tool or field, name, key or id; the answer comes back re-identified', async () => {
    const model = scriptedModel(answer, [call]);
    const transcript = new ModelTranscript();
    const completion = await deIdentifiedModel(model, pseudonyms, transcript, { toolCalls: { clientTools: false, reIdentifyClientArguments: false } }).complete(request());

    const sent = JSON.stringify({ ...model.received[0], signal: undefined });
    for (const identifying of [...IDENTIFYING_STRINGS, 'iVBORw0KGgo', '2024-01-05']) {
      expect([identifying, sent.toLowerCase().includes(identifying.toLowerCase())]).toEqual([identifying, false]);
    }
    // A participant name that is no identifier stays; one that is goes.
    expect(model.received[0].messages.map((message) => ('name' in message ? message.name : undefined))).toEqual([undefined, 'ward_app', undefined, undefined, undefined]);
    // Each name, key and id in the form its field takes, the same wherever it recurs.
    const sentRequest = model.received[0];
    expect(sentRequest.tools?.map((tool) => tool.name)).toEqual(['lookup_GIVEN-1FAMILY-2', 'web_search']);
    expect(sentRequest.toolChoice).toEqual({ name: 'lookup_GIVEN-1FAMILY-2' });
    expect(sentRequest.messages[3]).toMatchObject({ toolCalls: [{ id: 'call_ID-2', name: 'lookup_GIVEN-1FAMILY-2' }] });
    expect(sentRequest.messages[4]).toMatchObject({ toolCallId: 'call_ID-2' });
    expect(Object.keys(sentRequest.tools?.[0].parameters.properties as object)).toEqual(['name', '[given-1]_[family-2]_ssn']);
    expect(Object.keys(sentRequest.options?.metadata ?? {})).toEqual(['about', '[GIVEN-1][FAMILY-2]-[age 68]']);
    expect(sentRequest.options?.responseFormat).toMatchObject({ name: 'summary_GIVEN-1FAMILY-2', schema: { properties: { '[given-1]_[family-2]': { type: 'string' } } } });
    // Back: the text re-identified, the call named as the request named it, its arguments (a FHIR tool's) re-identified.
    expect(completion.text).toBe('Ms. López was last seen 2024-01-05; ask María.');
    expect(completion.toolCalls?.[0].name).toBe('lookup_MariaLopez');
    expect(JSON.parse(completion.toolCalls?.[0].arguments ?? '')).toEqual({ about: 'María López', on: '2024-01-05' });
    expect(transcript.text).toBe(answer);
  });

  test("a schema beside json_object (instructor's JSON_SCHEMA mode) goes the same way: its keys and strings de-identified", async () => {
    const model = scriptedModel('{}');
    const jsonMode = { type: 'json_object' as const, schema: { type: 'object', properties: { maria_lopez_mrn: { type: 'string', description: 'MRN-004512 of María López' } }, required: ['maria_lopez_mrn'] } };
    await deIdentifiedModel(model, pseudonyms, new ModelTranscript(), { toolCalls: CLIENT_TOOLS }).complete({ ...request(), options: { responseFormat: jsonMode } });

    const sent = model.received[0].options?.responseFormat;
    for (const identifying of IDENTIFYING_STRINGS) {
      expect([identifying, JSON.stringify(sent).toLowerCase().includes(identifying.toLowerCase())]).toEqual([identifying, false]);
    }
    expect(sent).toEqual({ type: 'json_object', schema: { type: 'object', properties: { '[given-1]_[family-2]_mrn': { type: 'string', description: '[ID-1] of [GIVEN-1] [FAMILY-2]' } }, required: ['[given-1]_[family-2]_mrn'] } });
  });

  test("a call of the client's own tool comes back with the model's pseudonyms, not the patient's identifiers, unless the project allows it", async () => {
    const search = { id: 's', name: 'web_search', arguments: '{"query":"[ID-2] [PHONE-1] [ADDRESS-1] [age 68]"}' };
    const answered = async (rule: ToolCallRule): Promise<string | undefined> =>
      (await deIdentifiedModel(scriptedModel('', [search]), pseudonyms, new ModelTranscript(), { toolCalls: rule }).complete(request())).toolCalls?.[0].arguments;
    expect(await answered(CLIENT_TOOLS)).toBe(search.arguments);
    expect(await answered({ clientTools: true, reIdentifyClientArguments: true })).toBe('{"query":"123-45-6789 +1 (555) 010-0199 12 Elm Street 1958-03-14"}');
    // A call of a tool the request did not offer gets nothing put back, whatever the rule.
    const unoffered = { ...search, name: 'exfiltrate' };
    const completion = await deIdentifiedModel(scriptedModel('', [unoffered]), pseudonyms, new ModelTranscript(), { toolCalls: { clientTools: false, reIdentifyClientArguments: true } }).complete(request());
    expect(completion.toolCalls).toEqual([unoffered]);
  });

  test('two names sent alike are told apart, and each call maps back to the tool the model was offered', async () => {
    const tools = [{ name: 'lookup_123456789', parameters: {} }, { name: 'lookup_123-45-6789', parameters: {} }];
    const model = scriptedModel('', [{ id: 'a', name: 'lookup_ID-2_2', arguments: '{}' }]);
    const completion = await deIdentifiedModel(model, pseudonyms, new ModelTranscript(), { toolCalls: CLIENT_TOOLS }).complete({ ...request(), tools, toolChoice: { name: 'lookup_123-45-6789' } });
    expect(model.received[0].tools?.map((tool) => tool.name)).toEqual(['lookup_ID-2', 'lookup_ID-2_2']);
    expect(model.received[0].toolChoice).toEqual({ name: 'lookup_ID-2_2' });
    expect(completion.toolCalls?.[0].name).toBe('lookup_123-45-6789');
  });

  test('a stream comes back re-identified, its calls whole after the text, named as the request named them', async () => {
    const model = scriptedModel(answer, [call]);
    const transcript = new ModelTranscript();
    const events: ChatStreamEvent[] = [];
    for await (const event of deIdentifiedModel(model, pseudonyms, transcript, { toolCalls: CLIENT_TOOLS }).stream(request())) {
      events.push(event);
    }
    const text = events.flatMap((event) => (event.type === 'text' ? [event.text] : [])).join('');
    expect(text).toBe('Ms. López was last seen 2024-01-05; ask María.');
    // The client's tool: its arguments as the model wrote them.
    expect(events.filter((event) => event.type === 'tool_call')).toEqual([{ type: 'tool_call', index: 0, id: 'k', name: 'lookup_MariaLopez', arguments: call.arguments }]);
    expect(events.at(-1)?.type).toBe('finish');
    expect(transcript.text).toBe(answer);
  });
});

describe('deIdentifiedModel: the edges of a request and a stream', () => {
  const pseudonyms = new Pseudonymizer(IDENTIFIED_PATIENT, -100, TURN_TIME);
  const events = async (stream: AsyncIterable<ChatStreamEvent>): Promise<ChatStreamEvent[]> => {
    const seen: ChatStreamEvent[] = [];
    for await (const event of stream) {
      seen.push(event);
    }
    return seen;
  };

  test("the provider's own check of a request still runs, on the provider's model, and a model without one gets none", () => {
    const checked: string[] = [];
    const model: ChatModel = {
      ...scriptedModel(''),
      checkRequest(this: ChatModel) {
        checked.push(this.provider);
        throw new Error('temperature is not supported');
      },
    };
    const wrapped = deIdentifiedModel(model, pseudonyms, new ModelTranscript(), { toolCalls: CLIENT_TOOLS });
    expect(() => wrapped.checkRequest?.(request())).toThrow('temperature is not supported');
    expect(checked).toEqual(['script']);
    expect(deIdentifiedModel(scriptedModel(''), pseudonyms, new ModelTranscript(), { toolCalls: CLIENT_TOOLS }).checkRequest).toBeUndefined();
  });

  test('onSend is told before each request goes out, whole or streamed', async () => {
    const order: string[] = [];
    const model = scriptedModel('ok');
    const logged: ChatModel = { ...model, complete: (sent) => (order.push('complete'), model.complete(sent)), stream: (sent) => (order.push('stream'), model.stream(sent)) };
    const wrapped = deIdentifiedModel(logged, pseudonyms, new ModelTranscript(), { toolCalls: CLIENT_TOOLS, onSend: () => order.push('sent') });
    await wrapped.complete(request());
    await events(wrapped.stream(request()));
    expect(order).toEqual(['sent', 'complete', 'sent', 'stream']);
  });

  test("a tool choice of a kind goes as it is; one naming a tool the request does not offer goes de-identified as a name", async () => {
    for (const toolChoice of ['auto', 'none', 'required'] as const) {
      const model = scriptedModel('');
      await deIdentifiedModel(model, pseudonyms, new ModelTranscript(), { toolCalls: CLIENT_TOOLS }).complete({ ...request(), toolChoice });
      expect(model.received[0].toolChoice).toBe(toolChoice);
    }
    const model = scriptedModel('');
    await deIdentifiedModel(model, pseudonyms, new ModelTranscript(), { toolCalls: CLIENT_TOOLS }).complete({ ...request(), tools: undefined, toolChoice: { name: 'find_MariaLopez' } });
    expect(model.received[0].toolChoice).toEqual({ name: 'find_GIVEN-1FAMILY-2' });
  });

  test('two long names sent alike are told apart within the 64 characters a function name may have', async () => {
    const long = `lookup_${'x'.repeat(60)}_`;
    const tools = [{ name: `${long}123456789`, parameters: {} }, { name: `${long}123-45-6789`, parameters: {} }];
    const model = scriptedModel('');
    await deIdentifiedModel(model, pseudonyms, new ModelTranscript(), { toolCalls: CLIENT_TOOLS }).complete({ ...request(), tools, toolChoice: undefined });
    const names = model.received[0].tools?.map((tool) => tool.name) ?? [];
    expect(new Set(names).size).toBe(2);
    for (const name of names) {
      expect(name.length).toBeLessThanOrEqual(64);
    }
  });

  test('a message without parts or tool calls is sent without them', async () => {
    const model = scriptedModel('');
    await deIdentifiedModel(model, pseudonyms, new ModelTranscript(), { toolCalls: CLIENT_TOOLS }).complete({
      ...request(),
      messages: [
        { role: 'user', content: 'How is Maria?' },
        { role: 'assistant', content: 'Well.' },
      ],
    });
    expect(model.received[0].messages).toEqual([
      { role: 'user', content: 'How is [GIVEN-1]?' },
      { role: 'assistant', content: 'Well.' },
    ]);
  });

  test('in a stream, calls are gathered by their index, wherever it starts, each with the first id and name it was given', async () => {
    const model: ChatModel = {
      provider: 'script',
      complete: () => Promise.reject(new Error('not used')),
      stream: async function* (): AsyncGenerator<ChatStreamEvent> {
        yield { type: 'tool_call', index: 1, id: 'b', name: 'web_search', arguments: '{"query":' };
        yield { type: 'tool_call', index: 1, id: '', name: '', arguments: '"x"}' };
        yield { type: 'tool_call', index: 3, id: 'd', name: 'web_search', arguments: '{}' };
        yield { type: 'finish', finishReason: 'tool_calls', usage: undefined };
      },
    };
    const seen = await events(deIdentifiedModel(model, pseudonyms, new ModelTranscript(), { toolCalls: CLIENT_TOOLS }).stream(request()));
    expect(seen).toEqual([
      { type: 'tool_call', index: 1, id: 'b', name: 'web_search', arguments: '{"query":"x"}' },
      { type: 'tool_call', index: 3, id: 'd', name: 'web_search', arguments: '{}' },
      { type: 'finish', finishReason: 'tool_calls', usage: undefined },
    ]);
  });

  test('a stream that fails hands on the text it held, re-identified, before the failure; not once the caller has given up', async () => {
    const failing = (controller: AbortController): ChatModel => ({
      provider: 'script',
      complete: () => Promise.reject(new Error('not used')),
      stream: async function* (): AsyncGenerator<ChatStreamEvent> {
        // The date at the end is held: more of it could follow.
        yield { type: 'text', text: 'Last seen 2023-09-27' };
        controller.abort();
        throw new Error('connection lost');
      },
    });
    const read = async (controller: AbortController, abortOnFailure: boolean): Promise<{ text: string; error: unknown }> => {
      const signal = abortOnFailure ? controller.signal : new AbortController().signal;
      let text = '';
      try {
        for await (const event of deIdentifiedModel(failing(controller), pseudonyms, new ModelTranscript(), { toolCalls: CLIENT_TOOLS }).stream({ ...request(), signal })) {
          text += event.type === 'text' ? event.text : '';
        }
      } catch (error) {
        return { text, error };
      }
      return { text, error: undefined };
    };
    expect(await read(new AbortController(), false)).toEqual({ text: 'Last seen 2024-01-05', error: new Error('connection lost') });
    expect(await read(new AbortController(), true)).toEqual({ text: 'Last seen ', error: new Error('connection lost') });
  });
});

describe('deIdentifiedModel: what is sent in parts, held to the end, or put back into JSON', () => {
  const pseudonyms = new Pseudonymizer(IDENTIFIED_PATIENT, -100, TURN_TIME);
  const streamed = async (model: ChatModel): Promise<ChatStreamEvent[]> => {
    const seen: ChatStreamEvent[] = [];
    for await (const event of deIdentifiedModel(model, pseudonyms, new ModelTranscript(), { toolCalls: CLIENT_TOOLS }).stream(request())) {
      seen.push(event);
    }
    return seen;
  };

  test("a message's parts are sent de-identified, and still make up the message sent", async () => {
    const model = scriptedModel('');
    await deIdentifiedModel(model, pseudonyms, new ModelTranscript(), { toolCalls: CLIENT_TOOLS }).complete(request());
    const user = model.received[0].messages[2];
    const parts = user.role === 'user' ? user.parts : undefined;
    expect(parts).toHaveLength(2);
    expect(parts?.join('')).toBe(user.content);
    expect(parts?.join('')).not.toContain('Maria');
  });

  test('text held at the end of a stream (a date that could go on) comes out before the finish, and no fragment is empty', async () => {
    const events = await streamed(scriptedModel('Ms. [FAMILY-2] was last seen 2023-09-27'));
    expect(events.at(-1)?.type).toBe('finish');
    const texts = events.flatMap((event) => (event.type === 'text' ? [event.text] : []));
    expect(texts.join('')).toBe('Ms. López was last seen 2024-01-05');
    expect(texts.filter((text) => text === '')).toEqual([]);
  });

  test("a call whose id and name come after its first fragment keeps them", async () => {
    const model: ChatModel = {
      provider: 'script',
      complete: () => Promise.reject(new Error('not used')),
      stream: async function* (): AsyncGenerator<ChatStreamEvent> {
        yield { type: 'tool_call', index: 0, arguments: '{' };
        yield { type: 'tool_call', index: 0, id: 'late', name: 'web_search', arguments: '}' };
        yield { type: 'finish', finishReason: 'tool_calls', usage: undefined };
      },
    };
    expect((await streamed(model)).filter((event) => event.type === 'tool_call')).toEqual([{ type: 'tool_call', index: 0, id: 'late', name: 'web_search', arguments: '{}' }]);
  });

  test('arguments put back stay JSON when what is put back holds a new line or a quote', async () => {
    const patient = { ...IDENTIFIED_PATIENT, name: [{ given: ['Ana'], family: 'Lo"pez' }], address: [{ text: 'Flat 4\nRose Court' }] };
    const quoting = new Pseudonymizer(patient, -100, TURN_TIME);
    const held = { family: 'Lo"pez', address: 'Flat 4\nRose Court' };
    const sent = { family: quoting.deIdentify(held.family), address: quoting.deIdentify(held.address) };
    expect(JSON.stringify(sent)).not.toMatch(/pez|Rose/);
    const model = scriptedModel('', [{ id: 'k', name: 'lookup', arguments: JSON.stringify(sent) }]);
    const tools = [{ name: 'lookup', parameters: {} }];
    const completion = await deIdentifiedModel(model, quoting, new ModelTranscript(), { toolCalls: { clientTools: false, reIdentifyClientArguments: false } }).complete({ ...request(), tools, toolChoice: undefined });
    expect(JSON.parse(completion.toolCalls?.[0].arguments ?? '')).toEqual(held);
  });
});
