/**
 * The demo users' passwords on the demo project, so a newcomer signs in to the web app (`/fhirgate/app/`) at once:
 * Dr. Carter (the clinician) and Rosa Reyes (the reviewer), each with a password generated for the data folder
 * (`<data dir>/secrets/demo-password` and `reviewer-password`, 0600) and printed by `npm start`. A password is set
 * on the User only while they have none, so a password changed since is kept.
 */
import { readFileSync } from 'node:fs';
import type { FhirRepository } from '@medplum/fhir-router';
import type { User } from '@medplum/fhirtypes';
import { hashPassword, verifyPassword } from './auth/passwords.ts';
import { ensureSecretFile } from './secret-files.ts';

/** The demo clinician's sign-in email (fixtures/demo-project.json). */
export const DEMO_CLINICIAN_EMAIL = 'alice.carter@example.org';
/** The demo reviewer's (a compliance officer's) sign-in email (fixtures/demo-project.json). */
export const DEMO_REVIEWER_EMAIL = 'rosa.reyes@example.org';

const DEMO_CLINICIAN_USER = 'a1f0c0de-0000-4000-8000-000000000202';
const DEMO_REVIEWER_USER = 'a1f0c0de-0000-4000-8000-000000000204';

/** The demo clinician's password of a data folder (created on first use). */
export function readDemoPassword(dataDir: string): string {
  return readFileSync(ensureSecretFile(dataDir, 'demo-password', 12), 'utf8').trim();
}

/** The demo reviewer's password of a data folder (created on first use). */
export function readDemoReviewerPassword(dataDir: string): string {
  return readFileSync(ensureSecretFile(dataDir, 'reviewer-password', 12), 'utf8').trim();
}

/** Gives Dr. Carter the data folder's demo password when she has none; returns it while it is hers. */
export function giveDemoClinicianPassword(store: FhirRepository, dataDir: string): Promise<string | undefined> {
  return giveDemoPassword(store, DEMO_CLINICIAN_USER, () => readDemoPassword(dataDir));
}

/** Gives Rosa Reyes the data folder's reviewer password when she has none; returns it while it is hers. */
export function giveDemoReviewerPassword(store: FhirRepository, dataDir: string): Promise<string | undefined> {
  return giveDemoPassword(store, DEMO_REVIEWER_USER, () => readDemoReviewerPassword(dataDir));
}

async function giveDemoPassword(store: FhirRepository, userId: string, readPassword: () => string): Promise<string | undefined> {
  const user = await store.readResource<User>('User', userId).catch(() => undefined);
  if (!user) {
    return undefined;
  }
  const password = readPassword();
  if (user.passwordHash) {
    return (await verifyPassword(password, user.passwordHash)) ? password : undefined;
  }
  await store.updateResource<User>({ ...user, passwordHash: await hashPassword(password) });
  return password;
}
