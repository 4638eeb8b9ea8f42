import type { CallerContext } from '../host.ts';
import { createTestTelemetry } from '../../test/support/telemetry.ts';
import { periodsAt } from './budget-periods.ts';
import { BudgetCounters } from './budget-counters.ts';
import { Budgets } from './budgets.ts';
import { modelPricesOf } from './model-prices.ts';
import { parseProjectGovernance } from './project-governance-settings.ts';
import { EXTENSION } from '../chat/fhir-vocabulary.ts';

const NOW = Date.parse('2026-05-12T22:00:00Z');
/** What the turns of these tests may cost, when they reserve it. */
const RESERVATION = { modelId: 'openai/gpt-4o-mini', promptTokens: 10, maxTokens: 20 };

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
    const turn = await budgets.check(alice, governance, RESERVATION);
    // A turn that started under budget is counted in full, however far past it.
    expect(turn.settle('openai/gpt-4o-mini', { promptTokens: 80, completionTokens: 70 }, new Date(NOW))).toBe(80 * 150 + 70 * 600);
    expect(await telemetry.points('fhirgate.llm.cost')).toEqual([
      { attributes: { 'fhirgate.project.id': 'p', 'fhirgate.model': 'openai/gpt-4o-mini' }, value: (80 * 150 + 70 * 600) / 1e9 },
    ]);

    const refused = await budgets.check(alice, governance, RESERVATION).catch((error: unknown) => error);
    expect(refused).toMatchObject({
      code: 'budget_exceeded_user_day',
      status: 429,
      isRetryable: false,
      retryAfterSeconds: 2 * 3600,
      message: 'Your daily token budget (100 tokens, AI_BUDGET_USER_DAY_TOKENS) is used up; it resets at 2026-05-13T00:00:00Z.',
    });
    await expect(budgets.check(callerOf('p', 'Practitioner/bob'), governance, RESERVATION)).resolves.toBeDefined();
    expect(await telemetry.points('fhirgate.governance.refusals')).toEqual([
      { attributes: { 'fhirgate.governance.rule': 'budget', 'fhirgate.budget': 'user_day_tokens', 'fhirgate.project.id': 'p' }, value: 1 },
    ]);
  });

  test('of several budgets used up, the one that resets last names the refusal; cost counts only priced models', async () => {
    const { budgets, governance, telemetry } = setup([
      { name: 'AI_BUDGET_PROJECT_DAY_TOKENS', valueInteger: 10 },
      { name: 'AI_BUDGET_PROJECT_MONTH_COST', valueDecimal: 0.00001 },
    ]);
    const turn = await budgets.check(callerOf('p', 'Practitioner/alice'), governance, RESERVATION);
    expect(turn.settle('local/llama', { promptTokens: 100, completionTokens: 100 }, new Date(NOW))).toBeUndefined();
    await expect(budgets.check(callerOf('p', 'Practitioner/bob'), governance, RESERVATION)).rejects.toMatchObject({ code: 'budget_exceeded_project_day' });

    turn.settle('openai/gpt-4o-mini', { promptTokens: 100, completionTokens: 0 }, new Date(NOW));
    await expect(budgets.check(callerOf('p', 'Practitioner/bob'), governance, RESERVATION)).rejects.toMatchObject({
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
    const turn = await budgets.check(callerOf('p', 'Practitioner/alice'), governance, RESERVATION);
    expect(turn.settle('openai/gpt-4o-mini', undefined, new Date(NOW))).toBeUndefined();
    turn.settle('openai/gpt-4o-mini', { promptTokens: 1_000_000, completionTokens: 0 }, new Date(NOW));
    await expect(budgets.check(callerOf('p', 'Practitioner/alice'), governance, RESERVATION)).resolves.toBeDefined();
    expect((await counters.spend('p', 'Practitioner/alice', periodsAt(NOW))).month.userTokens).toBe(1_000_000);
  });

  test('turns still running hold their likely cost: with 1 token left, of 8 admitted at once one runs and the others get 429 until it ends', async () => {
    const { budgets, governance, counters } = setup([{ name: 'AI_BUDGET_USER_DAY_TOKENS', valueInteger: 21 }]);
    const alice = callerOf('p', 'Practitioner/alice');
    counters.add('p', 'Practitioner/alice', periodsAt(NOW), 20, 0);
    // All eight pass the check (nothing is held yet); the reservation, just before each prompt is stored, decides.
    const turns = await Promise.all(Array.from({ length: 8 }, () => budgets.check(alice, governance, RESERVATION)));
    const outcomes = turns.map((turn) => {
      try {
        turn.reserve();
        return 'admitted';
      } catch (error) {
        return error;
      }
    });
    expect(outcomes.filter((outcome) => outcome === 'admitted')).toHaveLength(1);
    expect(outcomes[1]).toMatchObject({
      code: 'budget_exceeded_user_day',
      status: 429,
      retryAfterSeconds: 5,
      message: 'Your daily token budget (21 tokens, AI_BUDGET_USER_DAY_TOKENS) is taken up by the turns still running; retry once they end.',
    });
    expect(counters.view('p', 'Practitioner/alice', periodsAt(NOW)).held).toEqual({ projectTokens: 30, projectCost: 10 * 150 + 20 * 600, userTokens: 30, userCost: 10 * 150 + 20 * 600 });
    await expect(budgets.check(alice, governance, RESERVATION)).rejects.toMatchObject({ retryAfterSeconds: 5 });

    // Its reply settles it: the holding goes, the reply's usage counts, and the budget is used up for the day.
    turns[0].settle('openai/gpt-4o-mini', { promptTokens: 3, completionTokens: 2 }, new Date(NOW));
    turns[0].release();
    expect(counters.view('p', 'Practitioner/alice', periodsAt(NOW))).toMatchObject({ day: { userTokens: 25 }, held: { userTokens: 0, projectTokens: 0 } });
    await expect(budgets.check(alice, governance, RESERVATION)).rejects.toMatchObject({ retryAfterSeconds: 2 * 3600, message: expect.stringContaining('is used up') });
  });

  test('a turn that ends without a reply gives its holding back once; a project without budgets holds nothing', async () => {
    const { budgets, governance, counters } = setup([{ name: 'AI_BUDGET_PROJECT_DAY_TOKENS', valueInteger: 1000 }]);
    const turn = await budgets.check(callerOf('p', 'Practitioner/alice'), governance, { ...RESERVATION, promptTokens: 100, maxTokens: 400 });
    turn.reserve();
    turn.reserve();
    const other = await budgets.check(callerOf('p', 'Practitioner/bob'), governance, RESERVATION);
    other.reserve();
    expect(counters.view('p', 'Practitioner/alice', periodsAt(NOW)).held.projectTokens).toBe(500 + 30);
    turn.release();
    turn.release();
    // A settle after the release counts the usage and gives nothing back twice.
    turn.settle('openai/gpt-4o-mini', { promptTokens: 1, completionTokens: 1 }, new Date(NOW));
    expect(counters.view('p', 'Practitioner/alice', periodsAt(NOW)).held.projectTokens).toBe(30);

    const plain = setup([]);
    (await plain.budgets.check(callerOf('p', 'Practitioner/alice'), plain.governance, RESERVATION)).reserve();
    expect(plain.counters.view('p', 'Practitioner/alice', periodsAt(NOW)).held.projectTokens).toBe(0);
  });

  test("a reply a recovery recorded counts its recorded usage and cost, for its recipient, in the period it was sent", async () => {
    const { budgets, counters } = setup([]);
    budgets.recovered(
      'p',
      {
        resourceType: 'Communication',
        id: 'r1',
        status: 'stopped',
        sent: new Date(NOW - 3600_000).toISOString(),
        recipient: [{ reference: 'Practitioner/alice' }],
        extension: [
          {
            url: EXTENSION.usage,
            extension: [
              { url: 'prompt-tokens', valueInteger: 40 },
              { url: 'completion-tokens', valueInteger: 2 },
              { url: 'total-tokens', valueInteger: 42 },
              { url: 'cost', valueMoney: { value: 0.000007, currency: 'USD' } },
              { url: 'estimated', valueBoolean: true },
            ],
          },
        ],
      },
      false,
    );
    expect(counters.view('p', 'Practitioner/alice', periodsAt(NOW)).day).toEqual({ projectTokens: 42, projectCost: 7000, userTokens: 42, userCost: 7000 });
  });
});
