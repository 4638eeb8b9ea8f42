/**
 * A project administrator's invite, as Medplum's `POST /admin/projects/:projectId/invite` (admin/invite.ts) makes
 * it: a `User` (email lower-cased; a Patient's user belongs to the project, a Practitioner's or RelatedPerson's to
 * the server, unless `scope` says otherwise), the profile resource in the project, and the `ProjectMembership`
 * joining them with the given AccessPolicy, `access` entries and `admin` flag. An email that already has a
 * membership in the project is a 409, as in Medplum; a User with that email is reused. No email is sent: the
 * standalone host sends no mail (`sendEmail` is accepted and has no effect), so a user signs in with the
 * `password` given here.
 */
import { randomBytes } from 'node:crypto';
import { Operator, OperationOutcomeError, badRequest, conflict, createReference, type ProfileResource, type WithId } from '@medplum/core';
import type { FhirRepository } from '@medplum/fhir-router';
import type { Project, ProjectMembership, Reference, User } from '@medplum/fhirtypes';
import { z } from 'zod';
import { hashPassword } from '../auth/passwords.ts';

const reference = z.object({ reference: z.string().min(1), display: z.string().optional() });

/** The fields of Medplum's InviteRequest this host honours; any other is refused by name. */
export const inviteBody = z
  .object({
    resourceType: z.enum(['Patient', 'Practitioner', 'RelatedPerson']),
    firstName: z.string().trim().min(1).max(200),
    lastName: z.string().trim().min(1).max(200),
    email: z.email().max(320).optional(),
    password: z.string().min(8).max(1024).optional(),
    sendEmail: z.boolean().optional(),
    scope: z.enum(['project', 'server']).optional(),
    patient: reference.optional(),
    membership: z
      .object({
        accessPolicy: reference.optional(),
        access: z.array(z.object({ policy: reference, parameter: z.array(z.object({ name: z.string().min(1), valueReference: reference.optional(), valueString: z.string().optional() }).strict()).optional() }).strict()).optional(),
        admin: z.boolean().optional(),
        profile: reference.optional(),
      })
      .strict()
      .optional(),
  })
  .strict();

/** An invite as validated. */
export type InviteRequest = z.output<typeof inviteBody>;

/** Creates (or reuses) the user and the profile, and the membership in `project`; resolves the membership. */
export async function inviteUser(store: FhirRepository, project: WithId<Project>, request: InviteRequest): Promise<WithId<ProjectMembership>> {
  const email = request.email?.toLowerCase();
  const projectScoped = (request.resourceType === 'Patient' && request.scope !== 'server') || request.scope === 'project';
  if (email && (await memberWithEmail(store, project, email))) {
    throw new OperationOutcomeError(conflict('User is already a member of this project'));
  }
  const user = await upsertUser(store, project, request, email, projectScoped);
  const profile = await profileFor(store, project, request, email);
  return store.createResource<ProjectMembership>({
    resourceType: 'ProjectMembership',
    meta: { project: project.id },
    project: createReference(project),
    user: createReference(user),
    profile: createReference(profile) as Reference<ProfileResource>,
    accessPolicy: request.membership?.accessPolicy,
    access: request.membership?.access,
    admin: request.membership?.admin,
  } as ProjectMembership);
}

async function memberWithEmail(store: FhirRepository, project: WithId<Project>, email: string): Promise<boolean> {
  const users = await store.searchResources<User>({ resourceType: 'User', filters: [{ code: 'email', operator: Operator.EXACT, value: email }] });
  for (const user of users) {
    const memberships = await store.searchResources<ProjectMembership>({
      resourceType: 'ProjectMembership',
      filters: [
        { code: 'user', operator: Operator.EQUALS, value: `User/${user.id}` },
        { code: 'project', operator: Operator.EQUALS, value: `Project/${project.id}` },
      ],
    });
    if (memberships.length > 0) {
      return true;
    }
  }
  return false;
}

async function upsertUser(store: FhirRepository, project: WithId<Project>, request: InviteRequest, email: string | undefined, projectScoped: boolean): Promise<WithId<User>> {
  if (email) {
    const users = await store.searchResources<User>({ resourceType: 'User', filters: [{ code: 'email', operator: Operator.EXACT, value: email }] });
    const existing = users.find((user) => (user.project?.reference === `Project/${project.id}`) === projectScoped);
    if (existing) {
      return existing;
    }
  }
  return store.createResource<User>({
    resourceType: 'User',
    ...(projectScoped ? { meta: { project: project.id }, project: createReference(project) } : {}),
    firstName: request.firstName,
    lastName: request.lastName,
    email,
    // Without a password the user cannot sign in with one (Medplum would email a link to set it).
    passwordHash: await hashPassword(request.password ?? randomBytes(32).toString('base64url')),
  });
}

async function profileFor(store: FhirRepository, project: WithId<Project>, request: InviteRequest, email: string | undefined): Promise<WithId<ProfileResource>> {
  if (request.membership?.profile) {
    const profile = await store.readReference<ProfileResource>(request.membership.profile as Reference<ProfileResource>);
    if (profile.meta?.project !== project.id || profile.resourceType !== request.resourceType) {
      throw new OperationOutcomeError(badRequest('Profile does not belong to project, or is not of the resourceType asked'));
    }
    return profile;
  }
  if (request.resourceType === 'RelatedPerson' && !request.patient) {
    throw new OperationOutcomeError(badRequest('A RelatedPerson needs the patient it is related to'));
  }
  return store.createResource<ProfileResource>({
    resourceType: request.resourceType,
    meta: { project: project.id },
    name: [{ given: [request.firstName], family: request.lastName }],
    telecom: email ? [{ system: 'email', use: 'work', value: email }] : undefined,
    ...(request.resourceType === 'RelatedPerson' ? { patient: request.patient } : {}),
  } as ProfileResource);
}
