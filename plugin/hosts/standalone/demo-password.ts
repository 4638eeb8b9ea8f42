/**
 * Dr. Carter's password on the demo project, so a newcomer signs in to the web app (`/fhirgate/app/`) at once:
 * generated for the data folder (`<data dir>/secrets/demo-password`, 0600) and printed by `npm start`. It is set
 * on her User only while she has none, so a password changed since is kept.
 */
import { readFileSync } from 'node:fs';
import type { FhirRepository } from '@medplum/fhir-router';
import type { User } from '@medplum/fhirtypes';
import { hashPassword, verifyPassword } from './auth/passwords.ts';
import { ensureSecretFile } from './secret-files.ts';

/** The demo clinician's sign-in email (fixtures/demo-project.json). */
export const DEMO_CLINICIAN_EMAIL = 'alice.carter@example.org';

const DEMO_CLINICIAN_USER = 'a1f0c0de-0000-4000-8000-000000000202';

/** The demo password of a data folder (created on first use). */
export function readDemoPassword(dataDir: string): string {
  return readFileSync(ensureSecretFile(dataDir, 'demo-password', 12), 'utf8').trim();
}

/** Gives Dr. Carter the data folder's demo password when she has none; returns it while it is hers. */
export async function giveDemoClinicianPassword(store: FhirRepository, dataDir: string): Promise<string | undefined> {
  const user = await store.readResource<User>('User', DEMO_CLINICIAN_USER).catch(() => undefined);
  if (!user) {
    return undefined;
  }
  const password = readDemoPassword(dataDir);
  if (user.passwordHash) {
    return (await verifyPassword(password, user.passwordHash)) ? password : undefined;
  }
  await store.updateResource<User>({ ...user, passwordHash: await hashPassword(password) });
  return password;
}
