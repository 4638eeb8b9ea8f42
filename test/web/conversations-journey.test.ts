/**
 * The clinician's conversations in a real browser (Debian's Chromium) against the standalone host and the LLM
 * emulator: Dr. Carter reopens an earlier conversation from her list, reads it and continues it (one conversation
 * on record); she stops a slow reply mid-way, sees it marked stopped, and the record holds it `stopped` with the
 * text she was shown, as she reads it again when she reopens the conversation; a reply reads as Markdown, its HTML
 * never rendered. axe finds no violation; the
 * screenshot is the one docs/app.md shows.
 */
import { fileURLToPath } from 'node:url';
import { Operator } from '@medplum/core';
import type { Communication } from '@medplum/fhirtypes';
import type { Browser, Page } from 'playwright-core';
import { ensureWebAppBuilt } from '../support/web-app-build.ts';
import { accessibilityViolations, fillSignInForm, setPassword } from '../support/web-journey.ts';
import { browserTestsRun, launchChromium } from '../support/browser.ts';
import { startChatHost, type ChatHost } from '../support/chat-host.ts';
import { waitFor } from '../support/wait-for.ts';

const EMAIL = 'alice.carter@example.org';
const PASSWORD = 'a demo password for the browser test';
const IMAGES = fileURLToPath(new URL('../../docs/images/', import.meta.url));
const FIRST_PROMPT = 'What should I check before discharge?';

(browserTestsRun() ? describe : describe.skip)('a clinician’s conversations in the web app', () => {
  let chat: ChatHost;
  let browser: Browser;
  let projectId: string;

  async function records(): Promise<Communication[]> {
    return chat.host.store.searchResources<Communication>({ resourceType: 'Communication', filters: [{ code: '_project', operator: Operator.EQUALS, value: projectId }] });
  }

  const codeOf = (record: Communication): string | undefined => record.category?.[0]?.coding?.[0]?.code;

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

  test('Dr. Carter reopens an earlier conversation and continues it, and stops a reply mid-way', async () => {
    const context = await browser.newContext({ viewport: { width: 1200, height: 760 } });
    const page = await context.newPage();
    await page.goto(`${chat.host.url}fhirgate/app/`);
    await fillSignInForm(page, { email: EMAIL, password: PASSWORD });

    const log = page.getByRole('log', { name: 'Conversation' });
    const message = page.getByRole('textbox', { name: 'Message', exact: true });
    await message.fill(FIRST_PROMPT);
    await page.getByRole('button', { name: 'Send' }).click();
    await log.getByLabel('Reply').getByText(`Echo: ${FIRST_PROMPT}`).waitFor();

    // Later, in a fresh page: the conversation is in her list, titled by its first prompt; opening it reads it from the record.
    await page.goto(`${chat.host.url}fhirgate/app/`);
    const list = page.getByRole('navigation', { name: 'Your conversations' });
    await list.getByRole('link', { name: FIRST_PROMPT }).click();
    await log.getByLabel('Your message').getByText(FIRST_PROMPT).waitFor();
    await log.getByLabel('Reply').getByText(`Echo: ${FIRST_PROMPT}`).waitFor();
    await message.fill('And after?');
    await page.getByRole('button', { name: 'Send' }).click();
    await log.getByLabel('Reply').nth(1).getByText('Echo: And after?').waitFor();
    await page.getByRole('button', { name: 'Send' }).and(page.locator(':not([data-loading])')).waitFor();
    await page.screenshot({ path: `${IMAGES}app-conversations.png` });
    expect(await accessibilityViolations(page)).toEqual([]);

    const afterContinuing = await records();
    expect(afterContinuing.filter((record) => codeOf(record) === 'ai-conversation')).toHaveLength(1);
    const conversationId = afterContinuing.find((record) => codeOf(record) === 'ai-conversation')?.id;
    expect(afterContinuing.filter((record) => codeOf(record) === 'ai-response').map((record) => record.partOf?.[0]?.reference)).toEqual([
      `Communication/${conversationId}`,
      `Communication/${conversationId}`,
    ]);

    // A slow reply, stopped mid-way: what was shown stays, marked stopped, and is what the record keeps.
    chat.emulator.setBehaviour({ replyTokens: 400, tokensPerSecond: 20 });
    await message.fill('Summarise the plan.');
    await page.getByRole('button', { name: 'Send' }).click();
    const slowReply = log.getByLabel('Reply').nth(2);
    await slowReply.getByText(/token3 /).waitFor();
    await page.getByRole('button', { name: 'Stop' }).click();
    await slowReply.getByText('Stopped', { exact: true }).waitFor();
    const shown = (await slowReply.locator('p').last().textContent()) ?? '';
    expect(shown).toMatch(/^token1 token2 token3/);
    expect(shown).not.toContain('token400');

    const stopped = await waitFor(async () => (await records()).find((record) => codeOf(record) === 'ai-response' && record.status === 'stopped'), 30_000);
    const storedText = stopped.payload?.[0]?.contentString ?? '';
    expect(storedText.startsWith(shown.trim())).toBe(true);
    expect(stopped.partOf?.[0]?.reference).toBe(`Communication/${conversationId}`);

    // Reopened, the stopped reply reads as the record has it, marked stopped.
    await page.reload();
    const reopened = log.getByLabel('Reply').nth(2);
    await reopened.getByText('Stopped', { exact: true }).waitFor();
    expect((await reopened.locator('p').last().textContent())?.trim()).toBe(storedText.trim());
    expect(await accessibilityViolations(page)).toEqual([]);

    // A reply is read as Markdown, and HTML in it is never rendered.
    chat.emulator.setBehaviour({ reply: '**Check the potassium.**\n\n- before discharge\n\n<img src="x" alt="injected">' });
    await message.fill('Anything else?');
    await page.getByRole('button', { name: 'Send' }).click();
    const formatted = log.getByLabel('Reply').nth(3);
    await formatted.locator('strong', { hasText: 'Check the potassium.' }).waitFor();
    await expect(formatted.getByRole('listitem').textContent()).resolves.toBe('before discharge');
    await expect(log.locator('img').count()).resolves.toBe(0);
    await context.close();
  }, 180_000);
});
