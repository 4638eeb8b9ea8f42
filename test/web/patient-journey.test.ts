/**
 * A clinician's chat about a patient in a real browser (Debian's Chromium) against the standalone host and the LLM
 * emulator: Dr. Carter finds Maria Lopez in the patient picker (as her AccessPolicy lets her read her), sees her
 * header, asks about her, and under the reply reads which records of the chart were shared with the model, exactly
 * those the reply's record lists, and opens one; a record outside her care reads "not available" and names nothing
 * of it; a reopened conversation keeps its patient. Her conversations filter by patient and page on the server. On
 * a model her project has not cleared for patient data, her question about Maria is refused in a sentence that
 * names the model the project allows instead, and nothing is stored.
 * axe finds no violation on any page; the screenshot is the one docs/app.md shows.
 */
import { Operator } from '@medplum/core';
import type { Communication } from '@medplum/fhirtypes';
import type { Browser, Page } from 'playwright-core';
import type { SeededProject } from '../../plugin/hosts/standalone/seed.ts';
import { browserTestsRun, launchChromium } from '../support/browser.ts';
import { CHAT_MODEL, OTHER_PROVIDERS, startChatHost, type ChatHost } from '../support/chat-host.ts';
import { seedChart, type SeededChart } from '../support/seeded-chart.ts';
import { waitFor } from '../support/wait-for.ts';
import { ensureWebAppBuilt } from '../support/web-app-build.ts';
import { accessibilityViolations, DOCS_IMAGES, setPassword, setProjectSettings, signInToApp } from '../support/web-journey.ts';

const CARTER = { email: 'alice.carter@example.org', password: 'a demo password for the patient journey' };
const PROMPT = 'Is Maria due for a potassium check?';
const ABOUT_JAMES = 'How is James’s asthma today?';
/** Earlier questions about no patient, oldest first: more conversations than a page of the side list holds. */
const EARLIER_QUESTIONS = [
  'Which vaccines are due this autumn?',
  'Summarise the new hypertension guideline.',
  'What is the usual dose of amoxicillin for adults?',
  'Draft a leaflet on low-salt diets.',
  'How often should HbA1c be checked?',
  'What are the red flags of back pain?',
  'Explain the CHA2DS2-VASc score.',
  'Which statins interact with clarithromycin?',
  'What does a raised ferritin suggest?',
  'How do I taper prednisolone?',
  'What are the signs of lithium toxicity?',
  'List the causes of hyponatraemia.',
  'When is a D-dimer useful?',
  'How should gout flares be treated?',
  'What is the target blood pressure over 80?',
  'Explain the eGFR stages.',
  'Which antibiotics are safe in pregnancy?',
  'How is iron deficiency treated?',
  'What is the QRISK3 score?',
  'Draft a sick note template.',
  'What are the side effects of metformin?',
];

/** Searches a patient picker and chooses the patient the option names. */
async function choosePatient(page: Page, label: string, search: string, option: RegExp): Promise<void> {
  await page.getByRole('searchbox', { name: label, exact: true }).fill(search);
  await page.getByRole('option', { name: option }).click();
}

