/**
 * The part of Medplum's project admin API (admin/project.ts, `/admin/projects/:projectId/...`) that tools and the
 * end-to-end suite use, for a caller whose membership in that project is `admin`:
 * - `GET /:projectId`: `{project: {id, name, setting, secret, site}}`;
 * - `POST /:projectId/settings`, `/secrets`: replace `Project.setting` / `Project.secret`, answer the Project;
 * - `POST /:projectId/invite`: a user, its profile and membership (invite-user.ts), answer the membership;
 * - `POST /:projectId/client`: a ClientApplication with a secret and its membership (create-client.ts), 201;
 * - `GET` / `POST /:projectId/members/:membershipId`: read / replace a membership of the project.
 * Anyone else gets Medplum's answers: 401 without a valid token, 403 otherwise, both before the body is read.
 * Errors are OperationOutcomes.
 */
import { OperationOutcomeError, badRequest, forbidden, unauthorized, type WithId } from '@medplum/core';
import type { FhirRepository } from '@medplum/fhir-router';
import type { Project, ProjectMembership, ProjectSetting } from '@medplum/fhirtypes';
import express, { type Request, type Router } from 'express';
import { z } from 'zod';
import type { CallerContext, HostLogger } from '../../../host.ts';
import { readJsonBody, type BodyLimits } from '../../../http/json-body.ts';
import { createOutcomeErrorHandler } from '../outcome-errors.ts';
import { inviteBody, inviteUser } from './invite-user.ts';
import { createClient, createClientBody } from './create-client.ts';

const settings = z.array(
  z.object({ name: z.string().min(1).max(200), valueString: z.string().optional(), valueBoolean: z.boolean().optional(), valueDecimal: z.number().optional(), valueInteger: z.number().int().optional() }).strict()
);

/** What the admin routes work with. */
export interface ProjectAdminRoutesOptions {
  /** Resolves the caller of a request from its headers (undefined: none). */
  readonly authenticate: (request: Request) => Promise<CallerContext | undefined>;
  /** The body's bounds (Medplum's `maxJsonSize`, 1 MB by default, and a nesting depth). */
  readonly body: Omit<BodyLimits, 'type'>;
  readonly logger?: HostLogger;
}

/** The router for `/admin/projects`. */
export function createProjectAdminRoutes(store: FhirRepository, options: ProjectAdminRoutesOptions): Router {
  const { authenticate } = options;
  const router = express.Router();
  router.use('/:projectId', async (request, _response, next) => {
    const caller = await authenticate(request);
    if (!caller) {
      throw new OperationOutcomeError(unauthorized);
    }
    if (caller.project.id !== request.params.projectId || caller.membership.admin !== true) {
      throw new OperationOutcomeError(forbidden);
    }
    next();
  });
  router.use('/:projectId', readJsonBody({ ...options.body, type: ['application/json', 'application/*+json'] }));
  const project = (request: Request): Promise<WithId<Project>> => store.readResource<Project>('Project', String(request.params.projectId));

  router.get('/:projectId', async (request, response) => {
    const { id, name, setting, secret, site } = await project(request);
    response.json({ project: { id, name, setting, secret, site } });
  });
  router.post('/:projectId/settings', async (request, response) => {
    response.json(await store.updateResource({ ...(await project(request)), setting: parse(settings, request.body) as ProjectSetting[] }));
  });
  router.post('/:projectId/secrets', async (request, response) => {
    response.json(await store.updateResource({ ...(await project(request)), secret: parse(settings, request.body) as ProjectSetting[] }));
  });
  router.post('/:projectId/invite', async (request, response) => {
    response.json(await inviteUser(store, await project(request), parse(inviteBody, request.body)));
  });
  router.post('/:projectId/client', async (request, response) => {
    response.status(201).json(await createClient(store, await project(request), parse(createClientBody, request.body)));
  });
  router.get('/:projectId/members/:membershipId', async (request, response) => {
    response.json(await memberOf(store, request));
  });
  router.post('/:projectId/members/:membershipId', async (request, response) => {
    const current = await memberOf(store, request);
    const body = request.body as Partial<ProjectMembership> | undefined;
    if (body?.resourceType !== 'ProjectMembership' || body.id !== current.id || body.project?.reference !== current.project.reference) {
      throw new OperationOutcomeError(forbidden);
    }
    response.json(await store.updateResource({ ...body, meta: current.meta } as ProjectMembership));
  });
  router.use(createOutcomeErrorHandler(options.logger));
  return router;
}

async function memberOf(store: FhirRepository, request: Request): Promise<WithId<ProjectMembership>> {
  const membership = await store.readResource<ProjectMembership>('ProjectMembership', String(request.params.membershipId));
  if (membership.project.reference !== `Project/${request.params.projectId}`) {
    throw new OperationOutcomeError(forbidden);
  }
  return membership;
}

function parse<T>(schema: z.ZodType<T>, body: unknown): T {
  const result = schema.safeParse(body);
  if (!result.success) {
    const issue = result.error.issues[0];
    throw new OperationOutcomeError(badRequest(`${issue?.message ?? 'Invalid request'}${issue?.path.length ? ` (${issue.path.join('.')})` : ''}`));
  }
  return result.data;
}
