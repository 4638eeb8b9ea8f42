import { MemoryRepository } from '@medplum/fhir-router';
import type { Observation, Patient } from '@medplum/fhirtypes';
import type { ChatCompletion, ChatModel, ChatModelRequest, ChatStreamEvent } from '../llm/chat-model.ts';
import type { ResolvedModel } from '../llm/model-registry.ts';
import { loadFhirDefinitions } from '../hosts/standalone/fhir-definitions.ts';
import { FhirToolbox, withFhirTools } from './fhir-tool-loop.ts';
import { SEARCH_TOOL } from './fhir-tools.ts';

/** A model that answers from a script, one reply per call, and keeps what it was asked. */
function scriptedModel(replies: readonly ChatCompletion[]): { model: ChatModel; requests: ChatModelRequest[] } {
  const requests: ChatModelRequest[] = [];
  const next = (request: ChatModelRequest): ChatCompletion => {
    requests.push(request);
    const reply = replies[requests.length - 1];
    if (!reply) throw new Error('the script has no more replies');
    return reply;
  };
  return {
    requests,
    model: {
      provider: 'script',
      complete: async (request) => next(request),
      async *stream(request): AsyncGenerator<ChatStreamEvent> {
        const reply = next(request);
        if (reply.text) yield { type: 'text', text: reply.text };
        for (const [index, call] of (reply.toolCalls ?? []).entries()) {
          // Fragments, as OpenAI sends them: the id and name first, then the arguments in two pieces.
          yield { type: 'tool_call', index, id: call.id, name: call.name, arguments: '' };
          yield { type: 'tool_call', index, arguments: call.arguments.slice(0, 5) };
          yield { type: 'tool_call', index, arguments: call.arguments.slice(5) };
        }
        yield { type: 'finish', finishReason: reply.finishReason, usage: reply.usage };
      },
    },
  };
}

const searchObservations = (id: string): ChatCompletion => ({
  text: '',
  toolCalls: [{ id, name: SEARCH_TOOL, arguments: JSON.stringify({ resource_type: 'Observation', params: { _sort: '-date' } }) }],
  finishReason: 'tool_calls',
  usage: { promptTokens: 10, completionTokens: 2 },
});
const answer: ChatCompletion = { text: 'Glucose is 105 mg/dL.', finishReason: 'stop', usage: { promptTokens: 30, completionTokens: 5 } };

