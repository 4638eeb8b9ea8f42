/**
 * `Project.setting`, where a project administrator configures fhirgate for the project in the Medplum app
 * (Project → Settings): reading a setting, and the 503 that names one that does not parse.
 */
import type { Project, ProjectSetting } from '@medplum/fhirtypes';
import { AppError } from './errors.ts';

/** The setting `name`'s text, trimmed; undefined when it is absent or blank. */
export function projectSettingText(settings: readonly ProjectSetting[] | undefined, name: string): string | undefined {
  const value = settings?.find((entry) => entry.name === name)?.valueString?.trim();
  return value === undefined || value === '' ? undefined : value;
}

/** A setting the administrator has to fix: `not_configured` (503), naming it. */
export function misconfiguredSetting(setting: string, problem: string): AppError {
  return new AppError('not_configured', `The project setting ${setting} ${problem}.`, { details: { setting } });
}

/**
 * The key of one version of a project (its id and `meta.versionId`), under which what is read from its settings is
 * kept: a version never changes, and a host such as Medplum hands over a new Project object on every request.
 * Undefined when the host gives no version.
 */
export function projectVersionKey(project: Project): string | undefined {
  return project.id && project.meta?.versionId ? `${project.id}/${project.meta.versionId}` : undefined;
}
