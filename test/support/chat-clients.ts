/**
 * The clients an end-to-end chat test uses, for a project of its own: the openai SDK signed in as the demo
 * practitioner (no SDK retries, so each call is one request) and MedplumClient signed in as the project's client
 * application, to read what was stored.
 */
import { MedplumClient } from '@medplum/core';
import OpenAI from 'openai';
import type { SeededProject } from '../../plugin/hosts/standalone/seed.ts';
import type { TestHost } from './test-host.ts';

/** A chat completion as fhirgate answers it: the OpenAI shape plus the conversation and the reply's record. */
export type FhirgateCompletion = OpenAI.ChatCompletion & { conversation_id: string; communication_id: string };

export interface ChatClients {
  readonly project: SeededProject;
  readonly openai: OpenAI;
  readonly medplum: MedplumClient;
}

/** Seeds a fresh project on `host` and signs both clients in. */
export async function chatClients(host: TestHost): Promise<ChatClients> {
  const project = await host.seedProject();
  const token = await host.accessTokenFor(project.ids['practitioner-membership']);
  const openai = new OpenAI({ baseURL: `${host.url}v1`, apiKey: token, defaultHeaders: { 'X-Project-ID': project.projectId }, maxRetries: 0 });
  const medplum = new MedplumClient({ baseUrl: host.url, fetch });
  await medplum.startClientLogin(project.client?.id ?? '', project.client?.secret ?? '');
  return { project, openai, medplum };
}
