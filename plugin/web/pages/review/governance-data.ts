/**
 * The project's governance settings as every member reads them (`GET /v1/governance`, docs/governance.md "Reading
 * the settings"), and the change a project administrator makes with Medplum's settings route
 * (`POST /admin/projects/<id>/settings`), which replaces the whole `Project.setting` list: so the change reads the
 * current list first and sends it whole, with only the settings changed replaced. fhirgate records the AuditEvent
 * of the change on the server, whoever makes it.
 */
import type { MedplumClient } from '@medplum/core';
import type { Project, ProjectSetting } from '@medplum/fhirtypes';
import { useMedplum } from '@medplum/react';
import { useCallback, useEffect, useState } from 'react';
import { fhirgateFetch } from '../../fhirgate-api.ts';
import { SETTINGS_CHANGE_SUBTYPE } from './governance-searches.ts';

export type PatientDataTreatment = 'cleared' | 'refused' | 'de-identified';

/** One budget: its limit, what is spent in its current period, what remains. */
export interface GovernanceBudget {
  readonly setting: string;
  readonly scope: 'project' | 'user';
  readonly period: 'day' | 'month';
  readonly measure: 'tokens' | 'cost';
  readonly limit: number;
  readonly spent: number;
  readonly remaining: number;
  readonly resets_at: string;
}

/** The answer of `GET /v1/governance`. */
export interface Governance {
  readonly project_id: string;
  readonly can_change: boolean;
  readonly settings: readonly { readonly name: string; readonly value: string | null }[];
  readonly model_access: 'all' | 'access-policy' | null;
  readonly patient_data: {
    readonly policy: 'refuse' | 'de-identify';
    readonly tool_arguments: 'pseudonymize' | 're-identify';
    readonly project_models: readonly string[] | null;
    readonly models: readonly { readonly id: string; readonly patient_data: PatientDataTreatment }[];
  } | null;
  readonly budgets: readonly GovernanceBudget[];
  readonly problems: readonly { readonly setting: string; readonly message: string }[];
}

export interface GovernanceState {
  readonly governance: Governance | undefined;
  readonly error: string | undefined;
  /** Reads the settings again (after a change). */
  readonly reload: () => void;
}

export function useGovernance(): GovernanceState {
  const medplum = useMedplum();
  const [version, setVersion] = useState(0);
  const [state, setState] = useState<Omit<GovernanceState, 'reload'>>({ governance: undefined, error: undefined });
  useEffect(() => {
    let current = true;
    fhirgateFetch(medplum, 'v1/governance')
      .then((response) => response.json() as Promise<Governance>)
      .then((governance) => current && setState({ governance, error: undefined }))
      .catch((error: unknown) => current && setState({ governance: undefined, error: (error as Error).message }));
    return () => {
      current = false;
    };
  }, [medplum, version]);
  const reload = useCallback(() => setVersion((value) => value + 1), []);
  return { ...state, reload };
}

/** A setting to change: its new value as text, or undefined to remove it. */
export interface SettingEdit {
  readonly name: string;
  readonly from: string | undefined;
  readonly to: string | undefined;
}

/** The whole settings list with `edits` applied: the others kept as they are, in their order. */
export function applyEdits(current: readonly ProjectSetting[], edits: readonly SettingEdit[]): ProjectSetting[] {
  const byName = new Map(edits.map((edit) => [edit.name, edit]));
  const kept = current.filter((entry) => !byName.has(entry.name));
  const changed = edits.filter((edit) => edit.to !== undefined).map((edit) => ({ name: edit.name, valueString: edit.to as string }));
  return [...kept, ...changed];
}

/**
 * Sends the change: reads the project's whole list, applies the edits, sends it whole. Administrators only. Resolves
 * once the server has recorded its AuditEvent (it does so right after it answers), so the list of changes shows it;
 * if that takes longer than a few seconds, resolves anyway: the change itself is made.
 */
export async function changeSettings(medplum: MedplumClient, projectId: string, edits: readonly SettingEdit[]): Promise<void> {
  const before = await latestChange(medplum);
  const { project } = await medplum.get<{ project: Project }>(`admin/projects/${projectId}`, { cache: 'no-cache' });
  await medplum.post(`admin/projects/${projectId}/settings`, applyEdits(project.setting ?? [], edits));
  for (let attempt = 0; attempt < 20 && (await latestChange(medplum)) === before; attempt++) {
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

/** The id of the latest AuditEvent of a settings change, if any. */
async function latestChange(medplum: MedplumClient): Promise<string | undefined> {
  const bundle = await medplum.search('AuditEvent', { subtype: `${SETTINGS_CHANGE_SUBTYPE.system}|${SETTINGS_CHANGE_SUBTYPE.code}`, _sort: '-date', _count: '1' }, { cache: 'no-cache' });
  return bundle.entry?.[0]?.resource?.id;
}
