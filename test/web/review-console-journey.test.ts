/**
 * The review console's filters, disclosures, device sign-ins and exports in a real browser (Debian's Chromium)
 * against the standalone host and the LLM emulator. Dr. Carter chats through the API (as any client): about Maria
 * Lopez, without a patient, once more when the provider fails, and about Maria on a model not cleared for patient
 * data (sent de-identified); the demo monitor exchanges its key once rightly
 * then wrongly until it is locked out. Rosa Reyes, the compliance officer, finds Dr. Carter's conversation about Maria by its filters,
 * reads what the model was sent, its cost and latency and the disclosure, exports the conversation and Maria's
 * disclosures as FHIR Bundles, and reads the device sign-ins. Dr. Carter on the same console sees only what her
 * AccessPolicy lets her read. The screenshots are those docs/app.md shows; axe finds no violation on any page.
 */
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import type { AuditEvent, Bundle, Communication, Resource } from '@medplum/fhirtypes';
import type { Browser, Locator, Page } from 'playwright-core';
import { browserTestsRun, launchChromium } from '../support/browser.ts';
import { CHAT_MODEL } from '../support/chat-host.ts';
import { accessibilityViolations, CLINICIAN, MONITOR, NOT_CLEARED_MODEL, REVIEWER, startReviewHost, type ReviewHost } from '../support/review-console.ts';
import { waitFor } from '../support/wait-for.ts';
import { ensureWebAppBuilt } from '../support/web-app-build.ts';

const ABOUT_MARIA = 'Is Maria due for a potassium check?';
const NO_PATIENT = 'What is the usual adult dose of amoxicillin?';
const FAILING = `Summarise the guideline [emulator-behaviour ${JSON.stringify({ errorStatus: 500 })}]`;
const DE_IDENTIFIED = 'Has Maria Lopez been taking her lisinopril?';
const IMAGES = fileURLToPath(new URL('../../docs/images/', import.meta.url));

/** The rows of the list on the page (its header row aside). */
function resultRows(page: Page): Locator {
  return page.locator('table tbody tr');
}

/**
 * Waits until the list shows `count` rows (the server's answer to the last search), each with `text` when given: a
 * list of the right length from the search before (or rows still rendering) does not pass for the answer.
 */
async function rowsCount(page: Page, count: number, text?: string): Promise<void> {
  // Polled from the test: the app's Content-Security-Policy lets no string be evaluated in the page.
  const answered = async (): Promise<boolean> =>
    (await resultRows(page).count()) === count && (text === undefined || (await resultRows(page).filter({ hasText: text }).count()) === count);
  await waitFor(async () => ((await answered()) ? true : undefined), 30_000);
}

/** Clicks `button` and reads the Bundle the browser downloads. */
async function downloadedBundle(page: Page, button: Locator): Promise<Bundle> {
  const [download] = await Promise.all([page.waitForEvent('download'), button.click()]);
  return JSON.parse(await readFile((await download.path()) ?? '', 'utf8')) as Bundle;
}

function resourcesOf(bundle: Bundle): Resource[] {
  return (bundle.entry ?? []).flatMap((entry) => (entry.resource ? [entry.resource] : []));
}

/** Picks `option` of the labelled Mantine select. */
async function choose(page: Page, label: string, option: string): Promise<void> {
  await page.getByRole('textbox', { name: label }).click();
  await page.getByRole('option', { name: option }).click();
}

