import type { Communication, Extension } from '@medplum/fhirtypes';
import { AppError } from '../errors.ts';
import type { ChatUsage } from '../llm/chat-model.ts';
import { estimatePromptTokens, estimateTokensOfLength } from '../governance/usage-estimate.ts';
import { Pseudonymizer } from '../governance/de-identify-text.ts';
import { TurnDeIdentification } from '../governance/patient-data-record.ts';
import { answerFieldsOf, recordFailure, recordReply, type ChatTurn } from './chat-turn.ts';
import { ERROR_CODE_SYSTEM, EXTENSION } from './fhir-vocabulary.ts';
import { EXCHANGE_DIGEST_SYSTEM, replyDigest, THREAD_DIGEST_SYSTEM, turnExchangeDigest, type ThreadScope } from './thread-digest.ts';

const SCOPE: ThreadScope = ['project-1', 'Practitioner/alice'];
const MESSAGES = [
  { role: 'system' as const, content: 'Be brief.' },
  { role: 'user' as const, content: 'Latest glucose?' },
];

interface Recorded {
  readonly projectId: string;
  readonly resource: Communication & { id: string };
}

/** A turn as the chat steps build it, with its records and budget watched. */
function turnWith(overrides: Partial<ChatTurn> = {}): { turn: ChatTurn; recorded: Recorded[]; settled: { modelId: string; usage: ChatUsage | undefined; at: Date }[] } {
  const recorded: Recorded[] = [];
  const settled: { modelId: string; usage: ChatUsage | undefined; at: Date }[] = [];
  const turn = {
    projectId: 'project-1',
    records: { record: async (projectId: string, resource: Communication & { id: string }) => void recorded.push({ projectId, resource }) },
    chat: { messages: MESSAGES, includeUsage: true },
    target: { id: 'openai/gpt-4o' },
    parties: { categorySystem: 'urn:c', caller: { reference: 'Practitioner/alice' }, agent: { reference: 'Device/agent' }, subject: { reference: 'Patient/p1' } },
    rootId: 'root-1',
    promptId: 'prompt-1',
    replyId: 'reply-1',
    history: { messages: [{ role: 'user', content: 'earlier' }, { role: 'assistant', content: 'answer' }], oldestId: 'c-1', instructions: [{ role: 'system', content: 'x' }], instructionsId: 'c-0' },
    completionId: 'chatcmpl-1',
    created: 1_700_000_000,
    modelRequest: { model: 'gpt-4o', messages: MESSAGES, maxTokens: 100 },
    controller: new AbortController(),
    budget: {
      settle: (modelId: string, usage: ChatUsage | undefined, at: Date) => {
        settled.push({ modelId, usage, at });
        return usage ? 1_000 : undefined;
      },
    },
    threadScope: SCOPE,
    ...overrides,
  } as unknown as ChatTurn;
  return { turn, recorded, settled };
}

function extension(resource: Communication, url: string): Extension | undefined {
  return resource.extension?.find((candidate) => candidate.url === url);
}

function part(parent: Extension | undefined, url: string): Extension | undefined {
  return parent?.extension?.find((candidate) => candidate.url === url);
}

