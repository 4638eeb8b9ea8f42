/**
 * The web app in a real browser (Debian's Chromium) against the standalone host and the LLM emulator: Dr. Carter
 * opens `/fhirgate/app/`, signs in with her email and password (the server's own login), picks a model, sends a
 * message and reads the streamed reply; the turn is on record as Communications. The screenshots are the ones
 * docs/app.md shows; axe finds no accessibility violation on either page.
 */
import { fileURLToPath } from 'node:url';
import { Operator } from '@medplum/core';
import type { Communication } from '@medplum/fhirtypes';
import type { Browser, Page } from 'playwright-core';
import { browserTestsRun, launchChromium } from '../support/browser.ts';
import { ensureWebAppBuilt } from '../support/web-app-build.ts';
import { accessibilityViolations, setPassword } from '../support/web-journey.ts';
import { CHAT_MODEL, startChatHost, type ChatHost } from '../support/chat-host.ts';

const EMAIL = 'alice.carter@example.org';
const PASSWORD = 'a demo password for the browser test';
const IMAGES = fileURLToPath(new URL('../../docs/images/', import.meta.url));

(browserTestsRun() ? describe : describe.skip)('a clinician chats in the web app', () => {
  let chat: ChatHost;
  let browser: Browser;
  let projectId: string;

  beforeAll(async () => {
    await ensureWebAppBuilt();
    chat = await startChatHost();
    const project = await chat.host.seedProject();
    projectId = project.projectId;
    await setPassword(chat.host, project.ids['practitioner-user'], PASSWORD);
    browser = await launchChromium();
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await chat?.close();
  });

  test('Dr. Carter signs in, sends a message and reads the streamed reply, which is on record', async () => {
    const context = await browser.newContext({ viewport: { width: 1000, height: 720 } });
    const page = await context.newPage();
    await page.goto(`${chat.host.url}fhirgate/app/`);

    await page.getByLabel('Email').fill(EMAIL);
    await page.getByRole('button', { name: 'Continue' }).click();
    await page.getByRole('textbox', { name: 'Password' }).fill(PASSWORD);
    await page.screenshot({ path: `${IMAGES}app-sign-in.png` });
    expect(await accessibilityViolations(page)).toEqual([]);
    await page.getByRole('button', { name: 'Sign in' }).click();

    await page.getByRole('heading', { name: 'Chat' }).waitFor();
    const modelPicker = page.getByRole('textbox', { name: 'Model' });
    await modelPicker.click();
    await page.getByRole('option', { name: CHAT_MODEL }).click();
    await expect(modelPicker.inputValue()).resolves.toBe(CHAT_MODEL);
    await page.getByRole('textbox', { name: 'Message', exact: true }).fill('What should I check before discharge?');
    await page.getByRole('button', { name: 'Send' }).click();
    const reply = page.getByRole('log', { name: 'Conversation' }).getByLabel('Reply');
    await reply.getByText('Echo: What should I check before discharge?').waitFor();

    // A second message continues the same conversation.
    await page.getByRole('textbox', { name: 'Message', exact: true }).fill('And after?');
    await page.getByRole('button', { name: 'Send' }).click();
    await reply.nth(1).getByText('Echo: And after?').waitFor();
    await page.getByRole('button', { name: 'Send' }).and(page.locator(':not([data-loading])')).waitFor();
    await page.screenshot({ path: `${IMAGES}app-chat.png` });
    expect(await accessibilityViolations(page)).toEqual([]);

    const records = await chat.host.store.searchResources<Communication>({ resourceType: 'Communication', filters: [{ code: '_project', operator: Operator.EQUALS, value: projectId }] });
    const texts = records.map((record) => record.payload?.[0]?.contentString);
    expect(texts).toEqual(expect.arrayContaining(['What should I check before discharge?', 'Echo: What should I check before discharge?', 'And after?', 'Echo: And after?']));
    const conversations = new Set(records.filter((record) => record.partOf).map((record) => record.partOf?.[0]?.reference));
    expect(conversations.size).toBe(1);
  }, 120_000);
});
