/**
 * What the store's writes refuse, as a FHIR client reads the refusal: the status FhirRouter answers with and the
 * OperationOutcome's text (and the field it names); a refused write stores nothing. And what If-Match accepts: the
 * current version, for an update, a patch and a delete alike.
 */
import type { Patient, Practitioner } from '@medplum/fhirtypes';
import { refusalOf, statusOf } from '../../../../test/support/rejection-status.ts';
import { memoryRepositories } from '../../../../test/support/memory-repositories.ts';

const openRepository = memoryRepositories();

const patient: Patient = { resourceType: 'Patient', name: [{ given: ['Ada'], family: 'Lovelace' }] };

test('a write of an unknown resource type is refused as an unknown resource type, whichever the write', async () => {
  const repository = openRepository();
  const unknownType = 'NotAType' as Patient['resourceType'];
  const stranger: Patient = { ...patient, resourceType: unknownType, id: 'x' };
  const refused = { status: 400, text: 'Unknown resource type' };
  expect(await refusalOf(repository.createResource(stranger))).toEqual(refused);
  expect(await refusalOf(repository.createResource(stranger, { assignedId: true }))).toEqual(refused);
  expect(await refusalOf(repository.updateResource(stranger))).toEqual(refused);
  expect(await refusalOf(repository.patchResource(unknownType, 'x', [{ op: 'add', path: '/active', value: true }]))).toEqual(refused);
  expect(await refusalOf(repository.deleteResource(unknownType, 'x'))).toEqual(refused);
});

test('an assigned id that is not a FHIR id is refused naming the field, and nothing is stored', async () => {
  const repository = openRepository();
  for (const id of ['bad id!', 'x'.repeat(65)]) {
    expect(await refusalOf(repository.createResource({ ...patient, id }, { assignedId: true }))).toEqual({
      status: 400,
      text: 'Invalid id',
      expression: ['Patient.id'],
    });
  }
  expect(await repository.searchResources({ resourceType: 'Patient' })).toEqual([]);
});

test('an assigned id already in use is refused as such, and the resource that has it is kept', async () => {
  const repository = openRepository();
  const ada = await repository.createResource({ ...patient, id: 'ada' }, { assignedId: true });
  expect(await refusalOf(repository.createResource({ ...patient, id: 'ada', active: false }, { assignedId: true }))).toEqual({
    status: 400,
    text: 'Assigned ID is already in use',
  });
  expect(await repository.readResource('Patient', 'ada')).toEqual(ada);
});

test("a deleted resource's id is refused as in use, and a create refused so leaves the writes committed with it stored", async () => {
  const repository = openRepository();
  await repository.createResource({ ...patient, id: 'ada' }, { assignedId: true });
  await repository.deleteResource('Patient', 'ada');
  // Sent together, so that one group commit writes both.
  const again = repository.createResource({ ...patient, id: 'ada' }, { assignedId: true });
  const grace = repository.createResource({ ...patient, id: 'grace', name: [{ family: 'Hopper' }] }, { assignedId: true });
  expect(await refusalOf(again)).toEqual({ status: 400, text: 'Assigned ID is already in use' });
  await grace;
  expect((await repository.readResource<Patient>('Patient', 'grace')).name?.[0]?.family).toBe('Hopper');
  expect(await statusOf(repository.readResource('Patient', 'ada'))).toBe(410);
  expect(await repository.searchResources({ resourceType: 'Patient' })).toHaveLength(1);
});

test('an update without an id is refused as missing its id', async () => {
  const repository = openRepository();
  expect(await refusalOf(repository.updateResource(patient))).toEqual({ status: 400, text: 'Missing id' });
});

test('a patch that would change the resource type or the id is refused, and changes neither resource', async () => {
  const repository = openRepository();
  // Two resources share an id, each in its type: a patch of the Patient must not write over the Practitioner.
  const ada = await repository.createResource({ ...patient, id: 'shared-id' }, { assignedId: true });
  const grace = await repository.createResource<Practitioner>(
    { resourceType: 'Practitioner', id: 'shared-id', name: [{ given: ['Grace'], family: 'Hopper' }] },
    { assignedId: true }
  );
  const refused = { status: 400, text: 'A patch cannot change the resource type or id' };
  const toPractitioner = [{ op: 'replace' as const, path: '/resourceType', value: 'Practitioner' }];
  expect(await refusalOf(repository.patchResource('Patient', 'shared-id', toPractitioner))).toEqual(refused);
  const toOtherId = [{ op: 'replace' as const, path: '/id', value: 'other-id' }];
  expect(await refusalOf(repository.patchResource('Patient', 'shared-id', toOtherId))).toEqual(refused);
  expect(await repository.readResource('Patient', 'shared-id')).toEqual(ada);
  expect(await repository.readResource('Practitioner', 'shared-id')).toEqual(grace);
  expect(await statusOf(repository.readResource('Patient', 'other-id'))).toBe(404);
});

test('If-Match naming the current version lets an update, a patch and a delete through', async () => {
  const repository = openRepository();
  const created = await repository.createResource(patient);
  const updated = await repository.updateResource({ ...created, active: true }, { ifMatch: created.meta?.versionId });
  expect(updated.active).toBe(true);
  const patch = [{ op: 'add' as const, path: '/gender', value: 'female' }];
  const patched = await repository.patchResource<Patient>('Patient', created.id, patch, { ifMatch: updated.meta?.versionId });
  expect(patched.gender).toBe('female');
  await repository.deleteResource('Patient', created.id, { ifMatch: patched.meta?.versionId });
  expect(await statusOf(repository.readResource('Patient', created.id))).toBe(410);
});
