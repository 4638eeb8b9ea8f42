/**
 * A session in the web app, in a real browser (Debian's Chromium) against the standalone host: a link to a page of
 * the app opened before signing in leads through sign-in back to that page; the header moves between the chat and
 * the review console; a session ended elsewhere sends the user to sign in and back to where they were; Sign out
 * ends the session on the server, so its token opens nothing afterwards.
 */
import type { Project, ProjectMembership } from '@medplum/fhirtypes';
import type { Browser, Page } from 'playwright-core';
import { browserTestsRun, launchChromium } from '../support/browser.ts';
import { CHAT_MODEL, startChatHost, type ChatHost } from '../support/chat-host.ts';
import { waitFor } from '../support/wait-for.ts';
import { ensureWebAppBuilt } from '../support/web-app-build.ts';
import { accessibilityViolations, fillSignInForm, setPassword, signInAt } from '../support/web-journey.ts';

const CLINICIAN = { email: 'alice.carter@example.org', password: 'a demo password for the clinician' };
const PROMPT = 'Which of my patients need a flu vaccine this month?';

/** The access token of the app's session, as MedplumClient keeps it in the page's storage. */
async function sessionToken(page: Page): Promise<string> {
  const token = await page.evaluate(() => {
    const active = localStorage.getItem('activeLogin');
    return active ? (JSON.parse(active) as { accessToken?: string }).accessToken : undefined;
  });
  if (!token) {
    throw new Error('The page holds no session.');
  }
  return token;
}

