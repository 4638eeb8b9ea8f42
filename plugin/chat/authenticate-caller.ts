import type { Request } from 'express';
import { AppError } from '../errors.ts';
import type { CallerContext, FhirgateHost } from '../host.ts';

/** The header naming the project a chat request acts in. */
export const PROJECT_HEADER = 'x-project-id';

/**
 * Step 1 of the spec: validate the token, identify the caller, check the project. A missing or invalid token
 * or a missing `X-Project-ID` is 401; a project that is not the caller's is 403. Nothing is stored before this.
 */
export async function authenticateCaller(host: FhirgateHost, request: Request): Promise<CallerContext> {
  const caller = await host.authenticate(request);
  if (!caller) {
    throw new AppError('unauthenticated', 'Missing, invalid or expired access token.');
  }
  const projectId = request.get(PROJECT_HEADER)?.trim();
  if (!projectId) {
    throw new AppError('unauthenticated', 'Missing X-Project-ID header.');
  }
  if (projectId !== caller.project.id) {
    throw new AppError('forbidden', 'The access token does not belong to the project named in X-Project-ID.');
  }
  return caller;
}
