/**
 * Reads Medplum's request context (context.ts) without its classes: an `AuthenticatedRequestContext` exposes
 * `repo` and the getters `project`, `membership` (the on-behalf-of membership when there is one), `login` and
 * `profile`; a plain `RequestContext` (no valid credential) has none of them. Both carry a `logger`. The
 * context comes from another package's copy of Medplum's types, so it is checked field by field, not trusted.
 */
import type { ProfileResource, WithId } from '@medplum/core';
import type { FhirRepository } from '@medplum/fhir-router';
import type { Login, Project, ProjectMembership, Reference } from '@medplum/fhirtypes';
import type { CallerContext, HostLogger } from '../../host.ts';

/** The caller of an authenticated Medplum request context, or undefined for any other context. */
export function readAuthenticatedContext(context: unknown): CallerContext | undefined {
  if (!isObject(context)) {
    return undefined;
  }
  // Read one by one: on Medplum's class these are getters, and a system context (authState `{}`) has no project.
  const repo = context.repo;
  const project = context.project;
  const membership = context.membership;
  const login = context.login;
  const profile = context.profile;
  if (
    !isRepository(repo) ||
    !isResourceWithId<Project>(project, 'Project') ||
    !isResourceWithId<ProjectMembership>(membership, 'ProjectMembership') ||
    // A ClientApplication's Basic auth (client id and secret) has a Login made for the request, without an id.
    !isLogin(login) ||
    !isReference(profile)
  ) {
    return undefined;
  }
  return { repo, project, membership, login, profile: profile as Reference<ProfileResource> };
}

/** The request context's logger, or undefined outside a request. */
export function readRequestLogger(context: unknown): HostLogger | undefined {
  if (!isObject(context) || !isLogger(context.logger)) {
    return undefined;
  }
  return context.logger;
}

/** The request context's `requestId` (Medplum makes one per request), or undefined outside a request. */
export function readRequestId(context: unknown): string | undefined {
  return isObject(context) && typeof context.requestId === 'string' && context.requestId.length > 0 ? context.requestId : undefined;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null;
}

// Medplum's Repository extends its own copy of FhirRepository, so `instanceof` could fail across copies.
function isRepository(value: unknown): value is FhirRepository {
  return (
    isObject(value) &&
    typeof value.readResource === 'function' &&
    typeof value.createResource === 'function' &&
    typeof value.search === 'function' &&
    typeof value.withTransaction === 'function'
  );
}

function isResourceWithId<T extends Project | ProjectMembership | Login>(value: unknown, resourceType: T['resourceType']): value is WithId<T> {
  return isObject(value) && value.resourceType === resourceType && typeof value.id === 'string' && value.id.length > 0;
}

function isLogin(value: unknown): value is Login {
  return isObject(value) && value.resourceType === 'Login' && (isResourceWithId<Login>(value, 'Login') || value.authMethod === 'client');
}

function isReference(value: unknown): value is Reference {
  return isObject(value) && typeof value.reference === 'string' && value.reference.includes('/');
}

function isLogger(value: unknown): value is HostLogger {
  return (
    isObject(value) &&
    typeof value.debug === 'function' &&
    typeof value.info === 'function' &&
    typeof value.warn === 'function' &&
    typeof value.error === 'function'
  );
}