(browserTestsRun() ? describe : describe.skip)('a session in the web app', () => {
  let chat: ChatHost;
  let browser: Browser;
  let projectId: string;
  let conversationId: string;

  beforeAll(async () => {
    await ensureWebAppBuilt();
    chat = await startChatHost();
    const project = await chat.host.seedProject();
    projectId = project.projectId;
    await setPassword(chat.host, project.ids['practitioner-user'], CLINICIAN.password);
    const token = await chat.host.accessTokenFor(project.ids['practitioner-membership']);
    const response = await fetch(`${chat.host.url}v1/chat/completions`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${token}`, 'X-Project-ID': projectId, 'Content-Type': 'application/json' },
      body: JSON.stringify({ model: CHAT_MODEL, messages: [{ role: 'user', content: PROMPT }] }),
    });
    expect(response.status).toBe(200);
    conversationId = ((await response.json()) as { conversation_id: string }).conversation_id;
    browser = await launchChromium();
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await chat?.close();
  });

  test('a link opened before signing in returns there after sign-in; the header moves between chat and review', async () => {
    const context = await browser.newContext({ viewport: { width: 1100, height: 760 } });
    const page = await context.newPage();
    await page.goto(`${chat.host.url}fhirgate/app/chat?conversation=${conversationId}`);
    await page.waitForURL(/\/signin\?next=/);
    await fillSignInForm(page, CLINICIAN);
    await page.waitForURL(`**/fhirgate/app/chat?conversation=${conversationId}`);
    await page.getByRole('log', { name: 'Conversation' }).getByText(PROMPT, { exact: true }).waitFor();

    const places = page.getByRole('navigation', { name: 'fhirgate' });
    // By keyboard: the header's links are reachable with Tab and followed with Enter.
    await places.getByRole('link', { name: 'Review' }).focus();
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'Review' }).waitFor();
    expect(await accessibilityViolations(page)).toEqual([]);
    // A name in the console's lists is a link of Medplum's components: it opens the record in the app.
    await page.getByRole('row').filter({ hasText: 'Alice Carter' }).first().getByRole('link', { name: /Alice Carter/ }).first().click();
    await page.waitForURL(/\/fhirgate\/app\/records\/Practitioner\//);
    await page.getByRole('heading', { name: /Alice Carter/ }).waitFor();
    await page.goBack();
    await page.getByRole('heading', { name: 'Review' }).waitFor();
    await places.getByRole('link', { name: 'Chat' }).click();
    await page.getByRole('heading', { name: 'Chat' }).waitFor();
    expect(await accessibilityViolations(page)).toEqual([]);
    await context.close();
  }, 120_000);

  test('a session ended elsewhere sends the user to sign in, and back to the page they were on', async () => {
    const context = await browser.newContext({ viewport: { width: 1100, height: 760 } });
    const page = await context.newPage();
    await signInAt(page, chat.host.url, CLINICIAN);
    await page.getByRole('navigation', { name: 'fhirgate' }).getByRole('link', { name: 'Review' }).click();
    await page.getByRole('heading', { name: 'Review' }).waitFor();
    // The page has read its lists: a request still on its way when the session ends would send the user to sign in
    // from this page, before the click below.
    await page.getByRole('row').filter({ hasText: 'Alice Carter' }).first().getByRole('link', { name: /Alice Carter/ }).first().waitFor();
    await page.waitForLoadState('networkidle');

    // Signed out in another place (the same session's token, as another tab of the app would).
    const token = await sessionToken(page);
    expect((await fetch(`${chat.host.url}oauth2/logout`, { method: 'POST', headers: { Authorization: `Bearer ${token}` } })).status).toBe(200);

    await page.getByRole('navigation', { name: 'fhirgate' }).getByRole('link', { name: 'Chat' }).click();
    await page.waitForURL(/\/signin\?next=%2Fchat/);
    await fillSignInForm(page, CLINICIAN);
    await page.waitForURL('**/fhirgate/app/chat');
    await page.getByRole('heading', { name: 'Chat' }).waitFor();
    await context.close();
  }, 120_000);

  test('Sign out ends the session on the server: its token opens nothing afterwards', async () => {
    const context = await browser.newContext({ viewport: { width: 1100, height: 760 } });
    const page = await context.newPage();
    await signInAt(page, chat.host.url, CLINICIAN);
    const token = await sessionToken(page);
    const headers = { Authorization: `Bearer ${token}`, 'X-Project-ID': projectId };
    expect((await fetch(`${chat.host.url}v1/models`, { headers })).status).toBe(200);

    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('heading', { name: 'Sign in to fhirgate' }).waitFor();
    expect((await fetch(`${chat.host.url}v1/models`, { headers })).status).toBe(401);
    expect((await fetch(`${chat.host.url}fhir/R4/Communication?_count=1`, { headers })).status).toBe(401);
    // The page keeps no session: the chat sends the user to sign in.
    await page.goto(`${chat.host.url}fhirgate/app/chat`);
    await page.waitForURL(/\/signin\?next=%2Fchat/);
    await context.close();
  }, 120_000);
});

/** A host whose access tokens live `lifetimeSeconds`, Dr. Carter with a password, and a browser. */
function expiringSessions(lifetimeSeconds: number): { chat: () => ChatHost; browser: () => Browser; signIn: (page: Page, remember: boolean) => Promise<void> } {
  let chat: ChatHost;
  let browser: Browser;
  beforeAll(async () => {
    await ensureWebAppBuilt();
    chat = await startChatHost({ host: { accessTokenLifetimeSeconds: lifetimeSeconds } });
    const project = await chat.host.seedProject();
    await setPassword(chat.host, project.ids['practitioner-user'], CLINICIAN.password);
    browser = await launchChromium();
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
    await chat?.close();
  });
  return {
    chat: () => chat,
    browser: () => browser,
    signIn: (page, remember) => signInAt(page, chat.host.url, CLINICIAN, { remember }),
  };
}

(browserTestsRun() ? describe : describe.skip)('a remembered session', () => {
  // MedplumClient renews a token in its last five minutes: this one is in them 5 seconds after it is issued.
  const sessions = expiringSessions(305);

  test('with "Remember me" the session is renewed with its refresh token before it expires, as in a Medplum server', async () => {
    const context = await sessions.browser().newContext();
    const page = await context.newPage();
    await sessions.signIn(page, true);
    const first = await sessionToken(page);
    await page.waitForTimeout(6000);
    await page.getByRole('navigation', { name: 'fhirgate' }).getByRole('link', { name: 'Review' }).click();
    await page.getByRole('heading', { name: 'Review' }).waitFor();
    // Polled from the test: the app's Content-Security-Policy lets no string be evaluated in the page.
    await waitFor(async () => ((await sessionToken(page)) !== first ? true : undefined), 30_000);
    expect(page.url()).toMatch(/\/review$/);
    await context.close();
  }, 120_000);
});

(browserTestsRun() ? describe : describe.skip)('a session whose access token expires', () => {
  // Access tokens of 3 seconds: the step below outlives the one it starts with.
  const sessions = expiringSessions(3);

  test('without "Remember me" the session ends with its access token, and sign-in returns to the page', async () => {
    const context = await sessions.browser().newContext();
    const page = await context.newPage();
    await sessions.signIn(page, false);
    await page.waitForTimeout(4000);
    await page.getByRole('navigation', { name: 'fhirgate' }).getByRole('link', { name: 'Review' }).click();
    await page.waitForURL(/\/signin\?next=%2Freview/);
    await context.close();
  }, 120_000);
});

(browserTestsRun() ? describe : describe.skip)('a user with several projects', () => {
  let chat: ChatHost;
  let browser: Browser;

  beforeAll(async () => {
    await ensureWebAppBuilt();
    chat = await startChatHost();
    const project = await chat.host.seedProject();
    await setPassword(chat.host, project.ids['practitioner-user'], CLINICIAN.password);
    // Dr. Carter also works at a second clinic: a project of its own, where she is a member too.
    const second = await chat.host.store.createResource<Project>({ resourceType: 'Project', name: 'Northside Clinic' });
    const membership = await chat.host.store.readResource<ProjectMembership>('ProjectMembership', project.ids['practitioner-membership']);
    await chat.host.store.createResource<ProjectMembership>({
      resourceType: 'ProjectMembership',
      project: { reference: `Project/${second.id}`, display: 'Northside Clinic' },
      user: membership.user,
      profile: membership.profile,
      meta: { project: second.id },
    });
    browser = await launchChromium();
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await chat?.close();
  });

  test('signs in to the project she picks, as Medplum asks her to', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(`${chat.host.url}fhirgate/app/`);
    await fillSignInForm(page, CLINICIAN);
    await page.getByText('Northside Clinic').waitFor();
    expect(await accessibilityViolations(page)).toEqual([]);
    await page.getByText(/fhirgate demo/i).first().click();
    await page.getByRole('heading', { name: 'Chat' }).waitFor();
    // The app speaks for the project she chose: its models are listed for her there.
    await page.getByRole('textbox', { name: 'Model' }).or(page.getByLabel('Model')).first().waitFor();
    await expect(page.getByLabel('Model').first().inputValue()).resolves.toBe(CHAT_MODEL);
    await context.close();
  }, 120_000);
});
