import { notFound, OperationOutcomeError } from '@medplum/core';
import type { Project } from '@medplum/fhirtypes';
import type { FhirRepository } from '@medplum/fhir-router';
import type { ChatModel, ChatModelRequest } from '../llm/chat-model.ts';
import type { ModelCatalog, ResolvedModel } from '../llm/model-registry.ts';
import { createTelemetry } from '../telemetry/telemetry.ts';
import { createTestTelemetry } from '../../test/support/telemetry.ts';
import { applyPatientDataEgress, PATIENT_DATA_RULE, patientDataFieldsFor, type EgressTurn, type PatientDataOptions } from './patient-data-egress.ts';
import { IDENTIFIED_PATIENT } from './de-identify-text.test.ts';

/** A model that keeps the requests it is sent and echoes the last message. */
function echoModel(): ChatModel & { sent: ChatModelRequest[] } {
  const sent: ChatModelRequest[] = [];
  return {
    provider: 'echo',
    sent,
    complete: async (request) => {
      sent.push(request);
      return { text: request.messages.at(-1)?.content ?? '', finishReason: 'stop', usage: undefined };
    },
    stream: () => {
      throw new Error('not used');
    },
  };
}

const resolved = (id: string, model: ChatModel, fallbacks: ResolvedModel[] = []): ResolvedModel => ({ id, model, modelName: id, retries: { maxRetries: 0, baseDelayMs: 0, maxDelayMs: 0 }, fallbacks });

describe('applyPatientDataEgress', () => {
  const options: PatientDataOptions = { operatorModels: ['safe/*'], dateShiftKey: 'k'.repeat(32), telemetry: createTelemetry('test') };
  const project = (policy?: string): Project & { id: string } => ({ resourceType: 'Project', id: 'p', setting: policy ? [{ name: 'AI_PATIENT_DATA_POLICY', valueString: policy }] : [] });
  const turn = (overrides: Partial<EgressTurn>): EgressTurn => ({
    project: project(),
    model: resolved('safe/m', echoModel()),
    subject: { reference: { reference: `Patient/${IDENTIFIED_PATIENT.id}` }, patient: IDENTIFIED_PATIENT },
    conversationId: 'c',
    messages: [],
    systemRepo: () => Promise.reject(new Error('not used')),
    ...overrides,
  });
  const call = (model: ResolvedModel, text: string) => model.model.complete({ model: 'm', messages: [{ role: 'user', content: text }], maxTokens: 10, signal: new AbortController().signal });

  test('a turn about no patient goes to the model and its fallbacks as they are', async () => {
    const model = resolved('open/m', echoModel(), [resolved('open/n', echoModel())]);
    expect((await applyPatientDataEgress(options, turn({ model, subject: undefined }))).target).toBe(model);
  });

  test("a cleared model's turn keeps only cleared fallbacks", async () => {
    const model = resolved('safe/m', echoModel(), [resolved('open/n', echoModel()), resolved('safe/o', echoModel())]);
    const egress = await applyPatientDataEgress(options, turn({ model }));
    expect(egress.target.fallbacks.map((fallback) => fallback.id)).toEqual(['safe/o']);
    expect(egress.deIdentification).toBeUndefined();
  });

  test('a de-identified turn de-identifies on every model of its chain, cleared fallbacks included', async () => {
    const primary = echoModel();
    const fallback = echoModel();
    const egress = await applyPatientDataEgress(options, turn({ project: project('de-identify'), model: resolved('open/m', primary, [resolved('safe/o', fallback)]) }));
    const answers = [await call(egress.target, 'Is María López ok?'), await call(egress.target.fallbacks[0], 'And María?')];
    expect([primary.sent[0].messages[0].content, fallback.sent[0].messages[0].content]).toEqual(['Is [GIVEN-1] [FAMILY-2] ok?', 'And [GIVEN-1]?']);
    expect(answers.map((answer) => answer.text)).toEqual(['Is María López ok?', 'And María?']);
  });

  test('a de-identified turn is counted once, when its first request goes out, not when it is prepared', async () => {
    const counted: number[] = [];
    const telemetry = createTelemetry('test');
    const counting = { ...options, telemetry: { ...telemetry, deIdentifiedTurns: { add: (value: number) => counted.push(value) } as typeof telemetry.deIdentifiedTurns } };
    const egress = await applyPatientDataEgress(counting, turn({ project: project('de-identify'), model: resolved('open/m', echoModel(), [resolved('open/n', echoModel())]) }));
    expect(counted).toEqual([]);
    await call(egress.target, 'first step');
    await call(egress.target, 'a tool loop step');
    await call(egress.target.fallbacks[0], 'the fallback');
    expect(counted).toEqual([1]);
  });

  test('log probabilities cannot be given for a de-identified turn: 400 naming logprobs, before anything is sent', async () => {
    await expect(applyPatientDataEgress(options, turn({ project: project('de-identify'), model: resolved('open/m', echoModel()), options: { logprobs: { top: 0 } } }))).rejects.toMatchObject({
      code: 'invalid_request',
      message: expect.stringMatching(/logprobs cannot be given .* de-identified to 'open\/m', which is not cleared for patient data/),
      details: { param: 'logprobs' },
    });
  });

  test('without the server\'s date shift key nothing is de-identified: 503 naming the option, before anything is sent', async () => {
    const model = echoModel();
    await expect(applyPatientDataEgress({ ...options, dateShiftKey: undefined }, turn({ project: project('de-identify'), model: resolved('open/m', model) }))).rejects.toMatchObject({
      code: 'not_configured',
      // The message tells the operator what to set, in either place.
      message: expect.stringMatching(/no key for date shifts \(FHIRGATE_DATE_SHIFT_KEY .*deIdentification\.dateShiftKey\)/),
      details: { setting: 'deIdentification.dateShiftKey' },
    });
  });

  test('a patient no longer in the store cannot be de-identified: refused, saying why, the store\'s answer kept for the log', async () => {
    const gone = new OperationOutcomeError(notFound);
    const systemRepo = async (): Promise<FhirRepository> => ({ readReference: () => Promise.reject(gone) }) as unknown as FhirRepository;
    await expect(
      applyPatientDataEgress(options, turn({ project: project('de-identify'), model: resolved('open/m', echoModel()), subject: { reference: { reference: 'Patient/gone' } }, systemRepo }))
    ).rejects.toMatchObject({ code: 'patient_data_not_allowed', message: "The patient's record cannot be read, so the turn cannot be de-identified; it is not sent.", cause: gone });
  });
});

