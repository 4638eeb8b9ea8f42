import { getStatus, type WithId } from '@medplum/core';
import { FhirRouter, makeSimpleRequest } from '@medplum/fhir-router';
import type { Bundle, Communication, Patient } from '@medplum/fhirtypes';
import { SqliteRepository } from './sqlite-repository.ts';

let repository: SqliteRepository;
const router = new FhirRouter();

beforeEach(() => {
  repository = SqliteRepository.open(':memory:', {
    fullUrl: (resourceType, id) => `https://fhirgate.test/fhir/R4/${resourceType}/${id}`,
  });
});

afterEach(() => {
  repository.close();
});

describe('FhirRouter over SqliteRepository', () => {
  test('create, read, search, update with If-Match, patch, history, delete', async () => {
    const [createdOutcome, created] = await router.handleRequest(
      makeSimpleRequest('POST', 'Patient', { resourceType: 'Patient', name: [{ given: ['Grace'], family: 'Hopper' }] }),
      repository
    );
    expect(getStatus(createdOutcome)).toBe(201);
    const patient = created as WithId<Patient>;

    const [readOutcome, read] = await router.handleRequest(makeSimpleRequest('GET', `Patient/${patient.id}`), repository);
    expect(getStatus(readOutcome)).toBe(200);
    expect(read).toEqual(patient);

    const [searchOutcome, searchResult] = await router.handleRequest(makeSimpleRequest('GET', 'Patient?name=hopp'), repository);
    expect(getStatus(searchOutcome)).toBe(200);
    const bundle = searchResult as Bundle<Patient>;
    expect(bundle.entry?.map((entry) => [entry.resource?.id, entry.fullUrl, entry.search?.mode])).toEqual([
      [patient.id, `https://fhirgate.test/fhir/R4/Patient/${patient.id}`, 'match'],
    ]);
    const [, noMatch] = await router.handleRequest(makeSimpleRequest('GET', 'Patient?name=lovelace'), repository);
    expect((noMatch as Bundle).entry).toBeUndefined();

    const staleUpdate = makeSimpleRequest('PUT', `Patient/${patient.id}`, { ...patient, active: true });
    staleUpdate.headers = { 'if-match': 'W/"stale"' };
    const [staleOutcome] = await router.handleRequest(staleUpdate, repository);
    expect(getStatus(staleOutcome)).toBe(412);
    const freshUpdate = makeSimpleRequest('PUT', `Patient/${patient.id}`, { ...patient, active: true });
    freshUpdate.headers = { 'if-match': `W/"${patient.meta?.versionId}"` };
    const [updateOutcome, updated] = await router.handleRequest(freshUpdate, repository);
    expect(getStatus(updateOutcome)).toBe(200);
    expect((updated as Patient).active).toBe(true);

    const [patchOutcome, patched] = await router.handleRequest(
      makeSimpleRequest('PATCH', `Patient/${patient.id}`, [{ op: 'add', path: '/gender', value: 'female' }]),
      repository
    );
    expect(getStatus(patchOutcome)).toBe(200);
    expect((patched as Patient).gender).toBe('female');

    const [historyOutcome, history] = await router.handleRequest(makeSimpleRequest('GET', `Patient/${patient.id}/_history`), repository);
    expect(getStatus(historyOutcome)).toBe(200);
    expect((history as Bundle).entry).toHaveLength(3);

    const [deleteOutcome] = await router.handleRequest(makeSimpleRequest('DELETE', `Patient/${patient.id}`), repository);
    expect(getStatus(deleteOutcome)).toBe(200);
    const [goneOutcome] = await router.handleRequest(makeSimpleRequest('GET', `Patient/${patient.id}`), repository);
    expect(getStatus(goneOutcome)).toBe(410);
    const [missingOutcome] = await router.handleRequest(makeSimpleRequest('GET', 'Patient/does-not-exist'), repository);
    expect(getStatus(missingOutcome)).toBe(404);
  });

  test('conditional create (If-None-Exist) finds the existing resource instead of creating another', async () => {
    const identifier = [{ system: 'urn:turn', value: 't-1' }];
    const body: Communication = { resourceType: 'Communication', status: 'completed', identifier };
    const first = makeSimpleRequest('POST', 'Communication', body);
    first.headers = { 'if-none-exist': 'identifier=urn:turn|t-1' };
    const [firstOutcome, firstResult] = await router.handleRequest(first, repository);
    expect(getStatus(firstOutcome)).toBe(201);
    const again = makeSimpleRequest('POST', 'Communication', body);
    again.headers = { 'if-none-exist': 'identifier=urn:turn|t-1' };
    const [againOutcome, againResult] = await router.handleRequest(again, repository);
    expect(getStatus(againOutcome)).toBe(200);
    expect((againResult as Communication).id).toBe((firstResult as Communication).id);
  });

  test('a batch bundle runs every entry against the store', async () => {
    const [outcome, response] = await router.handleRequest(
      makeSimpleRequest('POST', '', {
        resourceType: 'Bundle',
        type: 'batch',
        entry: [
          { request: { method: 'POST', url: 'Patient' }, resource: { resourceType: 'Patient' } },
          { request: { method: 'GET', url: 'Patient/missing' } },
        ],
      }),
      repository
    );
    expect(getStatus(outcome)).toBe(200);
    expect((response as Bundle).entry?.map((entry) => entry.response?.status)).toEqual(['201', '404']);
  });
});
