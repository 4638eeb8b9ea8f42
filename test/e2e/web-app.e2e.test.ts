/**
 * End to end, from the outside, on any server with fhirgate mounted (e2e-target.ts): the web app at
 * `<server>/fhirgate/app/` in a real browser (Debian's Chromium). A practitioner the suite invited signs in with her
 * email and password (the server's own login, Medplum's `SignInForm`), chats and reads the streamed reply, which the
 * project administrator reads back as stored; she reopens the conversation from her list, continues it, and signs
 * out, which ends her session. A reviewer (an AccessPolicy that reads the AI audit trail and nothing else, made by
 * the suite) opens the review console and reads that conversation's thread, also loaded afresh from its own address.
 * Under the page's own Content-Security-Policy and the server's headers, nothing is refused and no script fails.
 * Nothing here assumes which model answers: the page shows what the server streamed, and that is what was stored.
 */
import { randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import type { AccessPolicy, Bundle, Communication } from '@medplum/fhirtypes';
import type { Browser, Page } from 'playwright-core';
import { payloadText } from '../../plugin/chat/fhir-text.ts';
import { browserTestsRun, launchChromium } from '../support/browser.ts';
import { ensureWebAppBuilt } from '../support/web-app-build.ts';
import { invitePractitioner, type E2eInvitee } from './e2e-fixture.ts';
import { connectE2eTarget, type E2eTarget } from './e2e-target.ts';

const CATEGORY = 'urn:fhirgate:communication-category';
const FIXTURE = new URL('../../fixtures/demo-project.json', import.meta.url);
const REVIEWER_POLICY = 'policy-reviewer';

const categoryOf = (record: Communication): string | undefined => record.category?.[0]?.coding?.find((coding) => coding.system === CATEGORY)?.code;

/** The demo project's reviewer policy (reads every Communication and AuditEvent, the Practitioners and Devices they name), named for the run. */
async function reviewerPolicy(run: string): Promise<AccessPolicy> {
  const fixture = JSON.parse(await readFile(FIXTURE, 'utf8')) as Bundle;
  const policy = fixture.entry?.find((entry) => entry.fullUrl === `urn:uuid:${REVIEWER_POLICY}`)?.resource;
  if (policy?.resourceType !== 'AccessPolicy') {
    throw new Error(`fixtures/demo-project.json has no AccessPolicy ${REVIEWER_POLICY}`);
  }
  const { id: _id, meta: _meta, ...definition } = policy;
  return { ...definition, name: `${definition.name ?? REVIEWER_POLICY} (e2e ${run})` };
}

/** What the page reported that it should not: a refusal by its Content-Security-Policy, an uncaught error. */
function watchForFailures(page: Page): string[] {
  const failures: string[] = [];
  page.on('console', (message) => {
    if (message.type() === 'error' && /Content.Security.Policy|Refused to/i.test(message.text())) {
      failures.push(message.text());
    }
  });
  page.on('pageerror', (error) => failures.push(`${error.name}: ${error.message}`));
  return failures;
}

(browserTestsRun() ? describe : describe.skip)('fhirgate end to end: the web app', () => {
  let target: E2eTarget;
  let browser: Browser;
  let run: string;
  let clinician: E2eInvitee;
  let reviewer: E2eInvitee;
  let conversationId: string;
  const firstPrompt = (): string => `Which checks before discharge, run ${run}?`;

  beforeAll(async () => {
    if (!process.env.E2E_BASE_URL) {
      // The standalone host this suite starts serves this checkout's build; a server of the user's serves its own.
      await ensureWebAppBuilt();
    }
    target = await connectE2eTarget();
    run = randomUUID().slice(0, 8);
    clinician = await invitePractitioner(target, run, 'Clinician', [{ policy: { reference: `AccessPolicy/${target.provisioned.policies['policy-own-conversations'].id}` } }]);
    const policy = await target.admin.createResource<AccessPolicy>(await reviewerPolicy(run));
    reviewer = await invitePractitioner(target, run, 'Reviewer', [{ policy: { reference: `AccessPolicy/${policy.id}` } }]);
    browser = await launchChromium();
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
    await target?.close();
  });

  const app = (path = ''): string => `${target.baseUrl}fhirgate/app/${path}`;

  async function signIn(page: Page, who: E2eInvitee, failures: readonly string[]): Promise<void> {
    await page.goto(app());
    await page
      .getByLabel('Email')
      .waitFor()
      .catch((error: unknown) => Promise.reject(new Error(`The sign-in page did not show at ${app()}: ${failures.join('; ') || 'no error on the page'}`, { cause: error })));
    await page.getByLabel('Email').fill(who.email);
    await page.getByRole('button', { name: 'Continue' }).click();
    await page.getByRole('textbox', { name: 'Password' }).fill(who.password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    const chat = page.getByRole('heading', { name: 'Chat' });
    const refused = page.getByRole('alert');
    await chat.or(refused).first().waitFor();
    if (!(await chat.isVisible())) {
      // Medplum allows 5 sign-ins a minute from one address by default: a run right after another is refused here.
      throw new Error(`The sign-in of ${who.email} was refused: "${(await refused.first().innerText()).trim()}"`);
    }
  }

  /** The turns of a conversation on record, read by the project administrator, oldest first. */
  async function turnsOf(conversation: string): Promise<Communication[]> {
    return target.admin.searchResources('Communication', { 'part-of': `Communication/${conversation}`, _sort: 'sent', _count: '20' }, { cache: 'no-cache' });
  }

  test('a practitioner signs in, chats, reads the streamed reply as stored, reopens the conversation, continues it and signs out', async () => {
    const context = await browser.newContext({ viewport: { width: 1200, height: 760 } });
    const page = await context.newPage();
    const failures = watchForFailures(page);
    await signIn(page, clinician, failures);

    const log = page.getByRole('log', { name: 'Conversation' });
    const message = page.getByRole('textbox', { name: 'Message', exact: true });
    const send = page.getByRole('button', { name: 'Send' });
    const idle = send.and(page.locator(':not([data-loading])'));
    await message.fill(firstPrompt());
    const streamed = page.waitForResponse((response) => response.url().endsWith('/v1/chat/completions') && response.request().method() === 'POST');
    await send.click();
    const response = await streamed;
    expect(response.status()).toBe(200);
    expect(response.headers()['content-type']).toMatch(/^text\/event-stream/);
    expect((response.request().postDataJSON() as { stream?: boolean }).stream).toBe(true);
    await idle.waitFor();
    await page.waitForURL(/[?&]conversation=/);
    conversationId = new URL(page.url()).searchParams.get('conversation') ?? '';

    // What she read is the reply on record, threaded under her conversation with her prompt.
    const shown = (await log.getByLabel('Reply').first().innerText()).trim();
    const [prompt, reply] = await turnsOf(conversationId);
    expect([categoryOf(prompt), payloadText(prompt.payload ?? []), prompt.sender?.reference]).toEqual(['ai-prompt', firstPrompt(), clinician.profileReference]);
    expect([categoryOf(reply), reply.status]).toEqual(['ai-response', 'completed']);
    expect(payloadText(reply.payload ?? []).length).toBeGreaterThan(0);
    expect(normalise(shown)).toContain(normalise(payloadText(reply.payload ?? [])));

    // Later, in a fresh page: the conversation is in her list; opened, it is read from the record and continued.
    await page.goto(app());
    await page.getByRole('navigation', { name: 'Your conversations' }).getByRole('link', { name: firstPrompt() }).click();
    await log.getByLabel('Your message').getByText(firstPrompt()).waitFor();
    await expect(log.getByLabel('Reply').count()).resolves.toBe(1);
    await message.fill('And after discharge?');
    await send.click();
    await log.getByLabel('Reply').nth(1).waitFor();
    await idle.waitFor();
    const turns = await turnsOf(conversationId);
    expect(turns.map(categoryOf)).toEqual(['ai-prompt', 'ai-response', 'ai-prompt', 'ai-response']);
    expect(payloadText(turns[2].payload ?? [])).toBe('And after discharge?');
    expect(normalise(await log.getByLabel('Reply').nth(1).innerText())).toContain(normalise(payloadText(turns[3].payload ?? [])));
    const started = await target.admin.searchResources('Communication', { sender: clinician.profileReference, category: `${CATEGORY}|ai-prompt`, _count: '20' }, { cache: 'no-cache' });
    expect(new Set(started.map((record) => record.partOf?.[0]?.reference))).toEqual(new Set([`Communication/${conversationId}`]));

    // Signing out ends the session: the token she held is refused, and the app asks her to sign in again.
    const token = await page.evaluate(() => {
      const login = Object.entries(localStorage).find(([key]) => key.endsWith('activeLogin'))?.[1];
      return login ? (JSON.parse(login) as { accessToken: string }).accessToken : '';
    });
    expect(token).not.toBe('');
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('heading', { name: 'Sign in to fhirgate' }).waitFor();
    const afterSignOut = await fetch(`${target.baseUrl}v1/models`, { headers: { Authorization: `Bearer ${token}`, 'X-Project-ID': target.projectId } });
    expect(afterSignOut.status).toBe(401);
    await page.goto(app('chat'));
    await page.getByRole('heading', { name: 'Sign in to fhirgate' }).waitFor();
    expect(failures).toEqual([]);
    await context.close();
  }, 180_000);

  test('a reviewer opens the review console and reads that conversation', async () => {
    expect(conversationId).toBeTruthy();
    const context = await browser.newContext({ viewport: { width: 1200, height: 760 } });
    const page = await context.newPage();
    const failures = watchForFailures(page);
    await signIn(page, reviewer, failures);
    await page.goto(app('review'));
    await page.getByRole('heading', { name: 'Review' }).waitFor();

    const row = page.getByRole('row').filter({ hasText: `Clinician E2e-${run}` });
    await row.first().waitFor();
    // The row opens the thread; its first cell (when it started) holds no link of its own.
    await row.first().getByRole('cell').first().click();
    await page.waitForURL(`**/review/conversations/${conversationId}`);
    const thread = page.getByLabel('Thread');
    await thread.getByRole('article', { name: 'Prompt' }).getByText(firstPrompt(), { exact: true }).waitFor();
    await thread.getByRole('article', { name: 'Prompt' }).getByText('And after discharge?', { exact: true }).waitFor();
    await expect(thread.getByRole('article', { name: 'Reply' }).count()).resolves.toBe(2);
    // The thread's address is a link of its own: loaded afresh, the page and its files are found under that path.
    await page.reload();
    await thread.getByRole('article', { name: 'Prompt' }).getByText(firstPrompt(), { exact: true }).waitFor();
    expect(failures).toEqual([]);
    await context.close();
  }, 180_000);
});

/** Text as a page shows it and as it was stored, compared without Markdown's marks and runs of white space. */
function normalise(text: string): string {
  return text.replaceAll(/[*_`#>-]/g, '').replaceAll(/\s+/g, ' ').trim();
}
