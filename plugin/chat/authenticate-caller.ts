import type { Request } from 'express';
import { AppError } from '../errors.ts';
import type { CallerContext, FhirgateHost } from '../host.ts';
import { annotateCaller } from '../telemetry/request-telemetry.ts';

/** The header naming the project a chat request acts in. */
export const PROJECT_HEADER = 'x-project-id';

/** The project base URL's prefix: `/projects/{project_id}/v1` serves every `/v1` route for that project. */
export const PROJECT_BASE_PATH = '/projects/:projectId/v1';

// The mount path of the `/v1` router as Express gives it in `baseUrl` (with whatever prefix the server mounts
// fhirgate under, e.g. Medplum's `/api/`).
// The MCP endpoint's project base URL (`/projects/{project_id}/mcp`) names the project the same way.
const PROJECT_BASE_URL = /\/projects\/([^/]+)\/(?:v1|mcp)$/;

/**
 * The project a request names in its path (`/projects/{project_id}/v1/...`), or undefined for `/v1/...`.
 * For chat UIs, editor plugins and connectors that let a user set a base URL and a key but no header.
 */
export function projectOfPath(request: Request): string | undefined {
  const match = PROJECT_BASE_URL.exec(request.baseUrl);
  if (!match?.[1]) {
    return undefined;
  }
  try {
    return decodeURIComponent(match[1]);
  } catch {
    return match[1];
  }
}

/**
 * Step 1 of the spec: validate the token, identify the caller, check the project. A missing or invalid token
 * or a missing `X-Project-ID` is 401; a project that is not the caller's is 403. Nothing is stored before this.
 * Under the project base URL the path names the project and the header may be left out; a header that names
 * another project than the path is 403. `projectFromCredential` (the MCP endpoint, which the spec does not cover):
 * a request that names no project acts in the credential's own, as Medplum's routes do, since a client signed in
 * through OAuth sends a token and nothing else.
 */
export async function authenticateCaller(host: FhirgateHost, request: Request, options: { readonly projectFromCredential?: boolean } = {}): Promise<CallerContext> {
  const caller = await host.authenticate(request);
  if (!caller) {
    throw new AppError('unauthenticated', 'Missing, invalid or expired access token.');
  }
  if (caller.profile.reference) {
    annotateCaller(request, caller.profile.reference);
  }
  const pathProject = projectOfPath(request);
  const headerProject = request.get(PROJECT_HEADER)?.trim() || undefined;
  if (pathProject !== undefined && headerProject !== undefined && headerProject !== pathProject) {
    throw new AppError('forbidden', 'X-Project-ID names another project than the base URL (/projects/{project_id}/...).');
  }
  const projectId = pathProject ?? headerProject ?? (options.projectFromCredential ? caller.project.id : undefined);
  if (!projectId) {
    throw new AppError('unauthenticated', 'Missing X-Project-ID header.');
  }
  if (projectId !== caller.project.id) {
    throw new AppError(
      'forbidden',
      pathProject !== undefined
        ? 'The credential does not belong to the project named in the base URL.'
        : 'The access token does not belong to the project named in X-Project-ID.'
    );
  }
  return caller;
}