describe('recordReply (step 6)', () => {
  test("a completed reply: in the turn's project, with the turn's ids, model, history, usage, its cost and digests", async () => {
    const { turn, recorded, settled } = turnWith();
    const before = Date.now();
    await recordReply(turn, { status: 'completed', text: 'Glucose is 105 mg/dL.', usage: { promptTokens: 20, completionTokens: 6 }, finishReason: 'stop' });

    expect(recorded).toHaveLength(1);
    const [{ projectId, resource }] = recorded as [Recorded];
    expect(projectId).toBe('project-1');
    expect(resource).toMatchObject({
      id: 'reply-1',
      status: 'completed',
      partOf: [{ reference: 'Communication/root-1' }],
      inResponseTo: [{ reference: 'Communication/prompt-1' }],
      payload: [{ contentString: 'Glucose is 105 mg/dL.' }],
      subject: { reference: 'Patient/p1' },
    });
    expect(extension(resource, EXTENSION.model)?.valueString).toBe('openai/gpt-4o');
    expect(extension(resource, EXTENSION.finishReason)?.valueCode).toBe('stop');
    expect(extension(resource, EXTENSION.history)?.extension).toEqual([
      { url: 'count', valueInteger: 3 },
      { url: 'oldest', valueReference: { reference: 'Communication/c-1' } },
      { url: 'instructions', valueReference: { reference: 'Communication/c-0' } },
    ]);
    const usage = extension(resource, EXTENSION.usage);
    expect(part(usage, 'prompt-tokens')?.valueInteger).toBe(20);
    expect(part(usage, 'completion-tokens')?.valueInteger).toBe(6);
    expect(part(usage, 'cost')?.valueMoney).toEqual({ value: 0.000001, currency: 'USD' });
    expect(part(usage, 'estimated')).toBeUndefined();

    // The budgets are settled once, from the usage recorded, at the reply's `sent`.
    expect(settled).toEqual([{ modelId: 'openai/gpt-4o', usage: { promptTokens: 20, completionTokens: 6 }, at: new Date(resource.sent ?? '') }]);
    expect(Date.parse(resource.sent ?? '')).toBeGreaterThanOrEqual(before);

    expect(resource.identifier).toEqual([
      { system: THREAD_DIGEST_SYSTEM, value: replyDigest(SCOPE, MESSAGES, { text: 'Glucose is 105 mg/dL.' }) },
      { system: EXCHANGE_DIGEST_SYSTEM, value: turnExchangeDigest(SCOPE, MESSAGES, 'Glucose is 105 mg/dL.') },
    ]);
  });

  test("the model's calls for the client are on record, and in the thread's digest", async () => {
    const { turn, recorded } = turnWith();
    const toolCalls = [{ id: 'call_1', name: 'get_weather', arguments: '{"city":"Paris"}' }];
    await recordReply(turn, { status: 'completed', text: '', toolCalls, finishReason: 'tool_calls' });
    const [{ resource }] = recorded as [Recorded];
    expect(extension(resource, EXTENSION.toolCall)?.extension).toEqual([
      { url: 'id', valueString: 'call_1' },
      { url: 'name', valueString: 'get_weather' },
      { url: 'arguments', valueString: '{"city":"Paris"}' },
    ]);
    expect(resource.identifier?.[0]).toEqual({ system: THREAD_DIGEST_SYSTEM, value: replyDigest(SCOPE, MESSAGES, { text: '', toolCalls }) });
  });

  test('no digests for a reply that did not complete, for a turn without a scope; no exchange digest for a side request', async () => {
    for (const status of ['stopped', 'not-done'] as const) {
      const { turn, recorded } = turnWith();
      await recordReply(turn, { status, text: 'Glucose', usage: { promptTokens: 1, completionTokens: 1 } });
      expect(recorded[0]?.resource.identifier).toBeUndefined();
    }
    const unscoped = turnWith({ threadScope: undefined });
    await recordReply(unscoped.turn, { status: 'completed', text: 'Fine.' });
    expect(unscoped.recorded[0]?.resource.identifier).toBeUndefined();

    const side = turnWith({ sideRequest: true });
    await recordReply(side.turn, { status: 'completed', text: 'A title' });
    expect(side.recorded[0]?.resource.identifier?.map((identifier) => identifier.system)).toEqual([THREAD_DIGEST_SYSTEM]);
    expect(side.recorded[0]?.resource.category?.[1]?.coding?.[0]?.code).toBe('ai-side-request');
  });

  test('a stopped reply without usage from the provider is charged an estimate: the prompt, and what was generated', async () => {
    const { turn, recorded, settled } = turnWith();
    await recordReply(turn, { status: 'stopped', text: 'Gluc', reason: 'The client left.', generatedCharacters: 400 });
    const expected = { promptTokens: estimatePromptTokens(MESSAGES, undefined), completionTokens: estimateTokensOfLength(400), estimated: true };
    expect(settled[0]?.usage).toEqual(expected);
    const usage = extension(recorded[0]!.resource, EXTENSION.usage);
    expect(part(usage, 'estimated')?.valueBoolean).toBe(true);
    expect(part(usage, 'completion-tokens')?.valueInteger).toBe(expected.completionTokens);
    expect(recorded[0]?.resource.statusReason).toEqual({ text: 'The client left.' });

    // Stopped before anything was generated: still the prompt's tokens (the provider had it).
    const early = turnWith();
    await recordReply(early.turn, { status: 'stopped', text: '' });
    expect(early.settled[0]?.usage).toEqual({ promptTokens: estimatePromptTokens(MESSAGES, undefined), completionTokens: 0, estimated: true });
  });

  test('a completed reply from a provider that reports no usage is charged an estimate of its prompt, text and calls, marked so', async () => {
    const { turn, recorded, settled } = turnWith();
    const toolCalls = [{ id: 'call_1', name: 'lookup_glucose', arguments: '{"patient":"Maria Lopez"}' }];
    await recordReply(turn, { status: 'completed', text: 'Glucose is 105 mg/dL.', toolCalls, finishReason: 'tool_calls' });
    const generated = 'Glucose is 105 mg/dL.'.length + 'lookup_glucose'.length + '{"patient":"Maria Lopez"}'.length;
    const expected = { promptTokens: estimatePromptTokens(MESSAGES, undefined), completionTokens: estimateTokensOfLength(generated), estimated: true };
    expect(expected.completionTokens).toBeGreaterThan(estimateTokensOfLength('Glucose is 105 mg/dL.'.length));
    expect(settled).toEqual([expect.objectContaining({ usage: expected })]);
    const usage = extension(recorded[0]!.resource, EXTENSION.usage);
    expect(part(usage, 'estimated')?.valueBoolean).toBe(true);
    expect(part(usage, 'prompt-tokens')?.valueInteger).toBe(expected.promptTokens);
    expect(part(usage, 'completion-tokens')?.valueInteger).toBe(expected.completionTokens);
  });

  test("a failure after some output is charged an estimate; one before any output charges nothing; the provider's usage always wins", async () => {
    const after = turnWith();
    await recordReply(after.turn, { status: 'not-done', text: 'Gl', generatedCharacters: 8 });
    expect(after.settled[0]?.usage).toMatchObject({ estimated: true, completionTokens: estimateTokensOfLength(8) });

    const before = turnWith();
    await recordReply(before.turn, { status: 'not-done', text: '', generatedCharacters: 0 });
    expect(before.settled[0]?.usage).toBeUndefined();
    expect(extension(before.recorded[0]!.resource, EXTENSION.usage)).toBeUndefined();

    const reported = turnWith();
    await recordReply(reported.turn, { status: 'stopped', text: '', usage: { promptTokens: 3, completionTokens: 4 }, generatedCharacters: 900 });
    expect(reported.settled[0]?.usage).toEqual({ promptTokens: 3, completionTokens: 4 });
  });

  test("a turn without a budget has no cost on record; its patient context, records taken in and FHIR tools' calls are", async () => {
    const shared = [{ reference: 'Patient/p1' }];
    const { turn, recorded } = turnWith({
      budget: undefined,
      patientContext: { text: 'Patient summary', shared },
      takenIn: [{ reference: 'Observation/o9' }],
      toolbox: { calls: [{ id: 't1', name: 'read_record', arguments: '{}', result: '{"ok":true}', shared: [{ reference: 'Condition/k1' }] }] } as unknown as ChatTurn['toolbox'],
    });
    await recordReply(turn, { status: 'completed', text: 'ok', usage: { promptTokens: 1, completionTokens: 1 } });
    const [{ resource }] = recorded as [Recorded];
    expect(part(extension(resource, EXTENSION.usage), 'cost')).toBeUndefined();
    expect(extension(resource, EXTENSION.patientContext)?.valueString).toBe('Patient summary');
    expect(part(extension(resource, EXTENSION.fhirToolCall), 'result')?.valueString).toBe('{"ok":true}');
    expect(resource.about).toEqual([{ reference: 'Patient/p1' }, { reference: 'Observation/o9' }, { reference: 'Condition/k1' }]);
  });

  test('a de-identified turn records what the model received and said, as sent', async () => {
    const pseudonyms = new Pseudonymizer({ resourceType: 'Patient', name: [{ given: ['Henrietta'], family: 'Okonkwo' }] }, -30, new Date('2026-11-28T10:00:00Z'));
    const deIdentification = new TurnDeIdentification(pseudonyms, MESSAGES);
    deIdentification.transcript.add('[GIVEN-1] is fine.');
    const { turn, recorded } = turnWith({ deIdentification, patientContext: { text: 'Henrietta Okonkwo, 65', shared: [] } });
    await recordReply(turn, { status: 'completed', text: 'Henrietta is fine.' });
    const [{ resource }] = recorded as [Recorded];
    expect(resource.payload?.[0]?.contentString).toBe('Henrietta is fine.');
    expect(extension(resource, EXTENSION.patientContext)?.valueString).not.toContain('Okonkwo');
    expect(part(extension(resource, EXTENSION.deIdentified), 'reply')?.valueString).toBe('[GIVEN-1] is fine.');
  });
});

