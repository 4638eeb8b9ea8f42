/**
 * The review console in a real browser (Debian's Chromium) against the standalone host and the LLM emulator:
 * Dr. Carter chats about Maria Lopez (through the API, as any client); Rosa Reyes, the compliance officer, signs in,
 * opens `/fhirgate/app/review`, finds the conversation, reads its thread (the prompt, the reply with its model,
 * tokens and status, and what the model was sent) and the disclosure of Maria Lopez's records. Her AccessPolicy
 * gives her no chart. Dr. Carter on the same page sees only what hers lets her read: her own conversation, and no
 * AuditEvents. The screenshots are the ones docs/app.md shows; axe finds no accessibility violation.
 */
import { fileURLToPath } from 'node:url';
import type { Browser, Page } from 'playwright-core';
import { signInToReview } from '../support/review-console.ts';
import { ensureWebAppBuilt } from '../support/web-app-build.ts';
import { accessibilityViolations, setPassword, type WebUser } from '../support/web-journey.ts';
import { browserTestsRun, launchChromium } from '../support/browser.ts';
import { CHAT_MODEL, startChatHost, type ChatHost } from '../support/chat-host.ts';

const CLINICIAN = { email: 'alice.carter@example.org', password: 'a demo password for the clinician' };
const REVIEWER = { email: 'rosa.reyes@example.org', password: 'a demo password for the reviewer' };
const PROMPT = 'Is Maria due for a potassium check?';
const IMAGES = fileURLToPath(new URL('../../docs/images/', import.meta.url));

(browserTestsRun() ? describe : describe.skip)('a reviewer reads the conversations and disclosures in the web app', () => {
  let chat: ChatHost;
  let browser: Browser;
  let projectId: string;
  let ids: Record<string, string>;
  let conversationId: string;

  async function api(path: string, membership: string, init: RequestInit = {}): Promise<Response> {
    const token = await chat.host.accessTokenFor(ids[membership]);
    return fetch(`${chat.host.url}${path}`, { ...init, headers: { Authorization: `Bearer ${token}`, 'X-Project-ID': projectId, 'Content-Type': 'application/json' } });
  }

  const signIn = (page: Page, who: WebUser): Promise<void> => signInToReview(page, chat.host.url, who);

  beforeAll(async () => {
    await ensureWebAppBuilt();
    chat = await startChatHost();
    const project = await chat.host.seedProject();
    projectId = project.projectId;
    ids = project.ids;
    await setPassword(chat.host, ids['practitioner-user'], CLINICIAN.password);
    await setPassword(chat.host, ids['reviewer-user'], REVIEWER.password);
    const response = await api('v1/chat/completions', 'practitioner-membership', {
      method: 'POST',
      body: JSON.stringify({ model: CHAT_MODEL, messages: [{ role: 'user', content: PROMPT }], patient_id: ids['patient-in-care-team-1'] }),
    });
    expect(response.status).toBe(200);
    conversationId = ((await response.json()) as { conversation_id: string }).conversation_id;
    browser = await launchChromium();
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await chat?.close();
  });

  test('the reviewer finds the conversation, reads its thread and sees the disclosure, but no chart', async () => {
    const context = await browser.newContext({ viewport: { width: 1100, height: 760 } });
    const page = await context.newPage();
    await signIn(page, REVIEWER);

    const conversationRow = page.getByRole('row').filter({ hasText: 'Alice Carter' });
    await conversationRow.first().waitFor();
    await page.screenshot({ path: `${IMAGES}app-review.png` });
    expect(await accessibilityViolations(page)).toEqual([]);

    await conversationRow.first().click();
    await page.waitForURL(`**/review/conversations/${conversationId}`);
    const thread = page.getByLabel('Thread');
    await thread.getByRole('article', { name: 'Prompt' }).getByText(PROMPT, { exact: true }).waitFor();
    const reply = thread.getByRole('article', { name: 'Reply' });
    await reply.getByText(`Echo: ${PROMPT}`, { exact: true }).waitFor();
    await expect(reply.getByText(CHAT_MODEL).count()).resolves.toBeGreaterThan(0);
    await expect(reply.getByText('completed', { exact: true }).count()).resolves.toBe(1);
    await expect(reply.getByText(/^Tokens: \d+ in, \d+ out, \d+ in all$/).count()).resolves.toBe(1);
    await reply.getByText('Patient summary sent to the model').click();
    await expect(reply.locator('pre').innerText()).resolves.toContain('Maria');
    // The thread's screenshot, with a priced model's cost, is review-console-journey.test.ts's.
    expect(await accessibilityViolations(page)).toEqual([]);

    await page.getByRole('link', { name: 'Back to the review' }).click();
    await page.getByRole('tab', { name: 'Disclosures' }).click();
    await page.getByRole('row').filter({ hasText: 'Patient context sent to the AI model' }).first().waitFor();
    expect(await accessibilityViolations(page)).toEqual([]);

    // Her AccessPolicy reads the audit trail, not the chart.
    const chart = await api(`fhir/R4/Patient/${ids['patient-in-care-team-1']}`, 'reviewer-membership');
    expect([403, 404]).toContain(chart.status);
    await context.close();
  }, 120_000);

  test('a practitioner on the review page sees only her own conversations and no AuditEvents', async () => {
    const context = await browser.newContext({ viewport: { width: 1100, height: 760 } });
    const page = await context.newPage();
    await signIn(page, CLINICIAN);
    const rows = page.getByRole('row').filter({ hasText: 'Alice Carter' });
    await rows.first().waitFor();
    await expect(rows.count()).resolves.toBe(1);

    await page.getByRole('tab', { name: 'Disclosures' }).click();
    await page.getByText(/forbidden/i).first().waitFor();
    await expect(page.getByRole('row').filter({ hasText: 'Patient context sent to the AI model' }).count()).resolves.toBe(0);

    // The server refuses her the search: AuditEvent is not in her AccessPolicy.
    const audit = await api('fhir/R4/AuditEvent?_count=100', 'practitioner-membership');
    expect(audit.status).toBe(403);
    await context.close();
  }, 120_000);
});