describe('applyPatientDataEgress: who is told, and what comes back', () => {
  const project = (settings: Record<string, string> = {}): Project & { id: string } => ({
    resourceType: 'Project',
    id: 'p',
    setting: Object.entries(settings).map(([name, valueString]) => ({ name, valueString })),
  });
  const turnAbout = (overrides: Partial<EgressTurn>): EgressTurn => ({
    project: project(),
    model: resolved('open/m', echoModel()),
    subject: { reference: { reference: `Patient/${IDENTIFIED_PATIENT.id}` }, patient: IDENTIFIED_PATIENT },
    conversationId: 'c',
    messages: [],
    systemRepo: () => Promise.reject(new Error('not used')),
    ...overrides,
  });
  /** A model that calls the tool `lookup` with the patient's pseudonym in its arguments. */
  const callingModel = (): ChatModel => ({
    provider: 'script',
    complete: async () => ({ text: '', toolCalls: [{ id: 'k', name: 'lookup', arguments: '{"who":"[GIVEN-1]"}' }], finishReason: 'tool_calls', usage: undefined }),
    stream: () => {
      throw new Error('not used');
    },
  });
  const callArguments = async (egress: { target: ResolvedModel }): Promise<string | undefined> =>
    (await egress.target.model.complete({ model: 'm', messages: [{ role: 'user', content: 'x' }], tools: [{ name: 'lookup', parameters: {} }], maxTokens: 10, signal: new AbortController().signal })).toolCalls?.[0].arguments;

  test('a refusal is counted by rule and project, and names the operator\'s list as the host takes it', async () => {
    const telemetry = createTestTelemetry();
    const failure = applyPatientDataEgress(
      { operatorModels: ['safe/*'], operatorSetting: 'AI_PATIENT_DATA_MODELS in the environment', telemetry: telemetry.telemetry },
      turnAbout({})
    );
    await expect(failure).rejects.toMatchObject({ code: 'patient_data_not_allowed', message: expect.stringContaining('(AI_PATIENT_DATA_MODELS in the environment)') });
    expect(await telemetry.points('fhirgate.governance.refusals')).toEqual([{ attributes: { 'fhirgate.governance.rule': PATIENT_DATA_RULE, 'fhirgate.project.id': 'p' }, value: 1 }]);
  });

  test('a de-identified turn is counted by project and model', async () => {
    const telemetry = createTestTelemetry();
    const egress = await applyPatientDataEgress(
      { operatorModels: [], dateShiftKey: 'k'.repeat(32), telemetry: telemetry.telemetry },
      turnAbout({ project: project({ AI_PATIENT_DATA_POLICY: 'de-identify' }) })
    );
    await egress.target.model.complete({ model: 'm', messages: [{ role: 'user', content: 'x' }], maxTokens: 10, signal: new AbortController().signal });
    expect(await telemetry.points('fhirgate.governance.de_identified_turns')).toEqual([{ attributes: { 'fhirgate.project.id': 'p', 'gen_ai.request.model': 'open/m' }, value: 1 }]);
  });

  test("a call the model makes comes back re-identified for fhirgate's own tools, pseudonymised for the client's unless the project says re-identify", async () => {
    const options: PatientDataOptions = { operatorModels: [], dateShiftKey: 'k'.repeat(32), telemetry: createTelemetry('test') };
    const deIdentify = project({ AI_PATIENT_DATA_POLICY: 'de-identify' });
    const own = await applyPatientDataEgress(options, turnAbout({ project: deIdentify, model: resolved('open/m', callingModel()) }));
    expect(JSON.parse((await callArguments(own)) ?? '')).toEqual({ who: 'María' });
    const clientTools = [{ name: 'lookup', parameters: {} }];
    const client = await applyPatientDataEgress(options, turnAbout({ project: deIdentify, model: resolved('open/m', callingModel()), tools: clientTools }));
    expect(await callArguments(client)).toBe('{"who":"[GIVEN-1]"}');
    const allowed = project({ AI_PATIENT_DATA_POLICY: 'de-identify', AI_PATIENT_DATA_TOOL_ARGUMENTS: 're-identify' });
    const reIdentified = await applyPatientDataEgress(options, turnAbout({ project: allowed, model: resolved('open/m', callingModel()), tools: clientTools }));
    expect(JSON.parse((await callArguments(reIdentified)) ?? '')).toEqual({ who: 'María' });
  });

  test('a patient the turn names without its record is read with the system repository; a failed read other than "gone" is that failure', async () => {
    const options: PatientDataOptions = { operatorModels: [], dateShiftKey: 'k'.repeat(32), telemetry: createTelemetry('test') };
    const read: string[] = [];
    const systemRepo = async (): Promise<FhirRepository> =>
      ({ readReference: async (reference: { reference: string }) => (read.push(reference.reference), IDENTIFIED_PATIENT) }) as unknown as FhirRepository;
    const model = echoModel();
    const egress = await applyPatientDataEgress(options, turnAbout({ project: project({ AI_PATIENT_DATA_POLICY: 'de-identify' }), model: resolved('open/m', model), subject: { reference: { reference: 'Patient/x' } }, systemRepo }));
    await egress.target.model.complete({ model: 'm', messages: [{ role: 'user', content: 'Is María ok?' }], maxTokens: 10, signal: new AbortController().signal });
    expect([read, model.sent[0].messages[0].content]).toEqual([['Patient/x'], 'Is [GIVEN-1] ok?']);

    const unavailable = new Error('store unavailable');
    const failing = async (): Promise<FhirRepository> => ({ readReference: () => Promise.reject(unavailable) }) as unknown as FhirRepository;
    await expect(
      applyPatientDataEgress(options, turnAbout({ project: project({ AI_PATIENT_DATA_POLICY: 'de-identify' }), subject: { reference: { reference: 'Patient/x' } }, systemRepo: failing }))
    ).rejects.toBe(unavailable);
  });
});

describe('patientDataFieldsFor: what /v1/models says of each model', () => {
  const options: PatientDataOptions = { operatorModels: ['safe/*'], telemetry: createTelemetry('test') };
  const catalog = (resolve: (id: string) => Partial<ResolvedModel>): ModelCatalog => ({ resolve: (id?: string) => resolve(id ?? '') }) as unknown as ModelCatalog;

  test("a model the project calls with its own key is judged by the project's list, one it has no key for as on the server's account", () => {
    const project: Project = { resourceType: 'Project', setting: [{ name: 'AI_PATIENT_DATA_MODELS', valueString: 'own/*, safe/*' }] };
    const fields = patientDataFieldsFor(options, project, catalog((id) => {
      if (id.includes('nokey')) {
        throw new Error('no key');
      }
      return { id, usesProjectKey: id.startsWith('own/') };
    }));
    // `own/nokey` is on the project's list, but without the project's key it would run on the server's account,
    // which is not cleared.
    expect(['safe/m', 'own/m', 'open/m', 'nokey/m', 'own/nokey'].map((id) => fields(id).patient_data)).toEqual(['cleared', 'cleared', 'refused', 'refused', 'refused']);
  });
});
