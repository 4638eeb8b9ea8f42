/**
 * The usage report, the governance read route and the AuditEvent of a settings change, on a standalone host with
 * the emulator: each caller's usage report counts exactly the replies their own AccessPolicy reads (the
 * administrator and the reviewer: every reply; a clinician: their own); every member reads the project's governance
 * settings, never its secrets, with each budget's limit, spend and what remains; a change through Medplum's
 * settings route is recorded as an AuditEvent of who changed what from what to what, and a reviewer cannot make one.
 */
import type { MedplumClient } from '@medplum/core';
import type { AuditEvent, ProjectMembership } from '@medplum/fhirtypes';
import type { SeededProject } from '../hosts/standalone/seed.ts';
import { projectAdministrator } from '../../test/support/project-administrator.ts';
import { CHAT_MODEL, startChatHost, type ChatHost } from '../../test/support/chat-host.ts';
import { waitFor } from '../../test/support/wait-for.ts';
import { SETTINGS_CHANGE_SUBTYPE } from './settings-change-audit.ts';

describe('usage and governance for the people accountable', () => {
  let chat: ChatHost;
  let project: SeededProject;
  let admin: MedplumClient;
  let bob: ProjectMembership;

  async function call(path: string, membershipId: string, init: RequestInit = {}): Promise<Response> {
    const token = await chat.host.accessTokenFor(membershipId);
    return fetch(`${chat.host.url}${path}`, { ...init, headers: { Authorization: `Bearer ${token}`, 'X-Project-ID': project.projectId, 'Content-Type': 'application/json' } });
  }

  async function turn(membershipId: string, content: string, usage: { promptTokens: number; completionTokens: number }): Promise<void> {
    const response = await call('v1/chat/completions', membershipId, {
      method: 'POST',
      body: JSON.stringify({ model: CHAT_MODEL, messages: [{ role: 'user', content: `${content} [emulator-behaviour ${JSON.stringify({ usage })}]` }] }),
    });
    expect(response.status).toBe(200);
  }

  async function totalOf(membershipId: string): Promise<{ total: { replies: number; total_tokens: number }; data: { user: string }[]; scope: string }> {
    const response = await call('v1/usage', membershipId);
    expect(response.status).toBe(200);
    return (await response.json()) as never;
  }

  beforeAll(async () => {
    chat = await startChatHost();
    project = await chat.host.seedProject();
    admin = await projectAdministrator(chat.host, project);
    bob = await admin.post(`admin/projects/${project.projectId}/invite`, {
      resourceType: 'Practitioner',
      firstName: 'Bob',
      lastName: 'Stone',
      membership: { accessPolicy: { reference: `AccessPolicy/${project.ids['policy-own-conversations']}` } },
    });
    await admin.post(`admin/projects/${project.projectId}/settings`, [{ name: 'AI_BUDGET_USER_DAY_TOKENS', valueInteger: 100_000 }, { name: 'AI_BUDGET_PROJECT_MONTH_TOKENS', valueString: '1_000_000' }]);
    await admin.post(`admin/projects/${project.projectId}/secrets`, [{ name: 'LAB_INTERFACE_TOKEN', valueString: 'sk-project-secret-never-shown' }]);
    await turn(project.ids['practitioner-membership'], 'one', { promptTokens: 10, completionTokens: 5 });
    await turn(project.ids['practitioner-membership'], 'two', { promptTokens: 20, completionTokens: 10 });
    await turn(bob.id as string, 'three', { promptTokens: 100, completionTokens: 50 });
  }, 60_000);

  afterAll(async () => {
    await chat?.close();
  });

  test('the usage report counts exactly the replies the caller may read', async () => {
    const everything = { replies: 3, total_tokens: 15 + 30 + 150 };
    const asAdmin = await totalOf(project.ids['client-membership']);
    expect(asAdmin).toMatchObject({ scope: 'project', total: everything });
    // The reviewer reads every Communication of the project, so hers is the project's.
    expect(await totalOf(project.ids['reviewer-membership'])).toMatchObject({ scope: 'readable', total: everything });
    // A clinician reads the replies addressed to them: their own usage only.
    const bobs = await totalOf(bob.id as string);
    expect(bobs.total).toMatchObject({ replies: 1, total_tokens: 150 });
    expect(new Set(bobs.data.map((row) => row.user))).toEqual(new Set([bob.profile?.reference]));
  });

  test('every member reads the governance settings, with the budgets left, and never the secrets', async () => {
    const response = await call('v1/governance', project.ids['reviewer-membership']);
    expect(response.status).toBe(200);
    const text = await response.text();
    expect(text).not.toContain('sk-project-secret-never-shown');
    expect(text).not.toContain('LAB_INTERFACE_TOKEN');
    const governance = JSON.parse(text) as Record<string, unknown>;
    expect(governance).toMatchObject({
      object: 'governance',
      can_change: false,
      model_access: 'all',
      settings: [
        { name: 'AI_BUDGET_USER_DAY_TOKENS', value: '100000' },
        { name: 'AI_BUDGET_PROJECT_MONTH_TOKENS', value: '1_000_000' },
      ],
      patient_data: { policy: 'refuse', project_models: null, models: [{ id: CHAT_MODEL, patient_data: 'cleared' }] },
      problems: [],
    });
    const budgets = governance.budgets as { setting: string; limit: number; spent: number; remaining: number }[];
    // The project's month counts everyone's tokens; the user's day budget counts the caller's own (none for the reviewer).
    expect(budgets.find((budget) => budget.setting === 'AI_BUDGET_PROJECT_MONTH_TOKENS')).toMatchObject({ limit: 1_000_000, spent: 195, remaining: 1_000_000 - 195 });
    expect(budgets.find((budget) => budget.setting === 'AI_BUDGET_USER_DAY_TOKENS')).toMatchObject({ limit: 100_000, spent: 0, remaining: 100_000 });
    const asBob = (await (await call('v1/governance', bob.id as string)).json()) as { budgets: { setting: string; spent: number }[] };
    expect(asBob.budgets.find((budget) => budget.setting === 'AI_BUDGET_USER_DAY_TOKENS')?.spent).toBe(150);
    expect(((await (await call('v1/governance', project.ids['client-membership'])).json()) as { can_change: boolean }).can_change).toBe(true);
  });

  test("a change through the settings route is recorded as an AuditEvent of who changed what; the reviewer's is refused", async () => {
    const refused = await call(`admin/projects/${project.projectId}/settings`, project.ids['reviewer-membership'], {
      method: 'POST',
      body: JSON.stringify([{ name: 'AI_PATIENT_DATA_POLICY', valueString: 'de-identify' }]),
    });
    expect(refused.status).toBe(403);

    const current = ((await (await call('v1/governance', project.ids['client-membership'])).json()) as { settings: { name: string }[] }).settings;
    expect(current.some((entry) => entry.name === 'AI_PATIENT_DATA_POLICY')).toBe(false);
    await admin.post(`admin/projects/${project.projectId}/settings`, [
      { name: 'AI_BUDGET_USER_DAY_TOKENS', valueInteger: 50_000 },
      { name: 'AI_BUDGET_PROJECT_MONTH_TOKENS', valueString: '1_000_000' },
      { name: 'AI_PATIENT_DATA_POLICY', valueString: 'de-identify' },
    ]);
    const events = await waitFor(async () => {
      const found = await admin.searchResources('AuditEvent', { subtype: `${SETTINGS_CHANGE_SUBTYPE.system}|${SETTINGS_CHANGE_SUBTYPE.code}` }, { cache: 'no-cache' });
      return found.length >= 2 ? found : undefined;
    });
    // The set-up's first change (from nothing) and this one; the reviewer's refused call recorded nothing.
    const latest = [...events].sort((left, right) => (right.recorded ?? '').localeCompare(left.recorded ?? ''))[0] as AuditEvent;
    expect(latest.agent[0].who?.reference).toBe(`ClientApplication/${project.client?.id}`);
    expect(latest.entity?.[0].what?.reference).toBe(`Project/${project.projectId}`);
    expect(latest.entity?.[0].detail).toEqual([
      { type: 'AI_BUDGET_USER_DAY_TOKENS', valueString: JSON.stringify({ from: '100000', to: '50000' }) },
      { type: 'AI_PATIENT_DATA_POLICY', valueString: JSON.stringify({ from: null, to: 'de-identify' }) },
    ]);
    expect(latest.outcomeDesc).toBe("AI governance settings changed: AI_BUDGET_USER_DAY_TOKENS from '100000' to '50000'; AI_PATIENT_DATA_POLICY from not set to 'de-identify'");
    // The reviewer reads it, as she reads every AuditEvent.
    const asReviewer = await call(`fhir/R4/AuditEvent/${latest.id}`, project.ids['reviewer-membership']);
    expect(asReviewer.status).toBe(200);
    expect(events).toHaveLength(2);
  });
});
