/**
 * What the review console's browser journeys share: a standalone host on the LLM emulator with the demo project
 * loaded before start (so the demo monitor can exchange device tokens), two models (`openai/gpt-4o-mini`, cleared for
 * patient data and priced, so replies record a cost; `other/gpt-4o-mini`, not cleared, to which the project sends
 * turns about a patient de-identified), the demo users' passwords set, the API as any member, sign-in to
 * `/fhirgate/app/review`, and axe.
 */
import type { Project } from '@medplum/fhirtypes';
import type { Page } from 'playwright-core';
import { setPassword, signInAt, type WebUser } from './web-journey.ts';
import type { SeededProject } from '../../plugin/hosts/standalone/seed.ts';
import { startLlmEmulator, type LlmEmulator } from '../emulator/index.ts';
import { CHAT_MODEL } from './chat-host.ts';
import { startTestHost, type TestHost } from './test-host.ts';

export const CLINICIAN = { email: 'alice.carter@example.org', password: 'a demo password for the clinician' };
export const REVIEWER = { email: 'rosa.reyes@example.org', password: 'a demo password for the reviewer' };
export const MONITOR = { id: 'demo-monitor-1', key: 'Review-Journey-Monitor-Key-7Qx' };
/** The model not cleared for patient data: a turn about a patient goes to it de-identified. */
export const NOT_CLEARED_MODEL = 'other/gpt-4o-mini';

/** A host for the review console's journeys. */
export interface ReviewHost {
  readonly host: TestHost;
  readonly project: SeededProject;
  /** Calls the host's API as a membership of the demo project (its fixture name). */
  api(path: string, membership: string, init?: RequestInit): Promise<Response>;
  /** Exchanges the demo monitor's key for a device token; answers the status. */
  deviceExchange(apiKey: string): Promise<number>;
  /** Signs `who` in with the app's sign-in form, then opens the review console. */
  signIn(page: Page, who: { readonly email: string; readonly password: string }): Promise<void>;
  close(): Promise<void>;
}

export async function startReviewHost(): Promise<ReviewHost> {
  const emulator: LlmEmulator = await startLlmEmulator();
  const host = await startTestHost({
    pluginFor: (project) => ({
      llm: {
        providers: {
          openai: { kind: 'openai', apiKey: 'sk-test-provider-key', baseUrl: `${emulator.url}/v1`, models: ['gpt-4o-mini'] },
          other: { kind: 'openai', apiKey: 'sk-test-provider-key', baseUrl: `${emulator.url}/v1`, models: ['gpt-4o-mini'] },
        },
        defaultModel: CHAT_MODEL,
        patientDataModels: ['openai/*'],
      },
      governance: { prices: { [CHAT_MODEL]: { input: 0.15, output: 0.6 } } },
      deIdentification: { dateShiftKey: 'a-review-journey-date-shift-key-of-forty-characters' },
      device_auth: {
        valid_keys: { [MONITOR.id]: MONITOR.key },
        jwt_secret: 'review-journey-device-signing-secret-0123456789',
        identifier_system: 'urn:fhirgate:demo:device',
        project_id: project.projectId,
        // One failed attempt from an address is allowed; the next locks it out (the right key never is).
        failed_attempts_per_source: 1,
      },
    }),
  });
  const project = host.project as SeededProject;
  const projectRecord = await host.store.readResource<Project>('Project', project.projectId);
  await host.store.updateResource<Project>({ ...projectRecord, setting: [...(projectRecord.setting ?? []), { name: 'AI_PATIENT_DATA_POLICY', valueString: 'de-identify' }] });
  for (const [user, password] of [
    ['practitioner-user', CLINICIAN.password],
    ['reviewer-user', REVIEWER.password],
  ] as const) {
    await setPassword(host, project.ids[user], password);
  }
  return {
    host,
    project,
    api: async (path, membership, init = {}) => {
      const token = await host.accessTokenFor(project.ids[membership]);
      return fetch(`${host.url}${path}`, { ...init, headers: { Authorization: `Bearer ${token}`, 'X-Project-ID': project.projectId, 'Content-Type': 'application/json' } });
    },
    deviceExchange: async (apiKey) => {
      const response = await fetch(`${host.url}account/api/token/device/`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ device_id: MONITOR.id, api_key: apiKey }),
      });
      await response.body?.cancel();
      return response.status;
    },
    signIn: (page, who) => signInToReview(page, host.url, who),
    close: async () => {
      await host.close();
      await emulator.close();
    },
  };
}

export { accessibilityViolations } from './web-journey.ts';
export type { WebUser as SignInUser } from './web-journey.ts';

/** Signs in with the app's sign-in form (email, then password) and opens the review console. */
export async function signInToReview(page: Page, serverUrl: string, who: WebUser): Promise<void> {
  await signInAt(page, serverUrl, who);
  await page.goto(`${serverUrl}fhirgate/app/review`);
  await page.getByRole('heading', { name: 'Review' }).waitFor();
}
