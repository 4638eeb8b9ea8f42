/**
 * Which model may see patient data: two models side by side, one the operator cleared and one it did not. A turn
 * about a patient on the other model is refused with nothing stored and nothing sent (the project's default
 * policy), `/v1/models` says what each model does with a patient's turn, a cleared model never hands patient data
 * to an uncleared fallback, and every refusal is counted. The real openai SDK calls the host; MedplumClient reads
 * back what was stored.
 */
import type { AuditEvent } from '@medplum/fhirtypes';
import OpenAI from 'openai';
import { CLEARED_MODEL, metricValue, OTHER_MODEL, patientDataProject, startTwoModelHost, type PatientDataProject, type TwoModelHost } from './support/two-model-host.ts';
import type { FhirgateCompletion } from './support/chat-clients.ts';

describe('patient data egress: refusals', () => {
  let models: TwoModelHost;
  let subject: PatientDataProject;
  let openai: OpenAI;
  const logLines: string[] = [];

  beforeAll(async () => {
    models = await startTwoModelHost({ fallbacks: { [CLEARED_MODEL]: [OTHER_MODEL] }, logLines });
  });
  afterAll(() => models.close());
  beforeEach(async () => {
    models.cleared.reset();
    models.other.reset();
    subject = await patientDataProject(models.host);
    openai = await subject.openai();
  });

  const ask = (body: Record<string, unknown>): Promise<FhirgateCompletion> =>
    openai.chat.completions.create({ messages: [{ role: 'user', content: 'How is she doing?' }], ...body } as never) as unknown as Promise<FhirgateCompletion>;
  const failureOf = (promise: Promise<unknown>): Promise<{ status?: number; error?: { code?: string; type?: string; message?: string } }> =>
    promise.then(
      () => ({}),
      (error: unknown) => error as { status?: number; error?: { code?: string; type?: string; message?: string } }
    );
  const stored = async (): Promise<{ communications: number; disclosures: number }> => ({
    communications: (await subject.medplum.searchResources('Communication', { _count: '1000' }, { cache: 'no-cache' })).length,
    disclosures: (await subject.medplum.searchResources('AuditEvent', { _count: '1000' }, { cache: 'no-cache' })).filter((event: AuditEvent) =>
      event.entity?.some((entity) => entity.what?.reference === `Patient/${subject.patientId}`)
    ).length,
  });

  test('start-up says loudly which models are not cleared', () => {
    const warnings = logLines.map((line) => JSON.parse(line) as { level: string; msg: string; models?: string[] }).filter((line) => line.msg.includes('NOT cleared for patient data'));
    expect(warnings).toEqual([expect.objectContaining({ level: 'WARN', models: [OTHER_MODEL] })]);
  });

  test('/v1/models says, for each model, what a turn about a patient does on it in the caller\'s project', async () => {
    const listed = async (): Promise<Record<string, unknown>> =>
      Object.fromEntries((await (await subject.openai()).models.list()).data.map((model) => [model.id, (model as unknown as { fhirgate: unknown }).fhirgate]));
    expect(await listed()).toEqual({ [CLEARED_MODEL]: { patient_data: 'cleared' }, [OTHER_MODEL]: { patient_data: 'refused' } });
    await subject.setSettings({ AI_PATIENT_DATA_POLICY: 'de-identify' });
    expect(await listed()).toEqual({ [CLEARED_MODEL]: { patient_data: 'cleared' }, [OTHER_MODEL]: { patient_data: 'de-identified' } });
    // A project narrows the operator's list; it cannot clear the server's own account on its own say.
    await subject.setSettings({ AI_PATIENT_DATA_MODELS: OTHER_MODEL, AI_PATIENT_DATA_POLICY: 'refuse' });
    expect(await listed()).toEqual({ [CLEARED_MODEL]: { patient_data: 'refused' }, [OTHER_MODEL]: { patient_data: 'refused' } });
  });

  test('a turn about a patient on a model not cleared: 403 patient_data_not_allowed naming the model and the setting, nothing stored, nothing sent', async () => {
    const refusalsBefore = await metricValue(models.host, 'fhirgate_governance_refusals_total', { fhirgate_governance_rule: 'patient_data', fhirgate_project_id: subject.project.projectId });
    for (const stream of [false, true]) {
      const failure = await failureOf(ask({ model: OTHER_MODEL, stream, patient_id: subject.patientId }));
      expect(failure.status).toBe(403);
      expect(failure.error?.code).toBe('patient_data_not_allowed');
      expect(failure.error?.type).toBe('invalid_request_error');
      expect(failure.error?.message).toContain(`'${OTHER_MODEL}'`);
      expect(failure.error?.message).toContain('AI_PATIENT_DATA_POLICY');
    }
    expect(await stored()).toEqual({ communications: 0, disclosures: 0 });
    expect(models.other.received).toHaveLength(0);
    expect(models.cleared.received).toHaveLength(0);
    expect(await metricValue(models.host, 'fhirgate_governance_refusals_total', { fhirgate_governance_rule: 'patient_data', fhirgate_project_id: subject.project.projectId })).toBe(refusalsBefore + 2);

    // A turn about no patient goes to any model.
    await expect(ask({ model: OTHER_MODEL })).resolves.toMatchObject({ choices: [{ message: { content: 'Echo: How is she doing?' } }] });
  });

  test('a conversation whose subject is a patient stays with cleared models: continuing it on the other model is refused', async () => {
    const first = await ask({ model: CLEARED_MODEL, patient_id: subject.patientId });
    const before = await stored();
    const failure = await failureOf(ask({ model: OTHER_MODEL, conversation_id: first.conversation_id, stream: true }));
    expect([failure.status, failure.error?.code]).toEqual([403, 'patient_data_not_allowed']);
    expect(await stored()).toEqual(before);
    expect(models.other.received).toHaveLength(0);
  });

  test('a cleared model never hands a patient\'s turn to an uncleared fallback; a turn about no patient falls back as usual', async () => {
    models.cleared.enqueue({ errorStatus: 503 });
    const failure = await failureOf(ask({ model: CLEARED_MODEL, patient_id: subject.patientId }));
    expect([failure.status, failure.error?.code]).toEqual([500, 'upstream_error']);
    expect(models.other.received).toHaveLength(0);

    models.cleared.enqueue({ errorStatus: 503 });
    const general = await ask({ model: CLEARED_MODEL, messages: [{ role: 'user', content: 'What is hypertension?' }] });
    expect(general.model).toBe(OTHER_MODEL);
    expect(models.other.received).toHaveLength(1);
  });

  test('a project may narrow the operator\'s clearance, and a malformed setting is a 503 naming it', async () => {
    await subject.setSettings({ AI_PATIENT_DATA_MODELS: 'none' });
    openai = await subject.openai();
    expect((await failureOf(ask({ model: CLEARED_MODEL, patient_id: subject.patientId }))).error?.code).toBe('patient_data_not_allowed');
    expect(models.cleared.received).toHaveLength(0);

    await subject.setSettings({ AI_PATIENT_DATA_MODELS: 'cleared/*', AI_PATIENT_DATA_POLICY: 'sometimes' });
    openai = await subject.openai();
    const failure = await failureOf(ask({ model: CLEARED_MODEL, patient_id: subject.patientId }));
    expect([failure.status, failure.error?.code]).toEqual([503, 'not_configured']);
    expect(failure.error?.message).toContain('AI_PATIENT_DATA_POLICY');
    expect(await stored()).toEqual({ communications: 0, disclosures: 0 });
  });
});
