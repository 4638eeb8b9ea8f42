/**
 * The AuditEvent of a change to a project's governance settings: who changed which setting, when, from what to
 * what. A project administrator changes them with Medplum's documented settings route,
 * `POST /admin/projects/<project id>/settings` (it replaces the whole `Project.setting` list), whichever client
 * makes the call: the web app's review console, Medplum's app (Project admin → Settings), curl. fhirgate is mounted
 * in front of Medplum's routes (docs/mounting.md), so it sees that request pass: it reads the project's settings
 * before, lets the request through untouched (its body is Medplum's to read), and once the server has answered 2xx
 * reads them again and records the differences with the project's system rights. No client can leave it out, and
 * nobody but the server writes it. A change that changes none of fhirgate's settings records nothing.
 */
import type { WithId } from '@medplum/core';
import type { FhirRepository } from '@medplum/fhir-router';
import type { AuditEvent, Project, ProjectSetting, Reference } from '@medplum/fhirtypes';
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import type { FhirgateHost } from '../host.ts';
import { isGovernanceSetting, settingValueText } from './governance-route.ts';

/** The route fhirgate watches: Medplum's project admin settings route. */
export const SETTINGS_ROUTE = '/admin/projects/:projectId/settings';

/** The subtype that marks these AuditEvents (search: `AuditEvent?subtype=urn:fhirgate:audit|governance-settings-change`). */
export const SETTINGS_CHANGE_SUBTYPE = { system: 'urn:fhirgate:audit', code: 'governance-settings-change', display: 'AI governance settings changed' } as const;

/** One setting changed: its value before and after (undefined: not set). */
export interface SettingChange {
  readonly name: string;
  readonly from: string | undefined;
  readonly to: string | undefined;
}

/** The governance settings that differ between two `Project.setting` lists, in name order. */
export function governanceSettingChanges(before: readonly ProjectSetting[], after: readonly ProjectSetting[]): SettingChange[] {
  const names = new Set([...before, ...after].map((entry) => entry.name).filter(isGovernanceSetting));
  return [...names]
    .sort()
    .map((name) => ({
      name,
      from: settingValueText(before.find((entry) => entry.name === name)),
      to: settingValueText(after.find((entry) => entry.name === name)),
    }))
    .filter((change) => change.from !== change.to);
}

/** The AuditEvent of `changes` to `project`'s settings, made by `who`. */
export function buildSettingsChangeEvent(project: Reference<Project>, who: NonNullable<AuditEvent['agent'][number]['who']>, changes: readonly SettingChange[], recorded: Date): AuditEvent {
  return {
    resourceType: 'AuditEvent',
    type: { system: 'http://terminology.hl7.org/CodeSystem/audit-event-type', code: 'rest', display: 'RESTful Operation' },
    subtype: [{ system: 'http://hl7.org/fhir/restful-interaction', code: 'update', display: 'update' }, SETTINGS_CHANGE_SUBTYPE],
    action: 'U',
    recorded: recorded.toISOString(),
    outcome: '0',
    outcomeDesc: `AI governance settings changed: ${changes.map(describeChange).join('; ')}`,
    agent: [{ who, requestor: true }],
    source: { observer: { display: 'fhirgate' } },
    entity: [
      {
        what: project,
        type: { system: 'http://terminology.hl7.org/CodeSystem/audit-entity-type', code: '2', display: 'System Object' },
        detail: changes.map((change) => ({ type: change.name, valueString: JSON.stringify({ from: change.from ?? null, to: change.to ?? null }) })),
      },
    ],
  };
}

function describeChange(change: SettingChange): string {
  const value = (text: string | undefined): string => (text === undefined ? 'not set' : `'${text}'`);
  return `${change.name} from ${value(change.from)} to ${value(change.to)}`;
}

/**
 * Middleware for `POST /admin/projects/:projectId/settings` that records the AuditEvent of the change and passes
 * the request on: mounted in front of the route that makes the change.
 */
export function createSettingsChangeAudit(host: Pick<FhirgateHost, 'authenticate' | 'getSystemRepo' | 'logger'>): RequestHandler {
  return (request: Request, response: Response, next: NextFunction): void => {
    watch(host, request, response).then(
      () => next(),
      (error: unknown) => {
        // Unable to read the settings before: the change is refused rather than left unrecorded.
        next(error);
      }
    );
  };
}

async function watch(host: Pick<FhirgateHost, 'authenticate' | 'getSystemRepo' | 'logger'>, request: Request, response: Response): Promise<void> {
  const projectId = String(request.params.projectId);
  const caller = await host.authenticate(request);
  // Anyone else is refused by the route itself, and changes nothing.
  if (caller === undefined || caller.project.id !== projectId || caller.membership.admin !== true) {
    return;
  }
  const repo = await host.getSystemRepo(projectId);
  const before = (await repo.readResource<Project>('Project', projectId)).setting ?? [];
  response.once('finish', () => {
    if (response.statusCode < 200 || response.statusCode >= 300) {
      return;
    }
    recordChanges(repo, projectId, caller.profile, before).catch((error: unknown) => {
      host.logger?.error('fhirgate could not record the AuditEvent of a governance settings change', { projectId, error: String(error) });
    });
  });
}

async function recordChanges(repo: FhirRepository, projectId: string, who: NonNullable<AuditEvent['agent'][number]['who']>, before: readonly ProjectSetting[]): Promise<WithId<AuditEvent> | undefined> {
  const after = await repo.readResource<Project>('Project', projectId);
  const changes = governanceSettingChanges(before, after.setting ?? []);
  if (changes.length === 0) {
    return undefined;
  }
  return repo.createResource(buildSettingsChangeEvent({ reference: `Project/${projectId}` }, who, changes, new Date()));
}