describe('the model with FHIR tools', () => {
  let repo: MemoryRepository;
  let patient: Patient & { id: string };
  let events: string[];

  beforeAll(() => loadFhirDefinitions());
  beforeEach(async () => {
    repo = new MemoryRepository();
    patient = await repo.createResource<Patient>({ resourceType: 'Patient' });
    await repo.createResource<Observation>({ resourceType: 'Observation', status: 'final', subject: { reference: `Patient/${patient.id}` }, code: { text: 'Glucose' }, valueQuantity: { value: 105, unit: 'mg/dL' } });
    events = [];
  });

  function setUp(replies: readonly ChatCompletion[], maxSteps = 4): { target: ResolvedModel; toolbox: FhirToolbox; requests: ChatModelRequest[] } {
    const { model, requests } = scriptedModel(replies);
    const toolbox = new FhirToolbox(
      { repo, patient, types: ['Observation'], options: { maxSteps, maxResults: 10, maxCharacters: 4000 } },
      async (call, result) => {
        // On record a turn of the event loop later, as a store's write is: a loop that does not wait runs ahead.
        await new Promise((resolve) => setImmediate(resolve));
        events.push(`disclosed ${call.id}: ${result.shared.length}`);
      },
      (call) => events.push(`journaled ${call.id}`)
    );
    const plain: ResolvedModel = { model, modelName: 'm', id: 'script/m', retries: { maxRetries: 0, baseDelayMs: 0, maxDelayMs: 0 }, fallbacks: [] };
    return { target: withFhirTools(plain, toolbox), toolbox, requests };
  }

  const request = { model: 'm', messages: [{ role: 'user' as const, content: 'Latest glucose?' }], maxTokens: 100, signal: new AbortController().signal };

  test('JSON: the calls run, the disclosure is on record before the model sees the result, usage adds up', async () => {
    const { target, toolbox, requests } = setUp([searchObservations('call_1'), answer]);
    const completion = await target.model.complete(request);

    expect(completion).toEqual({ text: 'Glucose is 105 mg/dL.', finishReason: 'stop', usage: { promptTokens: 40, completionTokens: 7 } });
    expect(requests).toHaveLength(2);
    expect(requests[0].tools?.map((tool) => tool.name)).toEqual(['search_patient_records', 'read_record']);
    expect(requests[0].toolChoice).toBe('auto');
    // The second step sees the call and its result, after the disclosure and the journal.
    expect(requests[1].messages.slice(1).map((message) => message.role)).toEqual(['assistant', 'tool']);
    const result = requests[1].messages[2];
    expect(result).toMatchObject({ role: 'tool', toolCallId: 'call_1' });
    expect(JSON.parse(result.content)).toMatchObject({ count: 1, records: [{ valueQuantity: { value: 105 } }] });
    expect(events).toEqual(['disclosed call_1: 1', 'journaled call_1']);
    expect(toolbox.calls).toEqual([expect.objectContaining({ id: 'call_1', name: SEARCH_TOOL, result: result.content, shared: [expect.objectContaining({ reference: expect.stringMatching(/^Observation\//) })] })]);
  });

  test('streamed: the text of every step streams, the calls do not reach the client, one finish ends it', async () => {
    const { target, requests } = setUp([{ ...searchObservations('call_1'), text: 'Let me look. ' }, answer]);
    const seen: ChatStreamEvent[] = [];
    for await (const event of target.model.stream(request)) seen.push(event);
    expect(seen).toEqual([
      { type: 'text', text: 'Let me look. ' },
      { type: 'text', text: 'Glucose is 105 mg/dL.' },
      { type: 'finish', finishReason: 'stop', usage: { promptTokens: 40, completionTokens: 7 } },
    ]);
    expect(events).toEqual(['disclosed call_1: 1', 'journaled call_1']);
    // The next step is asked with the text the model wrote before its call.
    expect(requests[1]?.messages[1]).toMatchObject({ role: 'assistant', content: 'Let me look. ' });
  });

  test('after maxSteps rounds the model is asked once more with no calls allowed; calls it still makes end the answer as length', async () => {
    // The last step's calls end it as length whatever the provider said (here `stop`).
    const { target, toolbox, requests } = setUp([searchObservations('call_1'), searchObservations('call_2'), { ...searchObservations('call_3'), finishReason: 'stop' }], 2);
    const completion = await target.model.complete(request);
    expect(requests.map((step) => step.toolChoice)).toEqual(['auto', 'auto', 'none']);
    expect(toolbox.calls.map((call) => call.id)).toEqual(['call_1', 'call_2']);
    expect(completion.finishReason).toBe('length');
    expect(completion.toolCalls).toBeUndefined();
  });

  /**
   * A toolbox whose disclosure is put on record only later (as a store's write is), and a model that notes, each
   * time it is asked, whether the tool's records were in its request and what was on record by then.
   */
  function setUpSlowRecord(replies: readonly ChatCompletion[], recordDisclosure: () => Promise<void>): { target: ResolvedModel; toolbox: FhirToolbox; seen: { carriesRecords: boolean; onRecord: string[] }[]; journaled: string[] } {
    const { model } = scriptedModel(replies);
    const seen: { carriesRecords: boolean; onRecord: string[] }[] = [];
    const journaled: string[] = [];
    const watching: ChatModel = {
      provider: model.provider,
      complete: (step) => {
        seen.push({ carriesRecords: step.messages.some((message) => message.content.includes('mg/dL')), onRecord: [...events] });
        return model.complete(step);
      },
      stream: (step) => {
        seen.push({ carriesRecords: step.messages.some((message) => message.content.includes('mg/dL')), onRecord: [...events] });
        return model.stream(step);
      },
    };
    const toolbox = new FhirToolbox({ repo, patient, types: ['Observation'], options: { maxSteps: 4, maxResults: 10, maxCharacters: 4000 } }, recordDisclosure, (call) => journaled.push(call.id));
    const plain: ResolvedModel = { model: watching, modelName: 'm', id: 'script/m', retries: { maxRetries: 0, baseDelayMs: 0, maxDelayMs: 0 }, fallbacks: [] };
    return { target: withFhirTools(plain, toolbox), toolbox, seen, journaled };
  }

  /** A disclosure the store takes a while to write: on record only when the returned promise resolves. */
  const recordedLater = async (): Promise<void> => {
    await new Promise((resolve) => setTimeout(resolve, 20));
    events.push('disclosed');
  };

  test.each([['JSON'], ['streamed']])('%s: a disclosure written later is on record before the model is given the records', async (mode) => {
    const { target, seen } = setUpSlowRecord([searchObservations('call_1'), answer], recordedLater);
    if (mode === 'JSON') {
      await target.model.complete(request);
    } else {
      for await (const event of target.model.stream(request)) void event;
    }
    expect(seen).toEqual([
      { carriesRecords: false, onRecord: [] },
      { carriesRecords: true, onRecord: ['disclosed'] },
    ]);
  });

  test.each([['JSON'], ['streamed']])('%s: a disclosure the store cannot record keeps the records from the model, and nothing of the call is kept', async (mode) => {
    const refusal = new Error('The FHIR store could not complete the operation');
    const { target, toolbox, seen, journaled } = setUpSlowRecord([searchObservations('call_1'), answer], async () => {
      await new Promise((resolve) => setTimeout(resolve, 20));
      throw refusal;
    });
    const outcome =
      mode === 'JSON'
        ? target.model.complete(request)
        : (async () => {
            for await (const event of target.model.stream(request)) void event;
          })();
    await expect(outcome).rejects.toBe(refusal);
    // Give a call that did not wait for its disclosure the time to reach the model anyway.
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(seen).toEqual([{ carriesRecords: false, onRecord: [] }]);
    expect(journaled).toEqual([]);
    expect(toolbox.calls).toEqual([]);
  });

  test('a call that shares nothing is journaled but needs no disclosure', async () => {
    const { target, toolbox } = setUp([{ text: '', toolCalls: [{ id: 'call_1', name: 'read_record', arguments: '{"reference":"Observation/nope"}' }], finishReason: 'tool_calls', usage: undefined }, answer]);
    await target.model.complete(request);
    expect(events).toEqual(['journaled call_1']);
    expect(toolbox.calls[0].shared).toEqual([]);
  });

  test('the wrapped model is the same model to the delivery steps: id, name, fallbacks, provider and its request check', () => {
    const checked: unknown[] = [];
    const { model } = scriptedModel([]);
    const fallback: ResolvedModel = { model, modelName: 'f', id: 'script/f', retries: { maxRetries: 0, baseDelayMs: 0, maxDelayMs: 0 }, fallbacks: [] };
    const plain: ResolvedModel = {
      model: { ...model, checkRequest: (shape) => void checked.push(shape) },
      modelName: 'm',
      id: 'script/m',
      retries: { maxRetries: 2, baseDelayMs: 1, maxDelayMs: 2 },
      fallbacks: [fallback],
    };
    const toolbox = new FhirToolbox({ repo, patient, types: ['Observation'], options: { maxSteps: 2, maxResults: 10, maxCharacters: 4000 } }, async () => undefined);
    const wrapped = withFhirTools(plain, toolbox);
    expect(wrapped.id).toBe('script/m');
    expect(wrapped.modelName).toBe('m');
    expect(wrapped.retries).toEqual({ maxRetries: 2, baseDelayMs: 1, maxDelayMs: 2 });
    expect(wrapped.fallbacks).toEqual([fallback]);
    expect(wrapped.model.provider).toBe('script');
    wrapped.model.checkRequest?.({ messages: request.messages, maxTokens: 5 });
    expect(checked).toEqual([{ messages: request.messages, maxTokens: 5 }]);
    // A model without a check: the wrapped one has nothing to refuse either.
    expect(() => withFhirTools({ ...plain, model }, toolbox).model.checkRequest?.({ messages: request.messages, maxTokens: 5 })).not.toThrow();
  });

  test("each step's request is the client's, with the conversation so far and the tools", async () => {
    const { target, requests } = setUp([searchObservations('call_1'), answer]);
    const asked = { ...request, temperature: 0.3, options: { seed: 7 } };
    await target.model.complete(asked);
    for (const step of requests) {
      expect(step).toMatchObject({ model: 'm', maxTokens: 100, temperature: 0.3, options: { seed: 7 }, signal: asked.signal });
    }
    expect(requests[0].messages).toEqual(request.messages);
  });

  test('streamed: a call made in fragments is run once with its id, name and joined arguments', async () => {
    const { target, toolbox, requests } = setUp([searchObservations('call_1'), answer]);
    for await (const event of target.model.stream(request)) void event;
    expect(toolbox.calls.map(({ id, name, arguments: args }) => ({ id, name, args }))).toEqual([
      { id: 'call_1', name: SEARCH_TOOL, args: JSON.stringify({ resource_type: 'Observation', params: { _sort: '-date' } }) },
    ]);
    expect(requests[1].messages[1]).toEqual({ role: 'assistant', content: '', toolCalls: [{ id: 'call_1', name: SEARCH_TOOL, arguments: JSON.stringify({ resource_type: 'Observation', params: { _sort: '-date' } }) }] });
    expect(requests[1].messages[2]).toMatchObject({ role: 'tool', toolCallId: 'call_1' });
    expect(requests.map((step) => step.toolChoice)).toEqual(['auto', 'auto']);
  });

  test('streamed: after maxSteps rounds the last step allows no calls, and calls it still makes end the answer as length', async () => {
    const { target, toolbox, requests } = setUp([searchObservations('call_1'), searchObservations('call_2')], 1);
    const seen: ChatStreamEvent[] = [];
    for await (const event of target.model.stream(request)) seen.push(event);
    expect(requests.map((step) => step.toolChoice)).toEqual(['auto', 'none']);
    expect(toolbox.calls.map((call) => call.id)).toEqual(['call_1']);
    expect(seen).toEqual([{ type: 'finish', finishReason: 'length', usage: { promptTokens: 20, completionTokens: 4 } }]);
  });

  test('a model that says it called tools but made no call: the answer ends as length, not as a call the client never gets', async () => {
    const { target, toolbox } = setUp([{ text: 'Partial.', finishReason: 'tool_calls', usage: undefined }]);
    const completion = await target.model.complete(request);
    expect(completion).toEqual({ text: 'Partial.', finishReason: 'length', usage: undefined });
    expect(toolbox.calls).toEqual([]);
  });

  test('usage: a step without any leaves the others; no step with usage, none', async () => {
    const some = setUp([{ ...searchObservations('call_1'), usage: undefined }, answer]);
    expect((await some.target.model.complete(request)).usage).toEqual({ promptTokens: 30, completionTokens: 5 });
    const none = setUp([{ ...searchObservations('call_1'), usage: undefined }, { ...answer, usage: undefined }]);
    expect((await none.target.model.complete(request)).usage).toBeUndefined();
    const streamed = setUp([searchObservations('call_1'), { ...answer, usage: undefined }]);
    const seen: ChatStreamEvent[] = [];
    for await (const event of streamed.target.model.stream(request)) seen.push(event);
    expect(seen.at(-1)).toEqual({ type: 'finish', finishReason: 'stop', usage: { promptTokens: 10, completionTokens: 2 } });
  });

  test("log probabilities, when asked for, are every step's in order; not asked for, none", async () => {
    const token = (text: string) => ({ token: text, logprob: -0.1, bytes: null, topLogprobs: [] });
    const replies = [{ ...searchObservations('call_1'), text: 'Looking.', logprobs: [token('Looking.')] }, { ...answer, logprobs: [token('Glucose'), token(' is 105')] }];
    const asked = setUp(replies);
    expect((await asked.target.model.complete({ ...request, options: { logprobs: { top: 0 } } })).logprobs).toEqual([token('Looking.'), token('Glucose'), token(' is 105')]);
    const notAsked = setUp(replies);
    expect(await notAsked.target.model.complete(request)).not.toHaveProperty('logprobs');
  });

  test('streamed: a reply cut by its token limit ends as length; a call at a later index alone is run once', async () => {
    const { model, requests } = scriptedModel([]);
    let step = 0;
    const cut: ChatModel = {
      provider: model.provider,
      complete: model.complete,
      async *stream(asked): AsyncGenerator<ChatStreamEvent> {
        requests.push(asked);
        step += 1;
        if (step === 1) {
          // Only the call at index 1 (a provider that numbers from its own count).
          yield { type: 'tool_call', index: 1, id: 'call_9', name: SEARCH_TOOL, arguments: JSON.stringify({ resource_type: 'Observation' }) };
          yield { type: 'finish', finishReason: 'tool_calls', usage: undefined };
          return;
        }
        yield { type: 'text', text: 'Glucose is' };
        yield { type: 'finish', finishReason: 'length', usage: undefined };
      },
    };
    const toolbox = new FhirToolbox({ repo, patient, types: ['Observation'], options: { maxSteps: 4, maxResults: 10, maxCharacters: 4000 } }, async () => undefined);
    const plain: ResolvedModel = { model: cut, modelName: 'm', id: 'script/m', retries: { maxRetries: 0, baseDelayMs: 0, maxDelayMs: 0 }, fallbacks: [] };
    const seen: ChatStreamEvent[] = [];
    for await (const event of withFhirTools(plain, toolbox).model.stream(request)) seen.push(event);
    expect(toolbox.calls.map((call) => call.id)).toEqual(['call_9']);
    expect(requests[1]?.messages.slice(1).map((message) => message.role)).toStrictEqual(['assistant', 'tool']);
    expect(seen).toEqual([
      { type: 'text', text: 'Glucose is' },
      { type: 'finish', finishReason: 'length', usage: undefined },
    ]);
  });

  test('log probabilities asked for, and a step without them: only the steps that have some', async () => {
    const token = (text: string) => ({ token: text, logprob: -0.1, bytes: null, topLogprobs: [] });
    const { target } = setUp([searchObservations('call_1'), { ...answer, logprobs: [token('Glucose')] }]);
    const completion = await target.model.complete({ ...request, options: { logprobs: { top: 0 } } });
    expect(completion.logprobs).toStrictEqual([token('Glucose')]);
  });
});
