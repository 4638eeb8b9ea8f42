import { describeEdit, editsBetween } from './governance-fields.ts';

describe('the governance form', () => {
  test('only the settings changed are edits; a blank field removes its setting', () => {
    const stored = { AI_PATIENT_DATA_POLICY: 'refuse', AI_BUDGET_USER_DAY_TOKENS: '5000' };
    const form = { AI_PATIENT_DATA_POLICY: 'de-identify', AI_BUDGET_USER_DAY_TOKENS: ' ', AI_MODEL_ACCESS: '' };
    const edits = editsBetween(stored, form);
    expect(edits).toEqual([
      { name: 'AI_PATIENT_DATA_POLICY', from: 'refuse', to: 'de-identify' },
      { name: 'AI_BUDGET_USER_DAY_TOKENS', from: '5000', to: undefined },
    ]);
    expect(edits.map(describeEdit)).toEqual(['AI_PATIENT_DATA_POLICY: refuse → de-identify', 'AI_BUDGET_USER_DAY_TOKENS: 5000 → not set']);
    expect(editsBetween(stored, stored)).toEqual([]);
  });
});
