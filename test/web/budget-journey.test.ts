/**
 * A used-up budget in a real browser (Debian's Chromium) against the standalone host and the LLM emulator: the
 * project's administrator gives each user a tiny daily token budget through the documented settings route
 * (docs/governance.md); Dr. Carter's first message uses it up, and her next one is refused with a sentence that
 * says her budget for today is used up and when it resets (the next UTC midnight, in her own time zone), with no
 * "Try again" and no raw answer of the server; nothing of the refused turn is stored. axe finds no violation.
 */
import { Operator } from '@medplum/core';
import type { Communication } from '@medplum/fhirtypes';
import type { Browser } from 'playwright-core';
import type { SeededProject } from '../../plugin/hosts/standalone/seed.ts';
import { browserTestsRun, launchChromium } from '../support/browser.ts';
import { startChatHost, type ChatHost } from '../support/chat-host.ts';
import { ensureWebAppBuilt } from '../support/web-app-build.ts';
import { accessibilityViolations, setPassword, setProjectSettings, signInToApp } from '../support/web-journey.ts';

const CARTER = { email: 'alice.carter@example.org', password: 'a demo password for the budget journey' };
/** Where the browser is: its reset time is shown in this zone. */
const TIME_ZONE = 'America/New_York';

(browserTestsRun() ? describe : describe.skip)('a clinician meets a used-up budget in the web app', () => {
  let chat: ChatHost;
  let browser: Browser;
  let project: SeededProject;

  beforeAll(async () => {
    await ensureWebAppBuilt();
    chat = await startChatHost();
    project = await chat.host.seedProject();
    await setPassword(chat.host, project.ids['practitioner-user'], CARTER.password);
    await setProjectSettings(chat.host, project, [{ name: 'AI_BUDGET_USER_DAY_TOKENS', valueInteger: 1 }]);
    browser = await launchChromium();
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await chat?.close();
  });

  test('Dr. Carter uses up her daily budget and reads when it resets', async () => {
    const context = await browser.newContext({ viewport: { width: 1200, height: 760 }, locale: 'en-US', timezoneId: TIME_ZONE });
    const page = await context.newPage();
    await signInToApp(page, chat.host, CARTER);
    const log = page.getByRole('log', { name: 'Conversation' });
    const message = page.getByRole('textbox', { name: 'Message', exact: true });

    await message.fill('What is the usual dose of lisinopril?');
    await page.getByRole('button', { name: 'Send' }).click();
    await log.getByLabel('Reply').getByText('Echo: What is the usual dose of lisinopril?').waitFor();
    await page.getByRole('button', { name: 'Send' }).and(page.locator(':not([data-loading])')).waitFor();

    await message.fill('And for a patient with kidney disease?');
    await page.getByRole('button', { name: 'Send' }).click();
    const alert = page.getByRole('alert').filter({ hasText: 'Budget used up' });
    await alert.waitFor();
    // Days are UTC: the budget resets at the next UTC midnight, shown in her time zone.
    const midnight = new Date();
    midnight.setUTCHours(24, 0, 0, 0);
    const resets = midnight.toLocaleString('en-US', { timeZone: TIME_ZONE, dateStyle: 'medium', timeStyle: 'short' });
    await expect(alert.textContent()).resolves.toContain(`Your AI budget for today is used up. It resets ${resets}.`);
    await expect(alert.textContent()).resolves.not.toContain('AI_BUDGET');
    await expect(alert.getByRole('button', { name: 'Try again' }).count()).resolves.toBe(0);
    await expect(log.getByLabel('Reply').count()).resolves.toBe(1);
    expect(await accessibilityViolations(page)).toEqual([]);

    // The refused turn stored nothing: one prompt, one reply.
    const records = await chat.host.store.searchResources<Communication>({ resourceType: 'Communication', filters: [{ code: '_project', operator: Operator.EQUALS, value: project.projectId }], count: 100 });
    const codes = records.map((record) => record.category?.[0]?.coding?.[0]?.code).sort();
    expect(codes).toEqual(['ai-conversation', 'ai-prompt', 'ai-response']);
    await context.close();
  }, 120_000);
});
