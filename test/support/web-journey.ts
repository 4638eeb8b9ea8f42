/**
 * What the web app's browser journeys share: a demo user's password set for the test, a project setting changed
 * as its administrator changes it (docs/governance.md), signing in through the app's sign-in page (Medplum's form),
 * and axe's findings on a page.
 */
import { fileURLToPath } from 'node:url';
import AxeBuilder from '@axe-core/playwright';
import type { Project, ProjectSetting, User } from '@medplum/fhirtypes';
import type { Page } from 'playwright-core';
import { hashPassword } from '../../plugin/hosts/standalone/auth/passwords.ts';
import type { SeededProject } from '../../plugin/hosts/standalone/seed.ts';
import { projectAdministrator } from './project-administrator.ts';
import type { TestHost } from './test-host.ts';

/** Where the journeys write the screenshots the docs show. */
export const DOCS_IMAGES = fileURLToPath(new URL('../../docs/images/', import.meta.url));

export interface WebUser {
  readonly email: string;
  readonly password: string;
}

/** Gives a seeded user (by its id) a password. */
export async function setPassword(host: TestHost, userId: string, password: string): Promise<void> {
  const user = await host.store.readResource<User>('User', userId);
  await host.store.updateResource<User>({ ...user, passwordHash: await hashPassword(password) });
}

/**
 * Sets project settings as a project administrator does, through Medplum's project admin API: read the list,
 * replace the entries named, send the whole list back.
 */
export async function setProjectSettings(host: TestHost, project: SeededProject, entries: readonly ProjectSetting[]): Promise<void> {
  const admin = await projectAdministrator(host, project);
  const { project: current } = await admin.get<{ project: Project }>(`admin/projects/${project.projectId}`);
  const names = new Set(entries.map((entry) => entry.name));
  await admin.post(`admin/projects/${project.projectId}/settings`, [...(current.setting ?? []).filter((entry) => !names.has(entry.name)), ...entries]);
}

/** Fills in the sign-in page on screen (Medplum's form: email, then password; "Remember me" when asked) and signs in. */
export async function fillSignInForm(page: Page, who: WebUser, options: { readonly remember?: boolean } = {}): Promise<void> {
  await page.getByLabel('Email').fill(who.email);
  await page.getByRole('button', { name: 'Continue' }).click();
  await page.getByRole('textbox', { name: 'Password' }).fill(who.password);
  if (options.remember) {
    await page.getByLabel('Remember me').check();
  }
  await page.getByRole('button', { name: 'Sign in' }).click();
}

/** Signs in on the sign-in page of the app of the server at `serverUrl` and waits for the chat. */
export async function signInAt(page: Page, serverUrl: string, who: WebUser, options: { readonly remember?: boolean } = {}): Promise<void> {
  await openSignInPage(page, `${serverUrl}fhirgate/app/`);
  await fillSignInForm(page, who, options);
  await page.getByRole('heading', { name: 'Chat' }).waitFor();
}

/**
 * Opens the app at `url` and waits for its sign-in form. A page that shows no form within 15 s is reported on stderr
 * (its address, its text, what the browser logged and which requests failed) and loaded once more. The report found
 * why the form had not appeared in CI: the page's script and styles answered 404 while `npm pack` (a test on another
 * worker) rebuilt dist/ after removing it, which `prebuild` no longer does (scripts/clean-dist.ts). A report in CI's
 * log now is a new cause to look into.
 */
async function openSignInPage(page: Page, url: string): Promise<void> {
  const seen: string[] = [];
  const onConsole = (message: { type(): string; text(): string }): void => void seen.push(`console ${message.type()}: ${message.text().slice(0, 300)}`);
  const onFailed = (request: { url(): string; failure(): { errorText: string } | null }): void => void seen.push(`request failed: ${request.url()} ${request.failure()?.errorText ?? ''}`);
  const onResponse = (response: { url(): string; status(): number }): void => {
    if (response.status() >= 400) seen.push(`response ${response.status()}: ${response.url()}`);
  };
  const onCrash = (): void => void seen.push('page crashed');
  page.on('console', onConsole);
  page.on('requestfailed', onFailed);
  page.on('response', onResponse);
  page.on('crash', onCrash);
  try {
    await page.goto(url);
    const form = page.getByLabel('Email');
    const shown = await form.waitFor({ timeout: 15_000 }).then(
      () => true,
      () => false
    );
    if (!shown) {
      const text = await page.locator('body').innerText({ timeout: 2_000 }).catch((error: unknown) => `(no text: ${String(error)})`);
      process.stderr.write(`The sign-in form did not appear within 15 s at ${page.url()}; loading it again. Page text: ${JSON.stringify(text.slice(0, 500))}\n${seen.join('\n')}\n`);
      await page.goto(url);
      await form.waitFor();
    }
  } finally {
    page.off('console', onConsole);
    page.off('requestfailed', onFailed);
    page.off('response', onResponse);
    page.off('crash', onCrash);
  }
}

/** Signs in on the app's sign-in page and waits for the chat. */
export async function signInToApp(page: Page, host: TestHost, who: WebUser): Promise<void> {
  await signInAt(page, host.url, who);
}

/** The accessibility violations axe finds on the page, by rule and element. */
export async function accessibilityViolations(page: Page): Promise<string[]> {
  const results = await new AxeBuilder({ page }).analyze();
  return results.violations.flatMap((violation) => violation.nodes.map((node) => `${violation.id}: ${node.html.slice(0, 120)}`));
}
