import { jest } from '@jest/globals';
import { OperationOutcomeError, type WithId } from '@medplum/core';
import { MemoryRepository } from '@medplum/fhir-router';
import type { AccessPolicy, Login, Patient, ProjectMembership } from '@medplum/fhirtypes';
import type { IncomingHttpHeaders } from 'node:http';
import { loadFhirDefinitions } from '../fhir-definitions.ts';
import { readProjectFixture, seedProject, type SeededProject } from '../seed.ts';
import { createAccessTokenService, type AccessTokenService } from './access-tokens.ts';
import { authenticateRequest } from './authenticate-request.ts';
import { createCallerCache, DEFAULT_CALLER_TTL_MS, type CallerCache } from './caller-cache.ts';
import { startLogin } from './logins.ts';
import { loadSigningKeys } from './signing-keys.ts';

describe('authenticateRequest with a caller cache', () => {
  let store: MemoryRepository;
  let tokens: AccessTokenService;
  let verify: jest.Mock<AccessTokenService['verify']>;
  let project: SeededProject;
  let callers: CallerCache;
  let clock: number;

  beforeAll(() => loadFhirDefinitions());

  beforeEach(async () => {
    store = new MemoryRepository();
    const real = createAccessTokenService({ keys: await loadSigningKeys(store), issuer: 'http://localhost:8103/' });
    verify = jest.fn(real.verify);
    tokens = { ...real, verify };
    project = await seedProject(store, await readProjectFixture(), { freshIds: true });
    clock = Date.now();
    callers = createCallerCache({ now: () => clock });
  });

  async function headersFor(membershipName: string): Promise<IncomingHttpHeaders> {
    const membership: WithId<ProjectMembership> = await store.readResource<WithId<ProjectMembership>>('ProjectMembership', project.ids[membershipName]);
    const issued = await startLogin(store, tokens, { membership, authMethod: 'pre-authorized' });
    return { authorization: `Bearer ${issued.accessToken}` };
  }

  async function canReadPatient(headers: IncomingHttpHeaders, patientName: string): Promise<boolean> {
    const caller = await authenticateRequest(headers, store, tokens, callers);
    if (!caller) {
      throw new Error('not authenticated');
    }
    return caller.repo.readResource<Patient>('Patient', project.ids[patientName]).then(
      () => true,
      (error: unknown) => (error instanceof OperationOutcomeError ? false : Promise.reject(error))
    );
  }

  test('the same token again is a hit: no signature check, the same repository, a fresh Login', async () => {
    const headers = await headersFor('practitioner-membership');
    const first = await authenticateRequest(headers, store, tokens, callers);
    const second = await authenticateRequest(headers, store, tokens, callers);
    expect(verify).toHaveBeenCalledTimes(1);
    expect(second?.repo).toBe(first?.repo);
    expect(second?.project.id).toBe(project.projectId);
    expect(second?.login).not.toBe(first?.login); // read again on the hit
    expect(second?.login.id).toBe(first?.login.id);
  });

  test('without a cache every request is verified and resolved', async () => {
    const headers = await headersFor('practitioner-membership');
    const first = await authenticateRequest(headers, store, tokens);
    const second = await authenticateRequest(headers, store, tokens);
    expect(verify).toHaveBeenCalledTimes(2);
    expect(second?.repo).not.toBe(first?.repo);
  });

  test('another token, even one byte apart, is never served from the cache', async () => {
    const headers = await headersFor('practitioner-membership');
    await authenticateRequest(headers, store, tokens, callers);
    const token = String(headers.authorization);
    const tampered = `${token.slice(0, -2)}${token.endsWith('AA') ? 'BB' : 'AA'}`;
    expect(await authenticateRequest({ authorization: tampered }, store, tokens, callers)).toBeUndefined();
    expect(verify).toHaveBeenCalledTimes(2);
  });

  test('a revoked login is refused at once, though its caller is cached', async () => {
    const headers = await headersFor('practitioner-membership');
    const caller = await authenticateRequest(headers, store, tokens, callers);
    await store.updateResource<Login>({ ...(caller?.login as Login), revoked: true });
    expect(await authenticateRequest(headers, store, tokens, callers)).toBeUndefined();
    expect(callers.size).toBe(0);
  });

  test('a deactivated membership is refused at once, though its caller is cached', async () => {
    const headers = await headersFor('practitioner-membership');
    const caller = await authenticateRequest(headers, store, tokens, callers);
    await store.updateResource<ProjectMembership>({ ...(caller?.membership as ProjectMembership), active: false });
    expect(await authenticateRequest(headers, store, tokens, callers)).toBeUndefined();
  });

  test('a membership given other policies is resolved again at once', async () => {
    const headers = await headersFor('practitioner-membership');
    expect(await canReadPatient(headers, 'patient-in-care-team-1')).toBe(true);
    const membership = await store.readResource<ProjectMembership>('ProjectMembership', project.ids['practitioner-membership']);
    await store.updateResource<ProjectMembership>({ ...membership, access: membership.access?.slice(0, 1) });
    expect(await canReadPatient(headers, 'patient-in-care-team-1')).toBe(false);
    expect(verify).toHaveBeenCalledTimes(2);
  });

  test('an AccessPolicy edited directly in the store applies within the TTL', async () => {
    const headers = await headersFor('practitioner-membership');
    expect(await canReadPatient(headers, 'patient-in-care-team-1')).toBe(true);
    const policy = await store.readResource<AccessPolicy>('AccessPolicy', project.ids['policy-care-team-patient']);
    await store.updateResource<AccessPolicy>({ ...policy, resource: policy.resource?.filter((rule) => rule.resourceType !== 'Patient') });
    clock += DEFAULT_CALLER_TTL_MS;
    expect(await canReadPatient(headers, 'patient-in-care-team-1')).toBe(false);
  });

  test("a write through a caller's repository to what callers are built from drops every cached caller", async () => {
    const practitioner = await headersFor('practitioner-membership');
    const practitionerCaller = await authenticateRequest(practitioner, store, tokens, callers);
    const clientMembership = await store.readResource<ProjectMembership>('ProjectMembership', project.ids['client-membership']);
    await store.updateResource<ProjectMembership>({ ...clientMembership, admin: true });
    const admin = await authenticateRequest(await headersFor('client-membership'), store, tokens, callers);
    expect(callers.size).toBe(2);

    // A Communication is not a source of callers: nothing is dropped.
    await practitionerCaller?.repo.createResource({
      resourceType: 'Communication',
      status: 'completed',
      category: [{ coding: [{ code: 'ai-prompt' }] }],
      sender: practitionerCaller.profile,
    });
    expect(callers.size).toBe(2);

    const membership = await admin?.repo.readResource<ProjectMembership>('ProjectMembership', project.ids['practitioner-membership']);
    await admin?.repo.updateResource<ProjectMembership>({ ...(membership as ProjectMembership), access: [] });
    expect(callers.size).toBe(0);
  });
});
