/**
 * fhirgate's documented routes (`/v1/...`), called as the signed-in user: MedplumClient's access token (refreshed
 * when it is about to expire) and the project of the session as `X-Project-ID`.
 */
import type { MedplumClient } from '@medplum/core';

/** An error of fhirgate's routes, with the message its body gives for people to read. */
export class FhirgateError extends Error {
  readonly status: number;
  constructor(status: number, message: string) {
    super(message);
    this.status = status;
  }
}

export async function fhirgateFetch(medplum: MedplumClient, path: string, init: RequestInit = {}): Promise<Response> {
  await medplum.refreshIfExpired();
  const headers = new Headers(init.headers);
  headers.set('Authorization', `Bearer ${medplum.getAccessToken() ?? ''}`);
  const projectId = medplum.getProject()?.id ?? medplum.getActiveLogin()?.project.reference?.split('/')[1];
  if (projectId) {
    headers.set('X-Project-ID', projectId);
  }
  const response = await fetch(new URL(path, medplum.getBaseUrl()), { ...init, headers });
  if (!response.ok) {
    throw new FhirgateError(response.status, await errorMessageOf(response));
  }
  return response;
}

/** The message of an OpenAI-style error body, or the status when the body has none. */
async function errorMessageOf(response: Response): Promise<string> {
  const body = (await response.json().catch(() => undefined)) as { error?: { message?: unknown } } | undefined;
  const message = body?.error?.message;
  return typeof message === 'string' && message ? message : `The server answered ${response.status} ${response.statusText}.`.trim();
}
