import { notFound, OperationOutcomeError } from '@medplum/core';
import type { Project } from '@medplum/fhirtypes';
import type { FhirRepository } from '@medplum/fhir-router';
import type { ChatModel, ChatModelRequest } from '../llm/chat-model.ts';
import type { ResolvedModel } from '../llm/model-registry.ts';
import { createTelemetry } from '../telemetry/telemetry.ts';
import { applyPatientDataEgress, type EgressTurn, type PatientDataOptions } from './patient-data-egress.ts';
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
      details: { param: 'logprobs' },
    });
  });

  test('without the server\'s date shift key nothing is de-identified: 503 naming the option, before anything is sent', async () => {
    const model = echoModel();
    await expect(applyPatientDataEgress({ ...options, dateShiftKey: undefined }, turn({ project: project('de-identify'), model: resolved('open/m', model) }))).rejects.toMatchObject({
      code: 'not_configured',
      details: { setting: 'deIdentification.dateShiftKey' },
    });
  });

  test('a patient no longer in the store cannot be de-identified: refused', async () => {
    const systemRepo = async (): Promise<FhirRepository> => ({ readReference: () => Promise.reject(new OperationOutcomeError(notFound)) }) as unknown as FhirRepository;
    await expect(
      applyPatientDataEgress(options, turn({ project: project('de-identify'), model: resolved('open/m', echoModel()), subject: { reference: { reference: 'Patient/gone' } }, systemRepo }))
    ).rejects.toMatchObject({ code: 'patient_data_not_allowed' });
  });
});
