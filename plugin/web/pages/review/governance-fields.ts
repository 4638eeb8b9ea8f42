/**
 * The governance settings the review console shows and an administrator may change, each with words for the
 * people who read it (docs/governance.md says what each does), and the edits a form makes of them.
 */
import type { SettingEdit } from './governance-data.ts';

/** A setting as the form edits it: a choice among values, or text (a list, a number). */
export interface SettingField {
  readonly name: string;
  readonly label: string;
  readonly description: string;
  /** The values to choose from; undefined: free text. */
  readonly choices?: readonly { readonly value: string; readonly label: string }[];
}

const budget = (scope: 'PROJECT' | 'USER', period: 'DAY' | 'MONTH', measure: 'TOKENS' | 'COST'): SettingField => ({
  name: `AI_BUDGET_${scope}_${period}_${measure}`,
  label: `${scope === 'PROJECT' ? 'Project' : 'Each user'}: ${measure === 'TOKENS' ? 'tokens' : 'cost (US dollars)'} per ${period.toLowerCase()}`,
  description: 'Empty: no budget.',
});

/** The settings, in the order the console shows them. */
export const SETTING_FIELDS: readonly SettingField[] = [
  {
    name: 'AI_PATIENT_DATA_MODELS',
    label: 'Models cleared for patient data',
    description: "provider/model or provider/*, comma separated, or none. Empty: the server's own list.",
  },
  {
    name: 'AI_PATIENT_DATA_POLICY',
    label: 'A question about a patient on a model not cleared',
    description: 'Refused, or sent de-identified.',
    choices: [
      { value: 'refuse', label: 'Refuse it' },
      { value: 'de-identify', label: 'Send it de-identified' },
    ],
  },
  {
    name: 'AI_PATIENT_DATA_TOOL_ARGUMENTS',
    label: "In a de-identified turn, the arguments of the client's own tools",
    description: 'As the model wrote them (pseudonyms), or with the patient’s identifiers put back.',
    choices: [
      { value: 'pseudonymize', label: 'Keep the pseudonyms' },
      { value: 're-identify', label: 'Put the identifiers back' },
    ],
  },
  {
    name: 'AI_MODEL_ACCESS',
    label: 'Who may use which model',
    description: 'Everyone every model, or what each member’s AccessPolicies grant.',
    choices: [
      { value: 'all', label: 'Every member, every model' },
      { value: 'access-policy', label: 'As the AccessPolicies grant' },
    ],
  },
  budget('PROJECT', 'DAY', 'TOKENS'),
  budget('PROJECT', 'MONTH', 'TOKENS'),
  budget('USER', 'DAY', 'TOKENS'),
  budget('USER', 'MONTH', 'TOKENS'),
  budget('PROJECT', 'DAY', 'COST'),
  budget('PROJECT', 'MONTH', 'COST'),
  budget('USER', 'DAY', 'COST'),
  budget('USER', 'MONTH', 'COST'),
  { name: 'AI_MODEL_PRICES', label: "The project's own prices", description: 'provider/model=<input>/<output> US dollars per 1M tokens, comma separated.' },
];

/** The settings' values by name, from the stored entries (absent: not set). */
export function valuesOf(settings: readonly { readonly name: string; readonly value: string | null }[]): Record<string, string | undefined> {
  return Object.fromEntries(settings.map((entry) => [entry.name, entry.value ?? undefined]));
}

/** The edits between the stored values and the form's (a blank field: not set), in the fields' order. */
export function editsBetween(stored: Readonly<Record<string, string | undefined>>, form: Readonly<Record<string, string | undefined>>): SettingEdit[] {
  return SETTING_FIELDS.map((field) => {
    const to = form[field.name]?.trim();
    return { name: field.name, from: stored[field.name], to: to === undefined || to === '' ? undefined : to };
  }).filter((edit) => edit.from !== edit.to);
}

/** An edit in words: `AI_PATIENT_DATA_POLICY: refuse → de-identify`. */
export function describeEdit(edit: SettingEdit): string {
  return `${edit.name}: ${edit.from ?? 'not set'} → ${edit.to ?? 'not set'}`;
}
