/**
 * The AuditEvent of a settings change, with fhirgate mounted as in a Medplum server: in front of Medplum's body
 * parsers and its own `POST /admin/projects/:projectId/settings` (here a stand-in that replaces `Project.setting`
 * with the system repository, as Medplum's admin/project.ts does). fhirgate never reads the body, records who
 * changed what once the route answered 2xx, and records nothing for a refused or unchanged call.
 */
import { OperationOutcomeError, forbidden } from '@medplum/core';
import type { AuditEvent, Project, ProjectMembership, ProjectSetting } from '@medplum/fhirtypes';
import express, { type Express } from 'express';
import request from 'supertest';
import { startLlmEmulator, type LlmEmulator } from '../../test/emulator/index.ts';
import { createMedplumStandIn, StandInAuthenticatedContext, type MedplumStandIn, type StandInProject } from '../../test/support/medplum-stand-in.ts';
import { waitFor } from '../../test/support/wait-for.ts';
import { mountFhirgate } from '../hosts/medplum-server.ts';
import { governanceSettingChanges, SETTINGS_CHANGE_SUBTYPE } from './settings-change-audit.ts';

describe('which settings a change changed', () => {
  test("only fhirgate's governance settings, each from what to what, whatever value[x] holds it", () => {
    const before: ProjectSetting[] = [
      { name: 'AI_BUDGET_USER_DAY_TOKENS', valueInteger: 5000 },
      { name: 'AI_PATIENT_DATA_POLICY', valueString: 'refuse' },
      { name: 'SOME_OTHER_SETTING', valueString: 'a' },
    ];
    const after: ProjectSetting[] = [
      { name: 'AI_BUDGET_USER_DAY_TOKENS', valueString: '5000' },
      { name: 'AI_MODEL_ACCESS', valueString: 'access-policy' },
      { name: 'SOME_OTHER_SETTING', valueString: 'b' },
    ];
    expect(governanceSettingChanges(before, after)).toEqual([
      { name: 'AI_MODEL_ACCESS', from: undefined, to: 'access-policy' },
      { name: 'AI_PATIENT_DATA_POLICY', from: 'refuse', to: undefined },
    ]);
  });
});

describe('fhirgate in front of Medplum\'s settings route', () => {
  let emulator: LlmEmulator;
  let medplum: MedplumStandIn;
  let clinic: StandInProject;

  beforeAll(async () => {
    emulator = await startLlmEmulator();
  });

  afterAll(async () => {
    await emulator.close();
  });

  beforeEach(async () => {
    medplum = await createMedplumStandIn();
    clinic = await medplum.createProject('clinic');
  });

  /** Medplum's order: request context, fhirgate, body parsers, then its admin route (administrators only). */
  function medplumApp(): Express {
    const app = express();
    app.use(medplum.attachRequestContext);
    mountFhirgate(app, medplum.functions, { llm: { providers: { emulator: { kind: 'openai-compatible', baseUrl: `${emulator.url}/v1`, models: ['echo'] } }, defaultModel: 'emulator/echo' } });
    app.use(express.json());
    app.post('/admin/projects/:projectId/settings', medplum.authenticateRequest, async (incoming, response) => {
      const context = medplum.requestContextStore.getStore();
      if (!(context instanceof StandInAuthenticatedContext) || context.membership.admin !== true || context.project.id !== incoming.params.projectId) {
        throw new OperationOutcomeError(forbidden);
      }
      const project = await medplum.store.readResource<Project>('Project', context.project.id);
      response.json(await medplum.store.updateResource<Project>({ ...project, setting: incoming.body as ProjectSetting[] }));
    });
    app.use(medplum.errorHandler);
    return app;
  }

  async function changes(): Promise<AuditEvent[]> {
    const events = await medplum.store.searchResources<AuditEvent>({ resourceType: 'AuditEvent' });
    return events.filter((event) => event.subtype?.some((coding) => coding.code === SETTINGS_CHANGE_SUBTYPE.code));
  }

  test('an administrator\'s change is recorded with who, what from what to what; a refused or unchanged call records nothing', async () => {
    const app = medplumApp();
    const post = async (settings: ProjectSetting[]): Promise<number> =>
      (
        await request(app)
          .post(`/admin/projects/${clinic.project.id}/settings`)
          .set('Authorization', `Bearer ${await medplum.issueAccessToken(clinic.login, clinic.membership)}`)
          .send(settings)
      ).status;

    // Not an administrator: Medplum refuses, nothing changes, nothing is recorded.
    expect(await post([{ name: 'AI_PATIENT_DATA_POLICY', valueString: 'de-identify' }])).toBe(403);

    await medplum.store.updateResource<ProjectMembership>({ ...clinic.membership, admin: true });
    expect(await post([{ name: 'AI_PATIENT_DATA_POLICY', valueString: 'de-identify' }])).toBe(200);
    const [event] = await waitFor(async () => {
      const found = await changes();
      return found.length > 0 ? found : undefined;
    });
    expect(event).toMatchObject({
      action: 'U',
      agent: [{ who: { reference: `Practitioner/${clinic.practitioner.id}` }, requestor: true }],
      entity: [{ what: { reference: `Project/${clinic.project.id}` }, detail: [{ type: 'AI_PATIENT_DATA_POLICY', valueString: '{"from":null,"to":"de-identify"}' }] }],
      outcomeDesc: "AI governance settings changed: AI_PATIENT_DATA_POLICY from not set to 'de-identify'",
    });
    expect(event.meta?.project).toBe(clinic.project.id);

    // The same list again changes nothing: nothing more is recorded.
    expect(await post([{ name: 'AI_PATIENT_DATA_POLICY', valueString: 'de-identify' }])).toBe(200);
    expect(await post([{ name: 'AI_PATIENT_DATA_POLICY', valueString: 'de-identify' }, { name: 'AI_BUDGET_USER_DAY_TOKENS', valueInteger: 100 }])).toBe(200);
    const all = await waitFor(async () => {
      const found = await changes();
      return found.length > 1 ? found : undefined;
    });
    expect(all).toHaveLength(2);
  });
});
