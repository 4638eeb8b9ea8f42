/**
 * Usage, budgets and governance in the review console, in a real browser (Debian's Chromium) against the standalone
 * host and the LLM emulator. Dr. Carter chats twice and Dr. Stone once through the API (the emulator reports the
 * tokens, so the totals are known); Rosa Reyes, the compliance officer, reads the usage chart and tables with those
 * totals and the budgets left, and the governance settings with no control to change them (the settings route answers
 * her 403); Dr. Carter's own usage tab counts only her replies. Priya Shah, a project administrator, changes a setting
 * in the console, confirms what changes, and the change is in effect (`GET /v1/models` says so for Dr. Carter) and in
 * the audit trail, an AuditEvent naming her, the setting, and its values before and after. The screenshots are the
 * ones docs/app.md shows; axe finds no accessibility violation on any page.
 */
import { fileURLToPath } from 'node:url';
import type { AuditEvent, ProjectMembership } from '@medplum/fhirtypes';
import type { Browser } from 'playwright-core';
import { browserTestsRun, launchChromium } from '../support/browser.ts';
import { CHAT_MODEL, startChatHost, type ChatHost } from '../support/chat-host.ts';
import { projectAdministrator } from '../support/project-administrator.ts';
import { accessibilityViolations, signInToReview } from '../support/review-console.ts';
import { waitFor } from '../support/wait-for.ts';
import { ensureWebAppBuilt } from '../support/web-app-build.ts';
import { setPassword } from '../support/web-journey.ts';

const CLINICIAN = { email: 'alice.carter@example.org', password: 'a demo password for the clinician' };
const REVIEWER = { email: 'rosa.reyes@example.org', password: 'a demo password for the reviewer' };
const ADMINISTRATOR = { email: 'priya.shah@example.org', password: 'a password for the administrator' };
const IMAGES = fileURLToPath(new URL('../../docs/images/', import.meta.url));
// The emulator reports these tokens: Dr. Carter's two turns 15 and 30 (45), Dr. Stone's one 150; 195 in all.
const TURNS = [
  { who: 'carter', content: 'Summarise the potassium guideline', usage: { promptTokens: 10, completionTokens: 5 } },
  { who: 'carter', content: 'And for patients on ACE inhibitors?', usage: { promptTokens: 20, completionTokens: 10 } },
  { who: 'stone', content: 'Dosing of amoxicillin in adults', usage: { promptTokens: 100, completionTokens: 50 } },
];

