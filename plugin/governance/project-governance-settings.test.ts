import type { Project } from '@medplum/fhirtypes';
import { modelPricesOf } from './model-prices.ts';
import { ProjectGovernanceSettings, parseProjectGovernance } from './project-governance-settings.ts';

const OPERATOR_PRICES = modelPricesOf({ 'openai/gpt-4o-mini': { input: 0.15, output: 0.6 }, 'openai/gpt-4o': { input: 2.5, output: 10 } });

describe('project governance settings', () => {
  test('without settings: every model, no budget, the operator prices', () => {
    expect(parseProjectGovernance([], OPERATOR_PRICES)).toEqual({ modelAccess: 'all', budgets: [], prices: OPERATOR_PRICES });
  });

  test('budgets of tokens and dollars, as integer, decimal or string settings', () => {
    const governance = parseProjectGovernance(
      [
        { name: 'AI_MODEL_ACCESS', valueString: 'access-policy' },
        { name: 'AI_BUDGET_PROJECT_MONTH_TOKENS', valueInteger: 5_000_000 },
        { name: 'AI_BUDGET_USER_DAY_TOKENS', valueString: '20_000' },
        { name: 'AI_BUDGET_PROJECT_DAY_COST', valueDecimal: 12.5 },
      ],
      OPERATOR_PRICES,
    );
    expect(governance.modelAccess).toBe('access-policy');
    expect(governance.budgets).toEqual([
      { scope: 'project', period: 'day', measure: 'cost', limit: 12_500_000_000, setting: 'AI_BUDGET_PROJECT_DAY_COST' },
      { scope: 'project', period: 'month', measure: 'tokens', limit: 5_000_000, setting: 'AI_BUDGET_PROJECT_MONTH_TOKENS' },
      { scope: 'user', period: 'day', measure: 'tokens', limit: 20_000, setting: 'AI_BUDGET_USER_DAY_TOKENS' },
    ]);
  });

  test("the project's prices win for the models they name; the operator's stay for the rest", () => {
    const { prices } = parseProjectGovernance([{ name: 'AI_MODEL_PRICES', valueString: 'openai/gpt-4o=2/8, claude/sonnet=3/15' }], OPERATOR_PRICES);
    expect(Object.fromEntries(prices)).toEqual({
      'openai/gpt-4o-mini': { inputPerToken: 150, outputPerToken: 600 },
      'openai/gpt-4o': { inputPerToken: 2000, outputPerToken: 8000 },
      'claude/sonnet': { inputPerToken: 3000, outputPerToken: 15_000 },
    });
  });

  test('a setting that does not parse is a 503 naming it', () => {
    const refused = (setting: { name: string; valueString?: string; valueInteger?: number }): unknown => {
      try {
        parseProjectGovernance([setting], OPERATOR_PRICES);
      } catch (error) {
        return error;
      }
      return undefined;
    };
    expect(refused({ name: 'AI_MODEL_ACCESS', valueString: 'groups' })).toMatchObject({ code: 'not_configured', message: expect.stringContaining("AI_MODEL_ACCESS is 'groups'") });
    expect(refused({ name: 'AI_BUDGET_USER_DAY_TOKENS', valueString: 'lots' })).toMatchObject({ code: 'not_configured', details: { setting: 'AI_BUDGET_USER_DAY_TOKENS' } });
    expect(refused({ name: 'AI_BUDGET_USER_DAY_TOKENS', valueInteger: -1 })).toMatchObject({ code: 'not_configured' });
    expect(refused({ name: 'AI_BUDGET_TEAM_DAY_TOKENS', valueInteger: 5 })).toMatchObject({
      code: 'not_configured',
      message: expect.stringContaining('AI_BUDGET_TEAM_DAY_TOKENS is not a budget fhirgate knows'),
    });
    expect(refused({ name: 'AI_MODEL_PRICES', valueString: 'free' })).toMatchObject({ code: 'not_configured', message: expect.stringContaining('AI_MODEL_PRICES') });
  });

  test('parsed once per Project object: a new version of the project is read anew', () => {
    const settings = new ProjectGovernanceSettings(OPERATOR_PRICES);
    const project: Project = { resourceType: 'Project', id: 'p', setting: [{ name: 'AI_BUDGET_USER_DAY_TOKENS', valueInteger: 10 }] };
    expect(settings.of(project)).toBe(settings.of(project));
    const edited: Project = { ...project, setting: [{ name: 'AI_BUDGET_USER_DAY_TOKENS', valueInteger: 20 }] };
    expect(settings.of(edited).budgets[0].limit).toBe(20);
  });

  test('parsed once per version, whatever object the host hands over for it; the next version is read anew', () => {
    const settings = new ProjectGovernanceSettings(OPERATOR_PRICES);
    const version = (versionId: string, tokens: number): Project => ({
      resourceType: 'Project',
      id: 'p',
      meta: { versionId },
      setting: [{ name: 'AI_BUDGET_USER_DAY_TOKENS', valueInteger: tokens }],
    });
    // A Medplum server reads the project anew for every request: the same version, another object.
    expect(settings.of(version('1', 10))).toBe(settings.of(version('1', 10)));
    expect(settings.of(version('2', 20)).budgets[0].limit).toBe(20);
    // A version that does not parse is refused every time, not once.
    const broken: Project = { resourceType: 'Project', id: 'p', meta: { versionId: '3' }, setting: [{ name: 'AI_MODEL_PRICES', valueString: 'free' }] };
    expect(() => settings.of(broken)).toThrow(expect.objectContaining({ code: 'not_configured' }));
    expect(() => settings.of({ ...broken })).toThrow(expect.objectContaining({ code: 'not_configured' }));
  });
});
