/**
 * What MCP clients get of patient data in a project. fhirgate does not know which model sits behind an MCP client,
 * so the project decides, with the Project.setting {@link MCP_PATIENT_DATA_SETTING}: `allow` gives records as the
 * caller may read them; `refuse` gives none. Unset, it follows the project's rule for models not cleared for
 * patient data (`AI_PATIENT_DATA_POLICY`): this increment serves no de-identified form to MCP clients, so either
 * rule (refuse, de-identify) refuses.
 */
import type { Project } from '@medplum/fhirtypes';
import { AppError } from '../errors.ts';

/** The Project.setting naming what MCP clients get of patient data. */
export const MCP_PATIENT_DATA_SETTING = 'AI_MCP_PATIENT_DATA';
/** Its values. */
export const MCP_PATIENT_DATA_RULES = ['allow', 'refuse'] as const;
export type McpPatientDataRule = (typeof MCP_PATIENT_DATA_RULES)[number];

/** The project's rule for MCP clients; a value fhirgate does not know is a configuration error, never `allow`. */
export function mcpPatientDataRuleOf(project: Project): McpPatientDataRule {
  const setting = project.setting?.find((entry) => entry.name === MCP_PATIENT_DATA_SETTING)?.valueString?.trim();
  if (setting === undefined) {
    return 'refuse';
  }
  if (!(MCP_PATIENT_DATA_RULES as readonly string[]).includes(setting)) {
    throw new AppError('not_configured', `The project setting ${MCP_PATIENT_DATA_SETTING} must be one of ${MCP_PATIENT_DATA_RULES.join(', ')}.`, {
      details: { setting: MCP_PATIENT_DATA_SETTING },
    });
  }
  return setting as McpPatientDataRule;
}

/** Why a tool call was refused under the rule, as the MCP client (and the user behind it) reads it. */
export const MCP_PATIENT_DATA_REFUSED =
  `This project does not give patient records to MCP clients (Project.setting ${MCP_PATIENT_DATA_SETTING} is not 'allow'). Ask the project's administrator.`;
