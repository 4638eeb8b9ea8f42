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

describe('patient data settings: what an administrator is told, and what the lists accept', () => {
  const operator = ['azure/*', 'openai/gpt-4o'];
  const failureOf = (setting: Record<string, string>): AppError => {
    try {
      readProjectPatientData(project(setting));
    } catch (thrown) {
      if (AppError.isInstance(thrown)) {
        return thrown;
      }
      throw thrown;
    }
    throw new Error('expected a 503');
  };

  test('a malformed policy or tool-arguments setting lists the values it takes', () => {
    expect(failureOf({ AI_PATIENT_DATA_POLICY: 'allow' }).message).toContain('must be one of refuse, de-identify');
    expect(failureOf({ AI_PATIENT_DATA_TOOL_ARGUMENTS: 'yes' }).message).toContain('must be one of pseudonymize, re-identify');
  });

  test("a malformed entry of the project's list is quoted, at most its first 100 characters, with what an entry must be", () => {
    const message = failureOf({ AI_PATIENT_DATA_MODELS: 'azure/*, gpt-4o' }).message;
    expect(message).toContain("'gpt-4o'");
    expect(message).toContain('provider/model or provider/*');
    const long = `x${'y'.repeat(300)}`;
    const cut = failureOf({ AI_PATIENT_DATA_MODELS: long }).message;
    expect(cut).toContain(`'${long.slice(0, 100)}'`);
    expect(cut).not.toContain(long.slice(0, 101));
  });

  test('an entry with anything before its provider or after its model is malformed, not read as the model inside it', () => {
    for (const entry of ['_azure/gpt-4o', '-azure/*', 'azure/gpt-4o extra', 'azure/* openai/gpt-4o']) {
      expect([entry, failureOf({ AI_PATIENT_DATA_MODELS: entry }).details]).toEqual([entry, { setting: 'AI_PATIENT_DATA_MODELS' }]);
    }
  });

  test("empty entries of the project's list (a trailing or doubled comma) are passed over, not an error", () => {
    const settings = readProjectPatientData(project({ AI_PATIENT_DATA_MODELS: 'azure/gpt-4o-prod,, openai/gpt-4o ,' }));
    expect(settings.models).toEqual(['azure/gpt-4o-prod', 'openai/gpt-4o']);
    expect(isCleared(operator, settings, { id: 'openai/gpt-4o' })).toBe(true);
  });

  test('`none`, in any case, is a list that clears nothing, not the absence of one', () => {
    for (const none of ['none', 'NONE', ' None ']) {
      expect(readProjectPatientData(project({ AI_PATIENT_DATA_MODELS: none })).models).toEqual([]);
    }
  });

  test("the refusal points at the model parameter, and says whose agreement is missing: the project's, for its own key; the operator's, for a model the project lists", () => {
    const settings = readProjectPatientData(project({ AI_PATIENT_DATA_MODELS: 'azure/*, openai/gpt-4o-mini' }));
    const ownKey = patientDataRefusal(operator, settings, { id: 'anthropic/claude-sonnet', usesProjectKey: true });
    expect(ownKey.details).toEqual({ param: 'model' });
    expect(ownKey.message).toContain('the project calls it with its own key, and the project setting AI_PATIENT_DATA_MODELS does not list it');
    // Listed by the project (by the second of its entries), not cleared by the operator: the server's account is why.
    const serverAccount = patientDataRefusal(operator, settings, { id: 'openai/gpt-4o-mini' });
    expect(serverAccount.message).toContain("it is called with the server's own account");
    expect(serverAccount.message).not.toContain('does not list it');
  });

  test("the operator's list: each problem quotes the entry (at most 100 characters); an entry without a provider is refused even where it looks like one", () => {
    const providers = { llama: { models: ['llama3'] }, openai: { models: ['gpt-4o'] } };
    expect(patientDataModelProblems(['openai/gpt-5'], providers)).toEqual([expect.stringContaining("'openai/gpt-5' must be provider/model or provider/*")]);
    // `llama3` is no `provider/model`, though `llama` is a provider and `llama3` one of its models.
    expect(patientDataModelProblems(['llama3'], providers)).toHaveLength(1);
    const long = `openai/${'x'.repeat(300)}`;
    const [problem] = patientDataModelProblems([long], providers);
    expect(problem).toContain(`'${long.slice(0, 100)}'`);
    expect(problem).not.toContain(long.slice(0, 101));
  });
});
