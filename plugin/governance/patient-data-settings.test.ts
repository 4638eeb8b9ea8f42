import type { Project } from '@medplum/fhirtypes';
import { AppError } from '../errors.ts';
import { isCleared, operatorSettingOf, patientDataModelProblems, patientDataRefusal, readProjectPatientData, treatmentOf, unclearedModels } from './patient-data-settings.ts';

const project = (setting: Record<string, string> = {}): Project => ({
  resourceType: 'Project',
  setting: Object.entries(setting).map(([name, valueString]) => ({ name, valueString })),
});

describe('patient data clearance', () => {
  const operator = ['azure/*', 'openai/gpt-4o'];

  test("without project settings the operator's list decides, and nothing is cleared by default", () => {
    const settings = readProjectPatientData(project());
    expect(settings).toEqual({ policy: 'refuse', toolArguments: 'pseudonymize' });
    expect(isCleared(operator, settings, { id: 'azure/gpt-4o-prod' })).toBe(true);
    expect(isCleared(operator, settings, { id: 'openai/gpt-4o' })).toBe(true);
    expect(isCleared(operator, settings, { id: 'openai/gpt-4o-mini' })).toBe(false);
    expect(isCleared([], settings, { id: 'azure/gpt-4o-prod' })).toBe(false);
    // The project's own key is the project's agreement, not the operator's.
    expect(isCleared(operator, settings, { id: 'azure/gpt-4o-prod', usesProjectKey: true })).toBe(false);
  });

  test("a project's list narrows the operator's, and clears only providers it calls with its own key", () => {
    const settings = readProjectPatientData(project({ AI_PATIENT_DATA_MODELS: 'azure/gpt-4o-prod, anthropic/*' }));
    expect(isCleared(operator, settings, { id: 'azure/gpt-4o-prod' })).toBe(true);
    expect(isCleared(operator, settings, { id: 'azure/other' })).toBe(false);
    expect(isCleared(operator, settings, { id: 'openai/gpt-4o' })).toBe(false);
    expect(isCleared(operator, settings, { id: 'anthropic/claude-sonnet' })).toBe(false);
    expect(isCleared(operator, settings, { id: 'anthropic/claude-sonnet', usesProjectKey: true })).toBe(true);
    expect(isCleared(operator, readProjectPatientData(project({ AI_PATIENT_DATA_MODELS: 'none' })), { id: 'azure/x' })).toBe(false);
  });

  test('the policy says what happens on a model that is not cleared', () => {
    expect(treatmentOf(operator, readProjectPatientData(project()), { id: 'openai/gpt-4o-mini' })).toBe('refused');
    expect(treatmentOf(operator, readProjectPatientData(project({ AI_PATIENT_DATA_POLICY: 'de-identify' })), { id: 'openai/gpt-4o-mini' })).toBe('de-identified');
    expect(treatmentOf(operator, readProjectPatientData(project({ AI_PATIENT_DATA_POLICY: 'de-identify' })), { id: 'openai/gpt-4o' })).toBe('cleared');
  });

  test("in a de-identified turn, the client's tool calls keep their pseudonyms unless the project says re-identify", () => {
    expect(readProjectPatientData(project({ AI_PATIENT_DATA_POLICY: 'de-identify' })).toolArguments).toBe('pseudonymize');
    expect(readProjectPatientData(project({ AI_PATIENT_DATA_TOOL_ARGUMENTS: 're-identify' })).toolArguments).toBe('re-identify');
    expect(readProjectPatientData(project({ AI_PATIENT_DATA_TOOL_ARGUMENTS: 'pseudonymize', AI_PATIENT_DATA_MODELS: 'none' })).toolArguments).toBe('pseudonymize');
  });

  test('a malformed setting is a 503 naming it', () => {
    for (const setting of [{ AI_PATIENT_DATA_POLICY: 'allow' }, { AI_PATIENT_DATA_MODELS: 'gpt-4o' }, { AI_PATIENT_DATA_TOOL_ARGUMENTS: 'yes' }] as Record<string, string>[]) {
      const error = (() => {
        try {
          return readProjectPatientData(project(setting));
        } catch (thrown) {
          return thrown;
        }
      })() as AppError;
      expect(AppError.isInstance(error)).toBe(true);
      expect([error.status, error.details]).toEqual([503, { setting: Object.keys(setting)[0] }]);
    }
  });

  test('the refusal names the model and the setting that would allow it', () => {
    const refusal = patientDataRefusal(operator, readProjectPatientData(project()), { id: 'openai/gpt-4o-mini' });
    expect([refusal.status, refusal.code]).toEqual([403, 'patient_data_not_allowed']);
    expect(refusal.message).toContain("'openai/gpt-4o-mini'");
    expect(refusal.message).toContain('llm.patientDataModels');
    expect(refusal.message).toContain('AI_PATIENT_DATA_POLICY');
    const narrowed = patientDataRefusal(operator, readProjectPatientData(project({ AI_PATIENT_DATA_MODELS: 'azure/*' })), { id: 'openai/gpt-4o' });
    expect(narrowed.message).toContain('AI_PATIENT_DATA_MODELS does not list it');
  });

  test("the operator's list is named as the host takes it: the plugin option, or the variable it was read from", () => {
    const target = { id: 'openai/gpt-4o-mini' };
    expect(patientDataRefusal(operator, readProjectPatientData(project()), target).message).toContain('(the plugin option llm.patientDataModels)');
    const fromEnvironment = operatorSettingOf({ patientDataModelsSetting: "AI_PATIENT_DATA_MODELS in the server's environment" });
    const refusal = patientDataRefusal(operator, readProjectPatientData(project()), target, fromEnvironment);
    expect(refusal.message).toContain("has not cleared for it (AI_PATIENT_DATA_MODELS in the server's environment)");
    expect(refusal.message).not.toContain('llm.patientDataModels');
    expect(operatorSettingOf({})).toBe('the plugin option llm.patientDataModels');
  });

  test("the operator's list is checked against the configured models, and the rest are named at start-up", () => {
    const providers = { azure: { models: ['gpt-4o-prod'] }, openai: { models: ['gpt-4o', 'gpt-4o-mini'] } };
    expect(patientDataModelProblems(['azure/*', 'openai/gpt-4o'], providers)).toEqual([]);
    expect(patientDataModelProblems(['openai/gpt-5', 'other/*', 'gpt-4o'], providers)).toHaveLength(3);
    expect(unclearedModels({ providers: providers as never, patientDataModels: ['azure/*', 'openai/gpt-4o'] })).toEqual(['openai/gpt-4o-mini']);
  });
});
