/**
 * Model access end to end: a project administrator turns on `AI_MODEL_ACCESS=access-policy` and grants models in
 * the AccessPolicies of the project's memberships; the openai SDK then lists only the caller's models, a model the
 * caller was not granted is refused with 403 `model_not_allowed` with nothing stored and nothing sent to the
 * provider, a fallback the caller may not use is never tried, an edited policy applies without a restart, and a
 * model the caller may not use is refused as such before the patient data rule looks at the turn.
 */
import type { MedplumClient } from '@medplum/core';
import type { AccessPolicy, Communication } from '@medplum/fhirtypes';
import OpenAI from 'openai';
import { MODEL_GRANT_EXTENSION } from '../plugin/governance/model-access.ts';
import type { SeededProject } from '../plugin/hosts/standalone/seed.ts';
import { startLlmEmulator, type LlmEmulator } from './emulator/index.ts';
import { projectAdministrator } from './support/project-administrator.ts';
import { startTestHost, TEST_METRICS_TOKEN, type TestHost } from './support/test-host.ts';
import { waitFor } from './support/wait-for.ts';

describe('model access by AccessPolicy', () => {
  let emulator: LlmEmulator;
  let host: TestHost;

  beforeAll(async () => {
    emulator = await startLlmEmulator();
    host = await startTestHost({
      plugin: {
        llm: {
          providers: {
            openai: { kind: 'openai', apiKey: 'sk-test', baseUrl: `${emulator.url}/v1`, models: ['gpt-4o-mini', 'gpt-4o'], retries: { maxRetries: 0 } },
            claude: { kind: 'anthropic', apiKey: 'sk-ant-test', baseUrl: emulator.url, models: ['claude-sonnet-5-5'], retries: { maxRetries: 0 } },
          },
          defaultModel: 'openai/gpt-4o',
          fallbacks: { 'openai/gpt-4o-mini': ['openai/gpt-4o', 'claude/claude-sonnet-5-5'] },
        },
        // Edits of a policy apply within this bound (5 s by default); short here so the test need not wait.
        governance: { accessPolicyCacheMs: 200 },
      },
      metrics: true,
    });
  });

  afterAll(async () => {
    await host.close();
    await emulator.close();
  });

  beforeEach(() => {
    emulator.reset();
  });

  interface Governed {
    readonly project: SeededProject;
    readonly openai: OpenAI;
    /** The project's integration client, made a project administrator: edits policies, reads the records. */
    readonly admin: MedplumClient;
  }

  /** A project whose practitioner's own-conversations policy grants `openai/gpt-4o-mini` and claude's models. */
  async function governedProject(): Promise<Governed> {
    const project = await host.seedProject();
    const admin = await projectAdministrator(host, project);
    await admin.post(`admin/projects/${project.projectId}/settings`, [{ name: 'AI_MODEL_ACCESS', valueString: 'access-policy' }]);
    await grant(admin, project, 'openai/gpt-4o-mini', 'claude/*');
    const openai = new OpenAI({
      baseURL: `${host.url}v1`,
      apiKey: await host.accessTokenFor(project.ids['practitioner-membership']),
      defaultHeaders: { 'X-Project-ID': project.projectId },
      maxRetries: 0,
    });
    return { project, openai, admin };
  }

  /** Sets the models the practitioner's own-conversations policy grants, as an administrator does in the Medplum app. */
  async function grant(admin: MedplumClient, project: SeededProject, ...models: string[]): Promise<void> {
    const policy = await admin.readResource('AccessPolicy', project.ids['policy-own-conversations']);
    await admin.updateResource<AccessPolicy>({ ...policy, extension: models.map((valueString) => ({ url: MODEL_GRANT_EXTENSION, valueString })) });
  }

  async function storedCommunications(admin: MedplumClient): Promise<Communication[]> {
    return admin.searchResources('Communication', { _count: '100' }, { cache: 'no-cache' });
  }

  test('GET /v1/models lists only the models the caller was granted; GET /v1/models/{id} of another is 403', async () => {
    const { openai } = await governedProject();
    expect((await openai.models.list()).data.map((model) => model.id)).toEqual(['openai/gpt-4o-mini', 'claude/claude-sonnet-5-5']);
    expect(await openai.models.retrieve('claude/claude-sonnet-5-5')).toMatchObject({ id: 'claude/claude-sonnet-5-5', object: 'model' });
    await expect(openai.models.retrieve('openai/gpt-4o')).rejects.toMatchObject({ status: 403, error: { code: 'model_not_allowed', param: 'model' } });
    await expect(openai.models.retrieve('openai/gpt-5')).rejects.toMatchObject({ status: 404, error: { code: 'model_not_found' } });
  });

  test('a model the caller was not granted is 403 model_not_allowed: nothing stored, nothing sent; a granted one answers', async () => {
    const { openai, admin, project } = await governedProject();
    for (const request of [
      { model: 'openai/gpt-4o', stream: false },
      { model: 'gpt-4o', stream: true },
      // No model named: the project's default, which the caller was not granted.
      { stream: false },
    ]) {
      const body = { ...request, messages: [{ role: 'user', content: 'Hello' }] } as OpenAI.ChatCompletionCreateParams;
      const refused = await openai.chat.completions.create(body).catch((error: unknown) => error);
      expect(refused).toBeInstanceOf(OpenAI.PermissionDeniedError);
      expect(refused).toMatchObject({ status: 403, error: { code: 'model_not_allowed', type: 'permission_error', param: 'model', message: expect.stringContaining('GET /v1/models lists yours') } });
    }
    expect(emulator.received).toHaveLength(0);
    expect(await storedCommunications(admin)).toHaveLength(0);
    // Not even the project's AI agent was created for the refused turns.
    expect(await admin.searchResources('Device', { identifier: 'urn:fhirgate:agent|fhirgate-ai-agent' }, { cache: 'no-cache' })).toHaveLength(0);

    const answer = await openai.chat.completions.create({ model: 'claude/claude-sonnet-5-5', messages: [{ role: 'user', content: 'Hello' }] });
    expect(answer.choices[0].message.content).toBe('Echo: Hello');
    expect(await storedCommunications(admin)).toHaveLength(3);

    // Each refusal is counted by rule, for the operator.
    const metrics = await (await fetch(`${host.url}metrics`, { headers: { Authorization: `Bearer ${TEST_METRICS_TOKEN}` } })).text();
    const refusals = metrics.split('\n').filter((line) => line.startsWith('fhirgate_governance_refusals_total{') && line.includes(project.projectId));
    expect(refusals).toEqual([expect.stringMatching(/fhirgate_governance_rule="model_access".* 3$/)]);
  });

  test('model access comes before the patient data rule; /v1/models says, of each model listed, what a patient\'s turn does', async () => {
    // This server clears no model for patient data (llm.patientDataModels unset): a turn about a patient is refused on every model.
    const { openai, admin, project } = await governedProject();
    const listed = (await openai.models.list()).data.map((model) => [model.id, (model as unknown as { fhirgate: unknown }).fhirgate]);
    expect(listed).toEqual([
      ['openai/gpt-4o-mini', { patient_data: 'refused' }],
      ['claude/claude-sonnet-5-5', { patient_data: 'refused' }],
    ]);
    const aboutPatient = (model: string): Promise<unknown> =>
      openai.chat.completions.create({ model, messages: [{ role: 'user', content: 'How is she doing?' }], patient_id: project.ids['patient-in-care-team-1'] } as never).catch((error: unknown) => error);
    // Neither granted nor cleared: the caller learns only that the model is not theirs.
    expect(await aboutPatient('openai/gpt-4o')).toMatchObject({ status: 403, error: { code: 'model_not_allowed' } });
    expect(await aboutPatient('openai/gpt-4o-mini')).toMatchObject({ status: 403, error: { code: 'patient_data_not_allowed' } });
    expect(emulator.received).toHaveLength(0);
    expect(await storedCommunications(admin)).toHaveLength(0);

    const metrics = await (await fetch(`${host.url}metrics`, { headers: { Authorization: `Bearer ${TEST_METRICS_TOKEN}` } })).text();
    const refusals = metrics.split('\n').filter((line) => line.startsWith('fhirgate_governance_refusals_total{') && line.includes(project.projectId));
    expect(refusals).toHaveLength(2);
    expect(refusals).toEqual(expect.arrayContaining([expect.stringMatching(/fhirgate_governance_rule="model_access".* 1$/), expect.stringMatching(/fhirgate_governance_rule="patient_data".* 1$/)]));
  });

  test('a fallback the caller may not use is never tried; one it may use is', async () => {
    const { openai } = await governedProject();
    const failing = `Hello [emulator-behaviour ${JSON.stringify({ errorStatus: 503 })}]`;
    // gpt-4o-mini fails: gpt-4o (not granted) is skipped, claude (granted) answers, and fails the same way.
    await expect(openai.chat.completions.create({ model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: failing }] })).rejects.toMatchObject({ status: 500 });
    expect(emulator.received.map((request) => `${request.provider}/${request.model}`)).toEqual(['openai/gpt-4o-mini', 'anthropic/claude-sonnet-5-5']);
  });

  test('an edited policy applies without a restart, within the policy cache bound', async () => {
    const { openai, admin, project } = await governedProject();
    // The grant is read and kept now, so the edit below has to wait for the cache.
    expect((await openai.models.list()).data.map((model) => model.id)).not.toContain('openai/gpt-4o');
    await grant(admin, project, 'openai/*');
    const edited = Date.now();
    const listed = await waitFor(async () => {
      const ids = (await openai.models.list()).data.map((model) => model.id);
      return ids.includes('openai/gpt-4o') ? ids : undefined;
    }, 8000);
    // Within twice the configured 200 ms (a grant in use is read again in the background), with room for a slow
    // machine's requests; the 5 s default would be far outside it.
    expect(Date.now() - edited).toBeLessThan(2 * 200 + 1000);
    expect(listed).toEqual(['openai/gpt-4o-mini', 'openai/gpt-4o']);
    const answer = await openai.chat.completions.create({ model: 'openai/gpt-4o', messages: [{ role: 'user', content: 'Now?' }] });
    expect(answer.model).toBe('openai/gpt-4o');
  });

  test('a project without AI_MODEL_ACCESS lets every member use every model, whatever the policies say', async () => {
    const project = await host.seedProject();
    // The practitioner's policy grants only claude's models: without the setting, that grant is not applied.
    await grant(await projectAdministrator(host, project), project, 'claude/*');
    const openai = new OpenAI({
      baseURL: `${host.url}v1`,
      apiKey: await host.accessTokenFor(project.ids['practitioner-membership']),
      defaultHeaders: { 'X-Project-ID': project.projectId },
      maxRetries: 0,
    });
    expect((await openai.models.list()).data.map((model) => model.id)).toEqual(['openai/gpt-4o-mini', 'openai/gpt-4o', 'claude/claude-sonnet-5-5']);
    const answer = await openai.chat.completions.create({ model: 'openai/gpt-4o', messages: [{ role: 'user', content: 'Any model?' }] });
    expect(answer.model).toBe('openai/gpt-4o');
    expect(emulator.received.map((request) => `${request.provider}/${request.model}`)).toEqual(['openai/gpt-4o']);
  });
});
