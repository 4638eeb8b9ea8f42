/**
 * Governance of the Responses API end to end: `POST /v1/responses` runs the chat turn's own steps, so the openai
 * SDK's `responses.create` meets the same rules as a chat completion. A model the caller's AccessPolicy does not
 * grant is 403 `model_not_allowed`; a granted one answers, and its usage is settled against the budget where the
 * reply is recorded (its cost on the reply); the next turn, over the budget, is 429 with the budget's code and
 * `Retry-After`. Refused turns store nothing and send nothing to the provider.
 */
import type { MedplumClient } from '@medplum/core';
import type { AccessPolicy, Communication } from '@medplum/fhirtypes';
import OpenAI from 'openai';
import { EXTENSION } from '../plugin/chat/fhir-vocabulary.ts';
import { MODEL_GRANT_EXTENSION } from '../plugin/governance/model-access.ts';
import { startLlmEmulator, type LlmEmulator } from './emulator/index.ts';
import { projectAdministrator } from './support/project-administrator.ts';
import { startTestHost, type TestHost } from './support/test-host.ts';

const MINI = 'openai/gpt-4o-mini';

describe('governance of /v1/responses', () => {
  let emulator: LlmEmulator;
  let host: TestHost;

  beforeAll(async () => {
    emulator = await startLlmEmulator();
    host = await startTestHost({
      plugin: {
        llm: {
          providers: { openai: { kind: 'openai', apiKey: 'sk-test', baseUrl: `${emulator.url}/v1`, models: ['gpt-4o-mini', 'gpt-4o'], retries: { maxRetries: 0 } } },
          defaultModel: MINI,
        },
        governance: { prices: { [MINI]: { input: 0.15, output: 0.6 } } },
      },
    });
  });

  afterAll(async () => {
    await host.close();
    await emulator.close();
  });

  async function stored(admin: MedplumClient): Promise<Communication[]> {
    return admin.searchResources('Communication', { _count: '100' }, { cache: 'no-cache' });
  }

  test('responses.create: a model not granted is 403, a granted one answers and counts, the next over the budget is 429; refusals store and send nothing', async () => {
    const project = await host.seedProject();
    const admin = await projectAdministrator(host, project);
    await admin.post(`admin/projects/${project.projectId}/settings`, [
      { name: 'AI_MODEL_ACCESS', valueString: 'access-policy' },
      { name: 'AI_BUDGET_USER_DAY_TOKENS', valueInteger: 50 },
    ]);
    const policy = await admin.readResource('AccessPolicy', project.ids['policy-own-conversations']);
    await admin.updateResource<AccessPolicy>({ ...policy, extension: [{ url: MODEL_GRANT_EXTENSION, valueString: MINI }] });
    const openai = new OpenAI({
      baseURL: `${host.url}v1`,
      apiKey: await host.accessTokenFor(project.ids['practitioner-membership']),
      defaultHeaders: { 'X-Project-ID': project.projectId },
      maxRetries: 0,
    });
    emulator.reset();
    emulator.setBehaviour({ usage: { promptTokens: 30, completionTokens: 40 } });

    const notGranted = await openai.responses.create({ model: 'openai/gpt-4o', input: 'Hello' }).catch((error: unknown) => error);
    expect(notGranted).toBeInstanceOf(OpenAI.PermissionDeniedError);
    expect(notGranted).toMatchObject({ status: 403, error: { code: 'model_not_allowed', type: 'permission_error', param: 'model' } });
    expect(emulator.received).toHaveLength(0);
    expect(await stored(admin)).toHaveLength(0);

    const answered = await openai.responses.create({ model: MINI, input: 'Summarise the guideline' });
    expect(answered.output_text).toBe('Echo: Summarise the guideline');
    const afterAnswer = await stored(admin);
    const reply = afterAnswer.find((record) => `resp_${record.id}` === answered.id);
    // Settled where the reply is recorded: its usage and cost, the 70 tokens the budget now counts.
    expect(reply?.extension?.find((extension) => extension.url === EXTENSION.usage)?.extension).toEqual([
      { url: 'prompt-tokens', valueInteger: 30 },
      { url: 'completion-tokens', valueInteger: 40 },
      { url: 'total-tokens', valueInteger: 70 },
      // 30 × $0.15/1M + 40 × $0.60/1M
      { url: 'cost', valueMoney: { value: 0.0000285, currency: 'USD' } },
    ]);

    const overBudget = await openai.responses.create({ model: MINI, input: 'And the next step?', previous_response_id: answered.id }).catch((error: unknown) => error);
    expect(overBudget).toBeInstanceOf(OpenAI.RateLimitError);
    expect(overBudget).toMatchObject({ status: 429, error: { code: 'budget_exceeded_user_day', type: 'rate_limit_error' } });
    const headers = (overBudget as InstanceType<typeof OpenAI.RateLimitError>).headers;
    expect(Number(headers.get('retry-after'))).toBeGreaterThan(0);
    expect(headers.get('x-should-retry')).toBe('false');
    await expect(openai.responses.create({ model: MINI, input: 'Streamed?', stream: true })).rejects.toMatchObject({ status: 429, error: { code: 'budget_exceeded_user_day' } });
    expect(emulator.received).toHaveLength(1);
    expect(await stored(admin)).toHaveLength(afterAnswer.length);
  });
});