describe('recordFailure', () => {
  test('records the reply not-done with the error the client gets, and returns it final (not to be retried: the prompt is on record)', async () => {
    const { turn, recorded } = turnWith();
    const failure = await recordFailure(turn, 'Partial', new AppError('upstream_error', 'The model provider is unavailable.', { isRetryable: true, retryAfterSeconds: 3 }), 12);
    expect(failure.code).toBe('upstream_error');
    expect(failure.message).toBe('The model provider is unavailable.');
    expect(failure.isRetryable).toBe(false);
    expect(failure.retryAfterSeconds).toBe(3);
    const [{ resource }] = recorded as [Recorded];
    expect(resource.status).toBe('not-done');
    expect(resource.payload?.[0]?.contentString).toBe('Partial');
    expect(resource.statusReason).toEqual({ coding: [{ system: ERROR_CODE_SYSTEM, code: 'upstream_error' }], text: 'The model provider is unavailable.' });
    expect(part(extension(resource, EXTENSION.usage), 'estimated')?.valueBoolean).toBe(true);
  });

  test('an error that is not fhirgate\'s is recorded and returned as an internal error, its own words kept from both', async () => {
    const { turn, recorded } = turnWith();
    const failure = await recordFailure(turn, '', new Error('socket hang up at 10.0.0.7'));
    expect(failure.code).toBe('internal_error');
    expect(failure.message).not.toContain('10.0.0.7');
    expect(JSON.stringify(recorded[0]?.resource)).not.toContain('10.0.0.7');
    expect(recorded[0]?.resource.payload).toBeUndefined();
  });
});

describe('answerFieldsOf', () => {
  test("every answer of the turn names its completion, time, the model answering now, the conversation and the reply's record", () => {
    const { turn } = turnWith();
    expect(answerFieldsOf(turn)).toEqual({ completionId: 'chatcmpl-1', created: 1_700_000_000, modelId: 'openai/gpt-4o', conversationId: 'root-1', replyId: 'reply-1', includeUsage: true });
  });
});