(browserTestsRun() ? describe : describe.skip)('a reviewer filters, reads and exports the audit trail in the review console', () => {
  let review: ReviewHost;
  let browser: Browser;
  let maria: string;
  let conversationId: string;
  let replyId: string;
  let deIdentifiedId: string;

  async function chat(content: string, patientId?: string, model = CHAT_MODEL): Promise<{ conversation_id: string; status: number }> {
    const response = await review.api('v1/chat/completions', 'practitioner-membership', {
      method: 'POST',
      body: JSON.stringify({ model, messages: [{ role: 'user', content }], ...(patientId ? { patient_id: patientId } : {}) }),
    });
    const body = (await response.json()) as { conversation_id: string };
    return { ...body, status: response.status };
  }

  beforeAll(async () => {
    await ensureWebAppBuilt();
    review = await startReviewHost();
    maria = review.project.ids['patient-in-care-team-1'];
    const aboutMaria = await chat(ABOUT_MARIA, maria);
    expect(aboutMaria.status).toBe(200);
    conversationId = aboutMaria.conversation_id;
    expect((await chat(NO_PATIENT)).status).toBe(200);
    expect((await chat(FAILING)).status).toBeGreaterThanOrEqual(500);
    const deIdentified = await chat(DE_IDENTIFIED, maria, NOT_CLEARED_MODEL);
    expect(deIdentified.status).toBe(200);
    deIdentifiedId = deIdentified.conversation_id;
    expect(await review.deviceExchange(MONITOR.key)).toBe(200);
    expect(await review.deviceExchange('Not-The-Monitor-Key-0000-aaaa')).toBe(403);
    expect(await review.deviceExchange('Not-The-Monitor-Key-0000-bbbb')).toBe(429);
    const records = (await (await review.api(`fhir/R4/Communication?part-of=Communication/${conversationId}`, 'reviewer-membership')).json()) as Bundle<Communication>;
    replyId = records.entry?.map((entry) => entry.resource).find((record) => record?.inResponseTo?.length)?.id ?? '';
    expect(replyId).not.toBe('');
    browser = await launchChromium();
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
    await review?.close();
  });

  test("the reviewer finds Dr. Carter's conversation by its filters, reads what the model was sent and exports it", async () => {
    const context = await browser.newContext({ viewport: { width: 1200, height: 800 } });
    const page = await context.newPage();
    await review.signIn(page, REVIEWER);
    const filters = page.getByRole('form', { name: 'Filter the conversations' });

    // By user and patient: the two conversations about Maria, not the ones without a patient.
    await choose(page, 'User', 'Alice Carter');
    await filters.getByLabel('Patient id').fill(maria);
    await filters.getByRole('button', { name: 'Search' }).click();
    await rowsCount(page, 2);
    expect(await accessibilityViolations(page)).toEqual([]);

    // By outcome: the failed reply only; by model and outcome completed: the two replies that answered.
    await filters.getByLabel('Patient id').fill('');
    await choose(page, 'Outcome', 'failed');
    await filters.getByRole('button', { name: 'Search' }).click();
    await page.getByText('these are the replies that match').waitFor();
    await rowsCount(page, 1);
    await resultRows(page).filter({ hasText: /not.done/i }).waitFor();
    await choose(page, 'Outcome', 'completed');
    await filters.getByLabel('Model').fill(CHAT_MODEL);
    await filters.getByRole('button', { name: 'Search' }).click();
    // The two replies that answered, each naming the model.
    await rowsCount(page, 2, CHAT_MODEL);
    await filters.getByLabel('Model').fill('anthropic/claude-haiku-4-5');
    await filters.getByRole('button', { name: 'Search' }).click();
    await page.getByText('No results').waitFor();

    // The conversation about Maria on the cleared model, opened from its reply's row.
    await filters.getByRole('button', { name: 'Clear' }).click();
    await filters.getByLabel('Patient id').fill(maria);
    await filters.getByLabel('Model').fill(CHAT_MODEL);
    await filters.getByRole('button', { name: 'Search' }).click();
    await rowsCount(page, 1, CHAT_MODEL);
    await resultRows(page).first().click();
    await page.waitForURL(`**/review/conversations/${conversationId}`);
    const reply = page.getByLabel('Thread').getByRole('article', { name: 'Reply' });
    await reply.getByText(`Echo: ${ABOUT_MARIA}`, { exact: true }).waitFor();
    await expect(reply.getByText(/^Cost: \$\d+\.\d+ · Answered in: \d+\.\d+ s$/).count()).resolves.toBe(1);
    await reply.getByText('Patient summary sent to the model').click();
    await expect(reply.locator('pre').first().innerText()).resolves.toContain('Maria');
    const disclosure = reply.getByLabel('Disclosure');
    await disclosure.getByText(`Patient/${maria}`).waitFor();
    await disclosure.getByText(/Patient context sent to the AI model/).waitFor();
    await page.screenshot({ path: `${IMAGES}app-review-thread.png`, fullPage: true });
    expect(await accessibilityViolations(page)).toEqual([]);

    const exported = await downloadedBundle(page, page.getByRole('button', { name: 'Export this conversation' }));
    expect(exported).toMatchObject({ resourceType: 'Bundle', type: 'collection' });
    const records = resourcesOf(exported);
    expect(records.filter((record) => record.resourceType === 'Communication').map((record) => record.id)).toEqual(expect.arrayContaining([conversationId, replyId]));
    const events = records.filter((record): record is AuditEvent => record.resourceType === 'AuditEvent');
    expect(events.length).toBeGreaterThan(0);
    expect(events.every((event) => event.entity?.some((entity) => entity.what?.reference === `Communication/${replyId}`))).toBe(true);
    // Built from what she may read: no chart record.
    expect(records.some((record) => record.resourceType === 'Patient' || record.resourceType === 'Observation')).toBe(false);
    await context.close();
  }, 180_000);

  test("the reviewer reads Maria's disclosures over a period and exports them, and reads the device sign-ins", async () => {
    const context = await browser.newContext({ viewport: { width: 1200, height: 800 } });
    const page = await context.newPage();
    await review.signIn(page, REVIEWER);
    await page.goto(`${review.host.url}fhirgate/app/review/conversations/${conversationId}`);
    await page.getByRole('button', { name: 'Every disclosure of this patient' }).click();
    await page.getByRole('tab', { name: 'Disclosures', selected: true }).waitFor();
    const filters = page.getByRole('form', { name: 'Filter the disclosures' });
    await expect(filters.getByLabel('Patient id').inputValue()).resolves.toBe(maria);
    await resultRows(page).filter({ hasText: 'Patient context sent to the AI model' }).first().waitFor();
    await page.screenshot({ path: `${IMAGES}app-review-disclosures.png` });
    expect(await accessibilityViolations(page)).toEqual([]);

    const today = new Date().toISOString().slice(0, 10);
    await filters.getByLabel('From').fill(today);
    await filters.getByLabel('To', { exact: true }).fill(today);
    await filters.getByRole('button', { name: 'Search' }).click();
    const exported = await downloadedBundle(page, page.getByRole('button', { name: 'Export these disclosures' }));
    expect(exported).toMatchObject({ resourceType: 'Bundle', type: 'collection' });
    const events = resourcesOf(exported).filter((record): record is AuditEvent => record.resourceType === 'AuditEvent');
    expect(events.length).toBeGreaterThan(0);
    expect(events.every((event) => event.entity?.some((entity) => entity.what?.reference === `Patient/${maria}`))).toBe(true);
    // With the replies they were sent for: both of Maria's conversations, this one's among them.
    const replies = resourcesOf(exported).filter((record) => record.resourceType === 'Communication');
    expect(replies.map((record) => record.id)).toContain(replyId);
    expect(replies).toHaveLength(2);

    // A disclosure opens the thread of the reply it was sent for.
    await resultRows(page).filter({ hasText: `Communication/${replyId}` }).click();
    await page.waitForURL(`**/review/conversations/${conversationId}`);
    await page.goBack();
    await expect(filters.getByLabel('Patient id').inputValue()).resolves.toBe(maria);

    // A period before the conversation holds none of them.
    await filters.getByLabel('From').fill('2020-01-01');
    await filters.getByLabel('To', { exact: true }).fill('2020-12-31');
    await filters.getByRole('button', { name: 'Search' }).click();
    await page.getByText('No results').waitFor();

    await page.getByRole('tab', { name: 'Devices' }).click();
    await resultRows(page).filter({ hasText: 'Device token issued' }).first().waitFor();
    await resultRows(page).filter({ hasText: 'Device token refused: wrong API key' }).waitFor();
    await resultRows(page).filter({ hasText: 'too many failed attempts (locked out)' }).waitFor();
    await page.screenshot({ path: `${IMAGES}app-review-devices.png` });
    expect(await accessibilityViolations(page)).toEqual([]);
    await choose(page, 'Outcome', 'Refused (failed attempts, lockouts)');
    await page.getByRole('form', { name: 'Filter the device sign-ins' }).getByRole('button', { name: 'Search' }).click();
    await rowsCount(page, 2);
    await expect(resultRows(page).filter({ hasText: 'Device token refused' }).count()).resolves.toBe(2);
    await context.close();
  }, 180_000);

  test('a practitioner on the console sees her own conversations, no disclosures and no device sign-ins', async () => {
    const context = await browser.newContext({ viewport: { width: 1200, height: 800 } });
    const page = await context.newPage();
    await review.signIn(page, CLINICIAN);
    await resultRows(page).first().waitFor();
    await expect(resultRows(page).filter({ hasText: 'Alice Carter' }).count()).resolves.toBe(await resultRows(page).count());

    await page.getByRole('tab', { name: 'Disclosures' }).click();
    await page.getByText(/forbidden/i).first().waitFor();
    await expect(resultRows(page).filter({ hasText: 'Patient context sent to the AI model' }).count()).resolves.toBe(0);
    await page.getByRole('tab', { name: 'Devices' }).click();
    await page.getByText(/forbidden/i).first().waitFor();
    await expect(resultRows(page).filter({ hasText: 'Device token' }).count()).resolves.toBe(0);
    expect(await accessibilityViolations(page)).toEqual([]);

    // The server refuses her the AuditEvents the console would list.
    for (const query of [`AuditEvent?entity=Patient/${maria}`, 'AuditEvent?type=http://dicom.nema.org/resources/ontology/DCM|110114']) {
      const refused = await review.api(`fhir/R4/${query}`, 'practitioner-membership');
      expect(refused.status).toBe(403);
    }
    // Her own conversation exports without the AuditEvents she may not read.
    await page.goto(`${review.host.url}fhirgate/app/review/conversations/${conversationId}`);
    await page.getByLabel('Thread').getByRole('article', { name: 'Reply' }).first().waitFor();
    const exported = await downloadedBundle(page, page.getByRole('button', { name: 'Export this conversation' }));
    const records = resourcesOf(exported);
    expect(records.map((record) => record.id)).toContain(replyId);
    expect(records.some((record) => record.resourceType === 'AuditEvent')).toBe(false);
    await context.close();
  }, 180_000);

  test('a turn sent de-identified shows exactly what the model got: pseudonyms, not the patient', async () => {
    const context = await browser.newContext({ viewport: { width: 1200, height: 800 } });
    const page = await context.newPage();
    await review.signIn(page, REVIEWER);
    const filters = page.getByRole('form', { name: 'Filter the conversations' });
    await filters.getByLabel('Model').fill(NOT_CLEARED_MODEL);
    await filters.getByRole('button', { name: 'Search' }).click();
    await rowsCount(page, 1);
    await resultRows(page).first().click();
    await page.waitForURL(`**/review/conversations/${deIdentifiedId}`);
    const reply = page.getByLabel('Thread').getByRole('article', { name: 'Reply' });
    await reply.getByText('de-identified', { exact: true }).waitFor();
    await reply.getByText('Messages as the model got them (de-identified)').click();
    const sent = await reply.getByLabel('Messages as the model got them (de-identified)').innerText();
    expect(sent).toContain('lisinopril');
    expect(sent).not.toMatch(/Maria|Lopez/);
    await reply.getByText('Patient summary sent to the model (de-identified)').click();
    const summary = await reply.getByLabel('Patient summary sent to the model (de-identified)').innerText();
    expect(summary).toContain('female');
    expect(summary).not.toMatch(/Maria|Lopez|1958-03-14/);
    expect(await accessibilityViolations(page)).toEqual([]);
    await context.close();
  }, 180_000);
});