(browserTestsRun() ? describe : describe.skip)('a clinician chats about a patient in the web app', () => {
  let chat: ChatHost;
  let browser: Browser;
  let project: SeededProject;
  let chart: SeededChart;

  async function chatAsCarter(content: string, patientId?: string): Promise<void> {
    const token = await chat.host.accessTokenFor(project.ids['practitioner-membership']);
    const response = await fetch(`${chat.host.url}v1/chat/completions`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${token}`, 'X-Project-ID': project.projectId, 'Content-Type': 'application/json' },
      body: JSON.stringify({ model: CHAT_MODEL, messages: [{ role: 'user', content }], ...(patientId ? { patient_id: patientId } : {}) }),
    });
    expect(response.status).toBe(200);
  }

  /** The project's records of one category (`ai-response`, `ai-conversation`), about a patient when one is named. */
  async function records(category: string, patientId?: string): Promise<Communication[]> {
    return chat.host.store.searchResources<Communication>({
      resourceType: 'Communication',
      filters: [
        { code: '_project', operator: Operator.EQUALS, value: project.projectId },
        { code: 'category', operator: Operator.EQUALS, value: category },
        ...(patientId ? [{ code: 'subject', operator: Operator.EQUALS, value: `Patient/${patientId}` }] : []),
      ],
      count: 1000,
    });
  }

  beforeAll(async () => {
    await ensureWebAppBuilt();
    chat = await startChatHost();
    project = await chat.host.seedProject();
    await setPassword(chat.host, project.ids['practitioner-user'], CARTER.password);
    chart = await seedChart(await chat.host.standalone.host.getSystemRepo(project.projectId), project);
    // Earlier conversations: one about James Chen, and more about no patient than a page of the list holds.
    await chatAsCarter(ABOUT_JAMES, project.ids['patient-in-care-team-2']);
    for (const question of EARLIER_QUESTIONS) {
      await chatAsCarter(question);
    }
    browser = await launchChromium();
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
    await chat?.close();
  });

  test('Dr. Carter chats about Maria Lopez, sees the records shared with the model and opens one', async () => {
    const context = await browser.newContext({ viewport: { width: 1200, height: 900 } });
    const page = await context.newPage();
    await signInToApp(page, chat.host, CARTER);

    await choosePatient(page, 'Patient', 'Lopez', /Maria Lopez, born 1958-03-14/);
    const header = page.getByRole('region', { name: 'Patient' });
    await header.getByText('Maria Lopez').waitFor();
    await header.getByText('1958-03-14').waitFor();

    const log = page.getByRole('log', { name: 'Conversation' });
    await page.getByRole('textbox', { name: 'Message', exact: true }).fill(PROMPT);
    await page.getByRole('button', { name: 'Send' }).click();
    const reply = log.getByLabel('Reply').first();
    await reply.getByText(`Echo: ${PROMPT}`).waitFor();
    const shared = reply.getByRole('region', { name: 'Records shared with the model' });
    await shared.getByRole('link', { name: 'Problem: Essential hypertension' }).waitFor();

    // Exactly the records the reply's record says the model was given, each a link to its page; nothing it was not.
    const stored = await waitFor(async () => (await records('ai-response', project.ids['patient-in-care-team-1'])).find((record) => record.payload?.[0]?.contentString === `Echo: ${PROMPT}`), 30_000);
    const about = (stored.about ?? []).map((reference) => reference.reference);
    expect(about).toEqual(expect.arrayContaining([`Patient/${project.ids['patient-in-care-team-1']}`, `Condition/${chart.condition.id}`, `Observation/${chart.pulse.id}`]));
    expect(about).not.toContain(`MedicationStatement/${chart.statement.id}`);
    const links = shared.getByRole('link');
    await waitFor(async () => (await links.count()) === about.length || undefined, 10_000);
    const hrefs = await Promise.all(Array.from({ length: about.length }, (_, index) => links.nth(index).getAttribute('href')));
    expect(hrefs).toEqual(about.map((reference) => `/fhirgate/app/records/${reference}`));
    await shared.getByRole('link', { name: 'Patient: Maria Lopez' }).waitFor();
    await expect(shared.textContent()).resolves.not.toContain('St John');

    // The conversation keeps its patient: the picker is gone, the header stays.
    await page.getByText('This conversation is about this patient.').waitFor();
    await expect(page.getByRole('searchbox', { name: 'Patient', exact: true }).count()).resolves.toBe(0);
    await page.getByRole('button', { name: 'Send' }).and(page.locator(':not([data-loading])')).waitFor();
    await page.screenshot({ path: `${DOCS_IMAGES}app-chat-patient.png` });
    expect(await accessibilityViolations(page)).toEqual([]);
    const conversationUrl = page.url();

    // A record opens on its own page, read as Dr. Carter; back to the conversation.
    await shared.getByRole('link', { name: 'Problem: Essential hypertension' }).click();
    await page.getByRole('heading', { name: 'Problem: Essential hypertension' }).waitFor();
    await page.getByText('Clinical Status').waitFor();
    expect(await accessibilityViolations(page)).toEqual([]);
    await page.getByRole('link', { name: 'Back to the chat' }).click();
    await log.getByLabel('Reply').first().getByText(`Echo: ${PROMPT}`).waitFor();
    expect(page.url()).toBe(conversationUrl);

    // Reopened later, the conversation shows its patient and, under the reply, what was shared.
    await page.reload();
    await page.getByRole('region', { name: 'Patient' }).getByText('Maria Lopez').waitFor();
    await log.getByLabel('Reply').first().getByRole('link', { name: 'Problem: Essential hypertension' }).waitFor();
    await expect(page.getByRole('searchbox', { name: 'Patient', exact: true }).count()).resolves.toBe(0);

    // The patient's name in the header opens her record in the app.
    await page.getByRole('region', { name: 'Patient' }).getByRole('link', { name: 'Maria Lopez' }).click();
    await page.getByRole('heading', { name: 'Patient: Maria Lopez' }).waitFor();
    expect(new URL(page.url()).pathname).toBe(`/fhirgate/app/records/Patient/${project.ids['patient-in-care-team-1']}`);

    // A record outside her care, and one that does not exist, read the same, naming nothing of it.
    const outside = project.ids['patient-outside-care-team'];
    await page.goto(`${chat.host.url}fhirgate/app/records/Patient/${outside}`);
    await page.getByText('This record is not available to you').waitFor();
    await expect(page.locator('body').textContent()).resolves.not.toContain('Okafor');
    expect(await accessibilityViolations(page)).toEqual([]);
    await page.goto(`${chat.host.url}fhirgate/app/records/Patient/00000000-0000-4000-8000-000000000000`);
    await page.getByText('This record is not available to you').waitFor();

    // A shared record removed since reads as not available under the reply, with no link.
    const system = await chat.host.standalone.host.getSystemRepo(project.projectId);
    await system.deleteResource('Observation', chart.hba1c.id);
    await page.goto(conversationUrl);
    const reopened = log.getByLabel('Reply').first().getByRole('region', { name: 'Records shared with the model' });
    await reopened.getByText('Observation: not available to you').waitFor();
    await expect(reopened.getByRole('link').count()).resolves.toBe(about.length - 1);
    await expect(reopened.textContent()).resolves.not.toContain('HbA1c');
    await context.close();
  }, 180_000);

  test('her conversations filter by patient and page on the server', async () => {
    const context = await browser.newContext({ viewport: { width: 1200, height: 900 } });
    const page = await context.newPage();
    await signInToApp(page, chat.host, CARTER);
    const list = page.getByRole('navigation', { name: 'Your conversations' });
    const conversations = list.getByRole('link').filter({ hasNotText: 'New conversation' });

    // A page of 20, then the older ones on request.
    await list.getByRole('button', { name: 'Show older' }).waitFor();
    await expect(conversations.count()).resolves.toBe(20);
    const total = await records('ai-conversation');
    await list.getByRole('button', { name: 'Show older' }).click();
    await waitFor(async () => (await conversations.count()) === total.length || undefined, 10_000);
    await expect(list.getByRole('button', { name: 'Show older' }).count()).resolves.toBe(0);
    await list.getByRole('link', { name: EARLIER_QUESTIONS[0] }).waitFor();

    // Only James Chen's.
    await choosePatient(page, 'Conversations about', 'Chen', /James Chen/);
    await waitFor(async () => (await conversations.count()) === 1 || undefined, 10_000);
    await conversations.getByText(ABOUT_JAMES).waitFor();
    // Each conversation names its patient, read with her access.
    await conversations.first().getByText('James Chen').waitFor();
    expect(await accessibilityViolations(page)).toEqual([]);
    await conversations.first().click();
    await page.getByRole('region', { name: 'Patient' }).getByText('James Chen').waitFor();
    await context.close();
  }, 120_000);

  test('a reply about Maria Lopez stopped mid-way still lists the records the model was given', async () => {
    const context = await browser.newContext({ viewport: { width: 1200, height: 900 } });
    const page = await context.newPage();
    await signInToApp(page, chat.host, CARTER);
    await choosePatient(page, 'Patient', 'Lopez', /Maria Lopez, born 1958-03-14/);
    chat.emulator.setBehaviour({ replyTokens: 400, tokensPerSecond: 20 });
    try {
      await page.getByRole('textbox', { name: 'Message', exact: true }).fill('Walk me through her last year, slowly.');
      await page.getByRole('button', { name: 'Send' }).click();
      const reply = page.getByRole('log', { name: 'Conversation' }).getByLabel('Reply').last();
      await page.getByRole('button', { name: 'Stop' }).waitFor();
      await waitFor(async () => ((await reply.innerText()).length > 40 ? true : undefined), 30_000);
      await page.getByRole('button', { name: 'Stop' }).click();
      await reply.getByText('Stopped', { exact: true }).waitFor();
      // The stopped reply's record names what the model was given; the page lists exactly that.
      const shared = reply.getByRole('region', { name: 'Records shared with the model' });
      await shared.getByRole('link', { name: 'Problem: Essential hypertension' }).waitFor();
      const stopped = await waitFor(
        async () => (await records('ai-response', project.ids['patient-in-care-team-1'])).find((record) => record.status === 'stopped'),
        30_000
      );
      await expect(shared.getByRole('link').count()).resolves.toBe(stopped.about?.length);
    } finally {
      chat.emulator.setBehaviour({});
    }
    await context.close();
  }, 120_000);
});

(browserTestsRun() ? describe : describe.skip)('a question about a patient on a model not cleared for patient data', () => {
  const UNCLEARED = OTHER_PROVIDERS.ollama.model;
  let chat: ChatHost;
  let browser: Browser;
  let project: SeededProject;

  beforeAll(async () => {
    await ensureWebAppBuilt();
    chat = await startChatHost({ withProviders: ['ollama'] });
    project = await chat.host.seedProject();
    await setPassword(chat.host, project.ids['practitioner-user'], CARTER.password);
    // The project clears only the openai models for patient data (the operator cleared both providers).
    await setProjectSettings(chat.host, project, [{ name: 'AI_PATIENT_DATA_MODELS', valueString: 'openai/*' }]);
    browser = await launchChromium();
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await chat?.close();
  });

  test('Dr. Carter reads which model her project allows instead, and nothing is stored', async () => {
    const context = await browser.newContext({ viewport: { width: 1200, height: 900 } });
    const page = await context.newPage();
    await signInToApp(page, chat.host, CARTER);
    await choosePatient(page, 'Patient', 'Lopez', /Maria Lopez/);
    await page.getByRole('textbox', { name: 'Model' }).click();
    await page.getByRole('option', { name: new RegExp(UNCLEARED) }).getByText('patient data: not allowed').waitFor();
    await page.getByRole('option', { name: new RegExp(UNCLEARED) }).click();
    await page.getByRole('textbox', { name: 'Message', exact: true }).fill(PROMPT);
    await page.getByRole('button', { name: 'Send' }).click();

    const alert = page.getByRole('alert').filter({ hasText: 'Model not cleared for patient data' });
    await alert.waitFor();
    await expect(alert.textContent()).resolves.toContain(`Choose one your project allows for patient data: ${CHAT_MODEL}.`);
    await expect(alert.getByRole('button', { name: 'Try again' }).count()).resolves.toBe(0);
    expect(await accessibilityViolations(page)).toEqual([]);
    const stored = await chat.host.store.searchResources<Communication>({ resourceType: 'Communication', filters: [{ code: '_project', operator: Operator.EQUALS, value: project.projectId }] });
    expect(stored).toEqual([]);
    await context.close();
  }, 120_000);
});
