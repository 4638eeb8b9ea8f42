/**
 * A host with two models side by side, each answered by its own loopback emulator: `cleared/gpt-4o`, which the
 * operator cleared for patient data, and `other/gpt-4o-mini`, which it did not. Each test gets a project of its own
 * whose demo patient Maria Lopez has identifiers, contact details and an address on record, and a chart.
 */
import type { MedplumClient } from '@medplum/core';
import type { FhirRepository } from '@medplum/fhir-router';
import type { Observation, Patient, Project } from '@medplum/fhirtypes';
import OpenAI from 'openai';
import type { SeededProject } from '../../plugin/hosts/standalone/seed.ts';
import { createJsonLogger } from '../../plugin/hosts/standalone/logger.ts';
import { startLlmEmulator, type LlmEmulator } from '../emulator/index.ts';
import { chatClients } from './chat-clients.ts';
import { seedChart, type SeededChart } from './seeded-chart.ts';
import { startTestHost, TEST_METRICS_TOKEN, type TestHost } from './test-host.ts';

export const CLEARED_MODEL = 'cleared/gpt-4o';
export const OTHER_MODEL = 'other/gpt-4o-mini';

/** Maria Lopez's identifiers as her record holds them (her name and birth date are the demo fixture's). */
export const MARIA = {
  given: 'Maria',
  family: 'Lopez',
  birthDate: '1958-03-14',
  mrn: 'MRN-004512',
  phone: '+1 555-010-0199',
  email: 'maria.lopez@example.org',
  line: '12 Elm Street',
  city: 'Springfield',
  postalCode: '62704',
} as const;

/** What must never reach a model that is not cleared, as it may appear in any text (the patient's id added per test). */
export const MARIA_IDENTIFYING = ['Maria', 'Lopez', '1958-03-14', '14/03/1958', '004512', '010-0199', '5550100199', 'maria.lopez', 'Elm Street', 'Springfield', '62704'];

export interface TwoModelHost {
  readonly cleared: LlmEmulator;
  readonly other: LlmEmulator;
  readonly host: TestHost;
  close(): Promise<void>;
}

/**
 * Starts both emulators and a host; `fallbacks` as in the `llm` option; the host's log lines go to `logLines`;
 * `otherKind`: what kind of provider the model not cleared is (OpenAI by default).
 */
export async function startTwoModelHost(
  options: {
    readonly fallbacks?: Record<string, string[]>;
    readonly logLines?: string[];
    readonly otherKind?: 'openai' | 'openai-compatible';
    /** The reply journal's folder (the plugin's `replyJournalDir`); none unless given. */
    readonly replyJournalDir?: string;
  } = {}
): Promise<TwoModelHost> {
  const cleared = await startLlmEmulator();
  const other = await startLlmEmulator();
  const provider = (emulator: LlmEmulator, model: string, kind: 'openai' | 'openai-compatible' = 'openai') => ({
    kind,
    apiKey: 'sk-test',
    baseUrl: `${emulator.url}/v1`,
    models: [model],
    retries: { maxRetries: 0 },
  });
  const host = await startTestHost({
    metrics: true,
    logger: options.logLines ? createJsonLogger('info', (line) => options.logLines?.push(line)) : undefined,
    plugin: {
      llm: {
        providers: { cleared: provider(cleared, 'gpt-4o'), other: provider(other, 'gpt-4o-mini', options.otherKind) },
        defaultModel: CLEARED_MODEL,
        patientDataModels: ['cleared/*'],
        fallbacks: options.fallbacks,
      },
      deIdentification: { dateShiftKey: 'a-test-date-shift-key-of-forty-characters' },
      replyJournalDir: options.replyJournalDir,
    },
  });
  return {
    cleared,
    other,
    host,
    close: async () => {
      await host.close();
      await cleared.close();
      await other.close();
    },
  };
}

/** One test's project, clients and chart. */
export interface PatientDataProject {
  readonly project: SeededProject;
  readonly medplum: MedplumClient;
  readonly system: FhirRepository;
  readonly chart: SeededChart & { readonly note: Observation & { id: string } };
  readonly patientId: string;
  /** An openai client signed in after the project's settings were last changed (a caller is cached for 5 s). */
  openai(): Promise<OpenAI>;
  /** Sets the project's `Project.setting` entries. */
  setSettings(settings: Record<string, string>): Promise<void>;
}

/** A project of the test's own, its patient identified in full and with a chart. */
export async function patientDataProject(host: TestHost): Promise<PatientDataProject> {
  const { project, medplum } = await chatClients(host);
  const system = await host.standalone.host.getSystemRepo(project.projectId);
  const patientId = project.ids['patient-in-care-team-1'];
  const patient = await system.readResource<Patient>('Patient', patientId);
  await system.updateResource<Patient>({
    ...patient,
    identifier: [{ system: 'urn:oid:2.16.840.1.113883.19.5', value: MARIA.mrn }],
    telecom: [
      { system: 'phone', value: MARIA.phone },
      { system: 'email', value: MARIA.email },
    ],
    address: [{ line: [MARIA.line], city: MARIA.city, postalCode: MARIA.postalCode, state: 'IL' }],
  });
  const chart = await seedChart(system, project);
  // Free text of the chart that names the patient and her contact details.
  const note = await system.createResource<Observation>({
    resourceType: 'Observation',
    status: 'final',
    subject: { reference: `Patient/${patientId}` },
    code: { text: 'Nursing note' },
    effectiveDateTime: '2026-10-20T08:00:00Z',
    valueString: `Maria Lopez called from ${MARIA.phone} about dizziness since 2026-10-18; daughter lives at ${MARIA.line}.`,
  });
  const signIn = async (): Promise<OpenAI> =>
    new OpenAI({
      baseURL: `${host.url}v1`,
      apiKey: await host.accessTokenFor(project.ids['practitioner-membership']),
      defaultHeaders: { 'X-Project-ID': project.projectId },
      maxRetries: 0,
    });
  return {
    project,
    medplum,
    system,
    chart: { ...chart, note },
    patientId,
    openai: signIn,
    setSettings: async (settings) => {
      const current = await host.store.readResource<Project>('Project', project.projectId);
      const kept = (current.setting ?? []).filter((entry) => !(entry.name in settings));
      await host.store.updateResource<Project>({ ...current, setting: [...kept, ...Object.entries(settings).map(([name, valueString]) => ({ name, valueString }))] });
    },
  };
}

/** The identifying strings found anywhere in `text` (case ignored). */
export function identifyingIn(text: string, patientId: string): string[] {
  return [...MARIA_IDENTIFYING, patientId].filter((identifying) => text.toLowerCase().includes(identifying.toLowerCase()));
}

/** The value of the Prometheus sample `name{labels}` on the host's `/metrics` (0 when absent). */
export async function metricValue(host: TestHost, name: string, labels: Record<string, string>): Promise<number> {
  const response = await fetch(`${host.url}metrics`, { headers: { Authorization: `Bearer ${TEST_METRICS_TOKEN}` } });
  const wanted = Object.entries(labels).map(([key, value]) => `${key}="${value}"`);
  const line = (await response.text()).split('\n').find((candidate) => candidate.startsWith(`${name}{`) && wanted.every((pair) => candidate.includes(pair)));
  return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(' ') + 1));
}
