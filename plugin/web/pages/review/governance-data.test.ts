import { applyEdits } from './governance-data.ts';

describe('a change to the governance settings', () => {
  test('sends the whole list: the other settings kept, the changed ones replaced, a cleared one removed', () => {
    const current = [
      { name: 'AI_MODELS', valueString: 'openai/gpt-4o-mini' },
      { name: 'AI_PATIENT_DATA_POLICY', valueString: 'refuse' },
      { name: 'AI_BUDGET_USER_DAY_TOKENS', valueInteger: 5000 },
    ];
    expect(
      applyEdits(current, [
        { name: 'AI_PATIENT_DATA_POLICY', from: 'refuse', to: 'de-identify' },
        { name: 'AI_BUDGET_USER_DAY_TOKENS', from: '5000', to: undefined },
        { name: 'AI_MODEL_ACCESS', from: undefined, to: 'access-policy' },
      ])
    ).toEqual([
      { name: 'AI_MODELS', valueString: 'openai/gpt-4o-mini' },
      { name: 'AI_PATIENT_DATA_POLICY', valueString: 'de-identify' },
      { name: 'AI_MODEL_ACCESS', valueString: 'access-policy' },
    ]);
  });
});
