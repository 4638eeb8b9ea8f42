import type { CallerContext } from '../host.ts';
import { createTestTelemetry } from '../../test/support/telemetry.ts';
import { periodsAt } from './budget-periods.ts';
import { BudgetCounters } from './budget-counters.ts';
import { Budgets } from './budgets.ts';
import { modelPricesOf } from './model-prices.ts';
import { parseProjectGovernance } from './project-governance-settings.ts';

const NOW = Date.parse('2026-05-12T22:00:00Z');

function callerOf(projectId: string, profile: string): CallerContext {
  return { project: { resourceType: 'Project', id: projectId }, profile: { reference: profile }, membership: { id: 'm' } } as unknown as CallerContext;
}

function setup(settings: Parameters<typeof parseProjectGovernance>[0]) {
  const telemetry = createTestTelemetry();
  const counters = new BudgetCounters({ keyPrefix: 'unused:', refreshMs: 1000, maxAgeMs: 5000, now: () => NOW });
  const budgets = new Budgets(counters, telemetry.telemetry, () => NOW);
  const governance = parseProjectGovernance(settings, modelPricesOf({ 'openai/gpt-4o-mini': { input: 0.15, output: 0.6 } }));
  return { telemetry, counters, budgets, governance };
}

describe('budgets', () => {
  test('a user over their daily token budget is refused with its code and Retry-After until midnight UTC; others are not', async () => {
    const { budgets, governance, telemetry } = setup([{ name: 'AI_BUDGET_USER_DAY_TOKENS', valueInteger: 100 }]);
    const alice = callerOf('p', 'Practitioner/alice');
    const turn = await budgets.check(alice, governance);
    // A turn that started under budget is counted in full, however far past it.
    expect(turn.settle('openai/gpt-4o-mini', { promptTokens: 80, completionTokens: 70 }, new Date(NOW))).toBe(80 * 150 + 70 * 600);

    const refused = await budgets.check(alice, governance).catch((error: unknown) => error);
    expect(refused).toMatchObject({
      code: 'budget_exceeded_user_day',
      status: 429,
      isRetryable: false,
      retryAfterSeconds: 2 * 3600,
      message: 'Your daily token budget (100 tokens, AI_BUDGET_USER_DAY_TOKENS) is used up; it resets at 2026-05-13T00:00:00Z.',
    });
    await expect(budgets.check(callerOf('p', 'Practitioner/bob'), governance)).resolves.toBeDefined();
    expect(await telemetry.points('fhirgate.governance.refusals')).toEqual([
      { attributes: { 'fhirgate.governance.rule': 'budget', 'fhirgate.budget': 'user_day_tokens', 'fhirgate.project.id': 'p' }, value: 1 },
    ]);
  });

  test('of several budgets used up, the one that resets last names the refusal; cost counts only priced models', async () => {
    const { budgets, governance, telemetry } = setup([
      { name: 'AI_BUDGET_PROJECT_DAY_TOKENS', valueInteger: 10 },
      { name: 'AI_BUDGET_PROJECT_MONTH_COST', valueDecimal: 0.00001 },
    ]);
    const turn = await budgets.check(callerOf('p', 'Practitioner/alice'), governance);
    expect(turn.settle('local/llama', { promptTokens: 100, completionTokens: 100 }, new Date(NOW))).toBeUndefined();
    await expect(budgets.check(callerOf('p', 'Practitioner/bob'), governance)).rejects.toMatchObject({ code: 'budget_exceeded_project_day' });

    turn.settle('openai/gpt-4o-mini', { promptTokens: 100, completionTokens: 0 }, new Date(NOW));
    await expect(budgets.check(callerOf('p', 'Practitioner/bob'), governance)).rejects.toMatchObject({
      code: 'budget_exceeded_project_month',
      retryAfterSeconds: (Date.parse('2026-06-01T00:00:00Z') - NOW) / 1000,
      message: "The project's monthly cost budget (0.00001 USD, AI_BUDGET_PROJECT_MONTH_COST) is used up; it resets at 2026-06-01T00:00:00Z.",
    });
    const usage = await telemetry.points('fhirgate.budget.usage');
    expect(usage).toEqual(
      expect.arrayContaining([
        { attributes: { 'fhirgate.project.id': 'p', 'fhirgate.budget': 'project_day_tokens' }, value: 30 },
        { attributes: { 'fhirgate.project.id': 'p', 'fhirgate.budget': 'project_month_cost' }, value: 1.5 },
      ]),
    );
  });

  test('a reply without usage counts nothing; a project without budgets is never refused, and still counted', async () => {
    const { budgets, governance, counters } = setup([]);
    const turn = await budgets.check(callerOf('p', 'Practitioner/alice'), governance);
    expect(turn.settle('openai/gpt-4o-mini', undefined, new Date(NOW))).toBeUndefined();
    turn.settle('openai/gpt-4o-mini', { promptTokens: 1_000_000, completionTokens: 0 }, new Date(NOW));
    await expect(budgets.check(callerOf('p', 'Practitioner/alice'), governance)).resolves.toBeDefined();
    expect((await counters.spend('p', 'Practitioner/alice', periodsAt(NOW))).month.userTokens).toBe(1_000_000);
  });
});
