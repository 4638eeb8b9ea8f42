/**
 * What the review console's browser journeys share: signing in through the app's own sign-in form and opening the
 * console, and axe's findings on a page.
 */
import AxeBuilder from '@axe-core/playwright';
import type { Page } from 'playwright-core';

/** A user of the journeys: their email and the password the test set. */
export interface SignInUser {
  readonly email: string;
  readonly password: string;
}

/** The accessibility violations axe finds on the page, by rule and element. */
export async function accessibilityViolations(page: Page): Promise<string[]> {
  const results = await new AxeBuilder({ page }).analyze();
  return results.violations.flatMap((violation) => violation.nodes.map((node) => `${violation.id}: ${node.html.slice(0, 120)}`));
}

/** Signs in with the app's sign-in form (email, then password) and opens the review console. */
export async function signInToReview(page: Page, serverUrl: string, who: SignInUser): Promise<void> {
  await page.goto(`${serverUrl}fhirgate/app/`);
  await page.getByLabel('Email').fill(who.email);
  await page.getByRole('button', { name: 'Continue' }).click();
  await page.getByRole('textbox', { name: 'Password' }).fill(who.password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'Chat' }).waitFor();
  await page.goto(`${serverUrl}fhirgate/app/review`);
  await page.getByRole('heading', { name: 'Review' }).waitFor();
}