(browserTestsRun() ? describe : describe.skip)('usage, budgets and governance settings in the review console', () => {
  let chat: ChatHost;
  let browser: Browser;
  let projectId: string;
  let ids: Record<string, string>;
  let administrator: ProjectMembership;
  let stone: ProjectMembership;

  async function api(path: string, membershipId: string, init: RequestInit = {}): Promise<Response> {
    const token = await chat.host.accessTokenFor(membershipId);
    return fetch(`${chat.host.url}${path}`, { ...init, headers: { Authorization: `Bearer ${token}`, 'X-Project-ID': projectId, 'Content-Type': 'application/json' } });
  }

  beforeAll(async () => {
    await ensureWebAppBuilt();
    chat = await startChatHost();
    const project = await chat.host.seedProject();
    projectId = project.projectId;
    ids = project.ids;
    await setPassword(chat.host, ids['reviewer-user'], REVIEWER.password);
    await setPassword(chat.host, ids['practitioner-user'], CLINICIAN.password);
    const client = await projectAdministrator(chat.host, project);
    administrator = await client.post(`admin/projects/${projectId}/invite`, {
      resourceType: 'Practitioner',
      firstName: 'Priya',
      lastName: 'Shah',
      email: ADMINISTRATOR.email,
      password: ADMINISTRATOR.password,
      membership: { admin: true },
    });
    stone = await client.post(`admin/projects/${projectId}/invite`, {
      resourceType: 'Practitioner',
      firstName: 'Ben',
      lastName: 'Stone',
      membership: { accessPolicy: { reference: `AccessPolicy/${ids['policy-own-conversations']}` } },
    });
    await client.post(`admin/projects/${projectId}/settings`, [
      { name: 'AI_BUDGET_USER_DAY_TOKENS', valueInteger: 10_000 },
      { name: 'AI_BUDGET_PROJECT_MONTH_TOKENS', valueInteger: 1_000_000 },
    ]);
    for (const turn of TURNS) {
      const response = await api('v1/chat/completions', turn.who === 'carter' ? ids['practitioner-membership'] : (stone.id as string), {
        method: 'POST',
        body: JSON.stringify({ model: CHAT_MODEL, messages: [{ role: 'user', content: `${turn.content} [emulator-behaviour ${JSON.stringify({ usage: turn.usage })}]` }] }),
      });
      expect(response.status).toBe(200);
    }
    browser = await launchChromium();
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await chat?.close();
  });

  test('the reviewer reads the usage chart and tables with the right totals, and the governance settings without a control to change them', async () => {
    const context = await browser.newContext({ viewport: { width: 1100, height: 900 } });
    const page = await context.newPage();
    await signInToReview(page, chat.host.url, REVIEWER);
    await page.getByRole('tab', { name: 'Usage and budgets' }).click();

    // Her report counts the replies her AccessPolicy reads: every reply of the project.
    await page.getByText(/^The replies you may read, .*195 tokens in 3 replies/).waitFor();
    await page.getByRole('figure', { name: 'Tokens per day and model' }).locator('svg .recharts-bar-rectangle').first().waitFor();
    const byUser = page.getByRole('table', { name: 'Usage by user' });
    // The user's name, read with her own access (her policy reads Practitioners), and the sums of her two replies.
    const carter = byUser.getByRole('row').filter({ hasText: 'Alice Carter' });
    await carter.waitFor();
    await expect(carter.getByRole('cell').allInnerTexts()).resolves.toEqual(['Dr. Alice Carter', '2', '30', '15', '45', expect.any(String), '9,955']);
    await expect(byUser.getByRole('row').filter({ hasText: 'Ben Stone' }).getByRole('cell').allInnerTexts()).resolves.toEqual(['Ben Stone', '1', '100', '50', '150', expect.any(String), '9,850']);
    const byModel = page.getByRole('table', { name: 'Usage by model' });
    await expect(byModel.getByRole('row').filter({ hasText: CHAT_MODEL }).getByRole('cell').nth(4).innerText()).resolves.toBe('195');
    // The day the server put the replies in (UTC), as the API says.
    const { data } = (await (await api('v1/usage', ids['reviewer-membership'])).json()) as { data: { day: string }[] };
    const today = data[0].day;
    await expect(page.getByRole('table', { name: 'Usage by day' }).getByRole('row').filter({ hasText: today }).getByRole('cell').allInnerTexts()).resolves.toEqual([today, '3', '130', '65', '195', expect.any(String)]);
    const projectMonth = page.getByRole('table', { name: 'Budgets' }).getByRole('row').filter({ hasText: 'AI_BUDGET_PROJECT_MONTH_TOKENS' });
    await expect(projectMonth.getByRole('cell').allInnerTexts()).resolves.toEqual([expect.any(String), '1,000,000 tokens', '195 tokens', '999,805 tokens', expect.stringMatching(/-01 00:00 UTC$/)]);
    const userDay = page.getByRole('table', { name: 'Budgets' }).getByRole('row').filter({ hasText: 'AI_BUDGET_USER_DAY_TOKENS' });
    // Her own (she chats with none); Dr. Carter's is in her row above.
    await expect(userDay.getByRole('cell').allInnerTexts()).resolves.toEqual([expect.any(String), '10,000 tokens', 'Yours: 0 tokens', 'Yours: 10,000 tokens', expect.any(String)]);
    await page.screenshot({ path: `${IMAGES}app-review-usage.png`, fullPage: true });
    expect(await accessibilityViolations(page)).toEqual([]);

    // Another period: the report of those days, from the server (none of these replies in it).
    await page.getByRole('textbox', { name: 'From', exact: true }).fill('2025-01-01');
    await page.getByRole('textbox', { name: 'To', exact: true }).fill('2025-01-31');
    await page.getByRole('button', { name: 'Show' }).click();
    await page.getByText(/^The replies you may read, 2025-01-01 to 2025-01-31: 0 tokens in 0 replies/).waitFor();
    await page.getByText('No replies in this period.').waitFor();
    // More than the report allows (366 days): the server's reason, as a sentence.
    await page.getByRole('textbox', { name: 'From', exact: true }).fill('2020-01-01');
    await page.getByRole('button', { name: 'Show' }).click();
    await page.getByRole('alert').filter({ hasText: 'The usage could not be read' }).waitFor();

    await page.getByRole('tab', { name: 'Governance' }).click();
    await page.getByRole('table', { name: 'Governance settings as stored' }).getByRole('row').filter({ hasText: 'AI_BUDGET_USER_DAY_TOKENS' }).waitFor();
    await expect(page.getByRole('table', { name: 'What a question about a patient does on each model' }).getByRole('row').filter({ hasText: CHAT_MODEL }).innerText()).resolves.toMatch(/sent as it is/i);
    await expect(page.getByRole('form', { name: 'Change the governance settings' }).count()).resolves.toBe(0);
    await expect(page.getByRole('button', { name: 'Review the change' }).count()).resolves.toBe(0);
    expect(await accessibilityViolations(page)).toEqual([]);

    // And the server refuses her the change, whatever a page shows.
    const refused = await api(`admin/projects/${projectId}/settings`, ids['reviewer-membership'], { method: 'POST', body: JSON.stringify([{ name: 'AI_PATIENT_DATA_MODELS', valueString: 'none' }]) });
    expect(refused.status).toBe(403);
    await context.close();
  }, 120_000);

  test("a clinician's usage tab counts only the replies she may read: her own", async () => {
    const context = await browser.newContext({ viewport: { width: 1100, height: 900 } });
    const page = await context.newPage();
    await signInToReview(page, chat.host.url, CLINICIAN);
    await page.getByRole('tab', { name: 'Usage and budgets' }).click();
    await page.getByText(/^The replies you may read, .*45 tokens in 2 replies/).waitFor();
    const byUser = page.getByRole('table', { name: 'Usage by user' });
    await expect(byUser.getByRole('row').allInnerTexts()).resolves.toEqual([expect.stringMatching(/^User/), expect.stringMatching(/^Dr\. Alice Carter\s+2\s+30\s+15\s+45/)]);
    expect(await accessibilityViolations(page)).toEqual([]);
    await context.close();
  }, 120_000);

  test('an administrator changes a setting after confirming what changes; it is in effect and in the audit trail', async () => {
    const models = async (): Promise<string | undefined> => {
      const list = (await (await api('v1/models', ids['practitioner-membership'])).json()) as { data: { id: string; fhirgate: { patient_data: string } }[] };
      return list.data.find((model) => model.id === CHAT_MODEL)?.fhirgate.patient_data;
    };
    expect(await models()).toBe('cleared');

    const context = await browser.newContext({ viewport: { width: 1100, height: 900 } });
    const page = await context.newPage();
    await signInToReview(page, chat.host.url, ADMINISTRATOR);
    await page.getByRole('tab', { name: 'Governance' }).click();
    const form = page.getByRole('form', { name: 'Change the governance settings' });
    await form.waitFor();
    await form.getByRole('textbox', { name: 'Models cleared for patient data' }).fill('none');
    await page.screenshot({ path: `${IMAGES}app-review-governance.png`, fullPage: true });
    expect(await accessibilityViolations(page)).toEqual([]);

    await form.getByRole('button', { name: 'Review the change' }).click();
    const dialog = page.getByRole('dialog', { name: 'Change the governance settings?' });
    await expect(dialog.getByRole('list', { name: 'What changes' }).innerText()).resolves.toBe('Models cleared for patient data (AI_PATIENT_DATA_MODELS): not set → none');
    expect(await accessibilityViolations(page)).toEqual([]);
    await dialog.getByRole('button', { name: 'Confirm the change' }).click();
    await page.getByText('Settings changed').waitFor();

    // In effect: the project clears no model now, so a question about a patient is refused on it.
    await waitFor(async () => ((await models()) === 'refused' ? true : undefined), 10_000);
    // In the audit trail, recorded by the server: who, the setting, from what to what; the console lists it.
    const changes = await waitFor(async () => {
      const bundle = (await (await api('fhir/R4/AuditEvent?subtype=urn:fhirgate:audit|governance-settings-change&_count=20', ids['reviewer-membership'])).json()) as { entry?: { resource: AuditEvent }[] };
      const found = (bundle.entry ?? []).map((entry) => entry.resource).filter((event) => event.entity?.[0]?.detail?.some((detail) => detail.type === 'AI_PATIENT_DATA_MODELS'));
      return found.length > 0 ? found : undefined;
    });
    expect(changes).toHaveLength(1);
    expect(changes[0].agent[0].who?.reference).toBe(administrator.profile?.reference);
    expect(changes[0].entity?.[0].detail).toEqual([{ type: 'AI_PATIENT_DATA_MODELS', valueString: JSON.stringify({ from: null, to: 'none' }) }]);
    await page.getByRole('row').filter({ hasText: "AI_PATIENT_DATA_MODELS from not set to 'none'" }).waitFor();
    await expect(page.getByRole('table', { name: 'Governance settings as stored' }).getByRole('row').filter({ hasText: 'AI_PATIENT_DATA_MODELS' }).innerText()).resolves.toContain('none');
    await context.close();
  }, 120_000);
});
