/**
 * fhirgate's documented routes (`/v1/...`), called as the signed-in user: MedplumClient's access token (refreshed
 * when it is about to expire) and the project of the session as `X-Project-ID`.
 */
import type { MedplumClient } from '@medplum/core';

/** An error of fhirgate's routes: the status, the spec's `code`, `Retry-After` in seconds, and the body's message. */
export class FhirgateError extends Error {
  readonly status: number;
  readonly code: string | undefined;
  readonly retryAfterSeconds: number | undefined;
  constructor(status: number, message: string, code?: string, retryAfterSeconds?: number) {
    super(message);
    this.status = status;
    this.code = code;
    this.retryAfterSeconds = retryAfterSeconds;
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
  if (response.status === 401) {
    // The session was revoked or has expired: as MedplumClient does on a 401, end it here, so the app sends the
    // user to sign in (and back to this page afterwards).
    medplum.clear();
  }
  if (!response.ok) {
    throw await errorOf(response);
  }
  return response;
}

/** The error of an OpenAI-style error body, or of the status when the body has none. */
async function errorOf(response: Response): Promise<FhirgateError> {
  const body = (await response.json().catch(() => undefined)) as { error?: { message?: unknown; code?: unknown } } | undefined;
  const message = body?.error?.message;
  const code = body?.error?.code;
  const retryAfter = Number(response.headers.get('Retry-After') ?? Number.NaN);
  return new FhirgateError(
    response.status,
    typeof message === 'string' && message ? message : `The server answered ${response.status} ${response.statusText}.`.trim(),
    typeof code === 'string' ? code : undefined,
    Number.isFinite(retryAfter) ? retryAfter : undefined
  );
}
