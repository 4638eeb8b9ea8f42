/**
 * What MCP clients get of patient data in a project. fhirgate does not know which model sits behind an MCP client,
 * so the project decides, with the Project.setting {@link MCP_PATIENT_DATA_SETTING}: `allow` gives records as the
 * caller may read them; `de-identify` gives them as the chat gives them to a model not cleared for patient data
 * (names and identifiers replaced by pseudonyms, the birth date by the age, dates shifted; the patient named by an
 * opaque handle, patient-handle.ts); `refuse` gives none. Unset, it follows the project's rule for models not
 * cleared for patient data (`AI_PATIENT_DATA_POLICY`: `refuse`, the default, refuses; `de-identify` de-identifies).
 */
import type { Project } from '@medplum/fhirtypes';
import { PATIENT_DATA_POLICIES, PATIENT_DATA_SETTING, type PatientDataPolicy } from '../governance/patient-data-settings.ts';
import { misconfiguredSetting, projectSettingText } from '../project-settings.ts';

/** The Project.setting naming what MCP clients get of patient data. */
export const MCP_PATIENT_DATA_SETTING = 'AI_MCP_PATIENT_DATA';
/** Its values. */
export const MCP_PATIENT_DATA_RULES = ['allow', 'refuse', 'de-identify'] as const;
export type McpPatientDataRule = (typeof MCP_PATIENT_DATA_RULES)[number];

/** The project's rule for MCP clients; a value fhirgate does not know is a configuration error, never `allow`. */
export function mcpPatientDataRuleOf(project: Project): McpPatientDataRule {
  const setting = projectSettingText(project.setting, MCP_PATIENT_DATA_SETTING);
  if (setting === undefined) {
    return uncleared(project);
  }
  if (!(MCP_PATIENT_DATA_RULES as readonly string[]).includes(setting)) {
    throw misconfiguredSetting(MCP_PATIENT_DATA_SETTING, `must be one of ${MCP_PATIENT_DATA_RULES.join(', ')}`);
  }
  return setting as McpPatientDataRule;
}

/** The project's rule for models not cleared for patient data, read alone (the other patient data settings are the chat's). */
function uncleared(project: Project): McpPatientDataRule {
  const policy = projectSettingText(project.setting, PATIENT_DATA_SETTING.policy) ?? 'refuse';
  if (!(PATIENT_DATA_POLICIES as readonly string[]).includes(policy)) {
    throw misconfiguredSetting(PATIENT_DATA_SETTING.policy, `must be one of ${PATIENT_DATA_POLICIES.join(', ')}`);
  }
  return (policy as PatientDataPolicy) === 'de-identify' ? 'de-identify' : 'refuse';
}

/** Why a tool call was refused under the rule, as the MCP client (and the user behind it) reads it. */
export const MCP_PATIENT_DATA_REFUSED =
  `This project does not give patient records to MCP clients (Project.setting ${MCP_PATIENT_DATA_SETTING} is neither 'allow' nor 'de-identify'). Ask the project's administrator.`;
