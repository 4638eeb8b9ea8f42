import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { OperationOutcomeError, parseSearchRequest } from '@medplum/core';
import type { AuditEvent, Communication, Patient } from '@medplum/fhirtypes';
import { SqliteRepository } from './sqlite-repository.ts';
import { statusOf } from '../../../../test/support/rejection-status.ts';
import { failWritesMidway, storedIds } from '../../../../test/support/midway-write-failure.ts';
import { memoryRepositories } from '../../../../test/support/memory-repositories.ts';

const openRepository = memoryRepositories();


const patient: Patient = { resourceType: 'Patient', name: [{ given: ['Ada'], family: 'Lovelace' }] };

describe('SqliteRepository writes and reads', () => {
  test('create assigns id, versionId and lastUpdated and keeps the meta the caller set', async () => {
    const repository = openRepository();
    const created = await repository.createResource<Patient>({
      ...patient,
      id: 'ignored-without-assignedId',
      meta: {
        versionId: 'caller-version',
        lastUpdated: '2000-01-01T00:00:00.000Z',
        project: 'project-1',
        author: { reference: 'Practitioner/p1' },
        compartment: [{ reference: 'Project/project-1' }],
        account: { reference: 'Organization/o1' },
      },
    });
    expect(created.id).toMatch(/^[0-9a-f-]{36}$/);
    expect(created.meta?.versionId).toMatch(/^[0-9a-f-]{36}$/);
    expect(created.meta?.versionId).not.toBe('caller-version');
    expect(created.meta?.lastUpdated).not.toBe('2000-01-01T00:00:00.000Z');
    expect(Date.parse(created.meta?.lastUpdated ?? '')).toBeGreaterThan(Date.now() - 60_000);
    expect(created.meta).toMatchObject({
      project: 'project-1',
      author: { reference: 'Practitioner/p1' },
      compartment: [{ reference: 'Project/project-1' }],
      account: { reference: 'Organization/o1' },
    });
    expect(await repository.readResource('Patient', created.id)).toEqual(created);
  });

  test('meta.project is kept as given, and `_project` finds the resource whatever the case it is asked in', async () => {
    const repository = openRepository();
    const created = await repository.createResource<Patient>({ ...patient, meta: { project: 'Project-One' } });
    await repository.createResource<Patient>({ ...patient, meta: { project: 'project-two' } });
    const updated = await repository.updateResource({ ...created, active: true });
    expect([created.meta?.project, updated.meta?.project]).toEqual(['Project-One', 'Project-One']);
    for (const asked of ['Project-One', 'project-one', 'PROJECT-ONE']) {
      const found = await repository.searchResources(parseSearchRequest<Patient>(`Patient?_project=${asked}`));
      expect(found).toEqual([updated]);
    }
  });

  test('assignedId keeps the caller id and refuses one already in use', async () => {
    const repository = openRepository();
    const created = await repository.createResource({ ...patient, id: 'ada' }, { assignedId: true });
    expect(created.id).toBe('ada');
    expect(await statusOf(repository.createResource({ ...patient, id: 'ada' }, { assignedId: true }))).toBe(400);
    expect(await statusOf(repository.createResource({ ...patient, id: 'bad id!' }, { assignedId: true }))).toBe(400);
  });

  test('unknown resource types and missing resources map to 400 and 404', async () => {
    const repository = openRepository();
    expect(await statusOf(repository.readResource('NotAType', 'x'))).toBe(400);
    expect(await statusOf(repository.readResource('Patient', 'missing'))).toBe(404);
    expect(await statusOf(repository.updateResource({ ...patient, id: 'missing' }))).toBe(404);
    expect(await statusOf(repository.updateResource(patient))).toBe(400);
    expect(await statusOf(repository.deleteResource('Patient', 'missing'))).toBe(404);
    expect(await statusOf(repository.readHistory('Patient', 'missing'))).toBe(404);
  });

  test("a write stores the resource as it was when asked: the caller's later changes, to what it gave or got back, change nothing", async () => {
    const repository = openRepository();
    const given: Patient = { resourceType: 'Patient', name: [{ given: ['Ada'], family: 'Lovelace' }] };
    // The write waits for its group's commit; the caller changes its object meanwhile.
    const creating = repository.createResource(given);
    given.name?.[0]?.given?.push('Augusta');
    const created = await creating;
    expect(created.name).toEqual([{ given: ['Ada'], family: 'Lovelace' }]);
    // What came back is the caller's own: changing it changes neither what was given nor what is stored.
    created.name?.[0]?.given?.push('King');
    expect(given.name).toEqual([{ given: ['Ada', 'Augusta'], family: 'Lovelace' }]);
    expect((await repository.readResource<Patient>('Patient', created.id)).name).toEqual([{ given: ['Ada'], family: 'Lovelace' }]);

    const changed: Patient & { id: string } = { ...created, name: [{ given: ['Ada'], family: 'King' }] };
    const updating = repository.updateResource(changed);
    changed.name?.[0]?.given?.push('Byron');
    expect((await updating).name).toEqual([{ given: ['Ada'], family: 'King' }]);
    expect((await repository.readResource<Patient>('Patient', created.id)).name).toEqual([{ given: ['Ada'], family: 'King' }]);
  });

  test('update writes a new version; history is newest first; vread returns each version', async () => {
    const repository = openRepository();
    const first = await repository.createResource(patient);
    const second = await repository.updateResource({ ...first, active: true });
    const third = await repository.updateResource({ ...second, active: false });
    expect(new Set([first.meta?.versionId, second.meta?.versionId, third.meta?.versionId]).size).toBe(3);

    const history = await repository.readHistory<Patient>('Patient', first.id);
    expect(history.type).toBe('history');
    expect(history.entry?.map((entry) => entry.resource?.meta?.versionId)).toEqual([
      third.meta?.versionId,
      second.meta?.versionId,
      first.meta?.versionId,
    ]);
    expect(history.entry?.[0]?.request).toEqual({
      method: 'GET',
      url: `Patient/${first.id}/_history/${third.meta?.versionId}`,
    });
    expect(history.entry?.[0]?.response?.status).toBe('200');

    const paged = await repository.readHistory<Patient>('Patient', first.id, { offset: 1, limit: 1 });
    expect(paged.entry?.map((entry) => entry.resource?.meta?.versionId)).toEqual([second.meta?.versionId]);

    const old = await repository.readVersion<Patient>('Patient', first.id, second.meta?.versionId as string);
    expect(old.active).toBe(true);
    expect(await statusOf(repository.readVersion('Patient', first.id, 'no-such-version'))).toBe(404);
  });

  test('an update that changes nothing keeps the current version', async () => {
    const repository = openRepository();
    const created = await repository.createResource(patient);
    const same = await repository.updateResource({ ...created, meta: { ...created.meta, lastUpdated: undefined } });
    expect(same.meta?.versionId).toBe(created.meta?.versionId);
    expect((await repository.readHistory('Patient', created.id)).entry).toHaveLength(1);
  });

  test('ifMatch: a stale version is refused with 412 and stores nothing', async () => {
    const repository = openRepository();
    const created = await repository.createResource(patient);
    const updated = await repository.updateResource({ ...created, active: true }, { ifMatch: created.meta?.versionId });
    expect(updated.active).toBe(true);
    const stale = { ifMatch: created.meta?.versionId };
    expect(await statusOf(repository.updateResource({ ...created, active: false }, stale))).toBe(412);
    expect(await statusOf(repository.deleteResource('Patient', created.id, { ifMatch: 'stale' }))).toBe(412);
    expect(
      await statusOf(
        repository.patchResource('Patient', created.id, [{ op: 'add', path: '/gender', value: 'female' }], { ifMatch: 'stale' })
      )
    ).toBe(412);
    const read = await repository.readResource<Patient>('Patient', created.id);
    expect(read.active).toBe(true);
    expect(read.gender).toBeUndefined();
  });

  test('patch applies JSON Patch operations and rejects a failing test op', async () => {
    const repository = openRepository();
    const created = await repository.createResource<Patient>({ ...patient, active: false });
    const patched = await repository.patchResource<Patient>('Patient', created.id, [
      { op: 'test', path: '/active', value: false },
      { op: 'replace', path: '/active', value: true },
      { op: 'add', path: '/gender', value: 'female' },
      { op: 'copy', from: '/name/0/family', path: '/name/0/text' },
      { op: 'remove', path: '/name/0/given' },
    ]);
    expect(patched).toMatchObject({ active: true, gender: 'female', name: [{ family: 'Lovelace', text: 'Lovelace' }] });
    expect(patched.name?.[0]?.given).toBeUndefined();
    expect(patched.meta?.versionId).not.toBe(created.meta?.versionId);
    const failingTest = [{ op: 'test' as const, path: '/active', value: false }];
    expect(await statusOf(repository.patchResource('Patient', created.id, failingTest))).toBe(400);
    const changingId = [{ op: 'replace' as const, path: '/id', value: 'other' }];
    expect(await statusOf(repository.patchResource('Patient', created.id, changingId))).toBe(400);
    expect(await statusOf(repository.patchResource('Patient', 'missing', []))).toBe(404);
  });

  test('patch also takes a FHIRPath Patch Parameters resource', async () => {
    const repository = openRepository();
    const created = await repository.createResource(patient);
    const patched = await repository.patchResource<Patient>('Patient', created.id, {
      resourceType: 'Parameters',
      parameter: [
        {
          name: 'operation',
          part: [
            { name: 'type', valueCode: 'add' },
            { name: 'path', valueString: 'Patient' },
            { name: 'name', valueString: 'gender' },
            { name: 'value', valueCode: 'female' },
          ],
        },
      ],
    });
    expect(patched.gender).toBe('female');
  });

  test('delete: later reads are 410 Gone, history keeps a deleted entry, searches no longer find it', async () => {
    const repository = openRepository();
    const created = await repository.createResource(patient);
    await repository.deleteResource('Patient', created.id);
    expect(await statusOf(repository.readResource('Patient', created.id))).toBe(410);
    expect(await statusOf(repository.readReference({ reference: `Patient/${created.id}` }))).toBe(410);
    expect(await statusOf(repository.deleteResource('Patient', created.id))).toBe(410);
    expect(await statusOf(repository.patchResource('Patient', created.id, []))).toBe(410);

    const history = await repository.readHistory('Patient', created.id);
    expect(history.entry).toHaveLength(2);
    expect(history.entry?.[0]?.resource).toBeUndefined();
    expect(history.entry?.[0]?.response?.status).toBe('410');
    // The deleted entry's outcome, as Medplum's server gives it: gone, and when.
    const gone = history.entry?.[0]?.response?.outcome;
    expect(gone).toEqual({
      resourceType: 'OperationOutcome',
      id: 'gone',
      issue: [{ severity: 'error', code: 'deleted', details: { text: expect.stringMatching(/^Deleted on /) } }],
    });
    const deletedOn = gone?.issue?.[0]?.details?.text?.slice('Deleted on '.length) ?? '';
    expect(new Date(deletedOn).toISOString()).toBe(deletedOn);
    expect(Date.parse(deletedOn)).toBeGreaterThanOrEqual(Date.parse(created.meta?.lastUpdated ?? ''));
    expect(history.entry?.[1]?.response).toMatchObject({ status: '200', outcome: { id: 'ok' } });
    expect(history.entry?.[1]?.resource?.id).toBe(created.id);
    const deletedVersion = history.entry?.[0]?.request?.url?.split('/').pop() as string;
    expect(await statusOf(repository.readVersion('Patient', created.id, deletedVersion))).toBe(410);
    expect((await repository.readVersion('Patient', created.id, created.meta?.versionId as string)).id).toBe(created.id);
    expect(await repository.searchResources({ resourceType: 'Patient' })).toEqual([]);
  });

  test("with a fullUrl, search and history entries carry the resource's, a deleted entry too", async () => {
    const repository = openRepository(':memory:', { fullUrl: (resourceType, id) => `https://fhir.example/R4/${resourceType}/${id}` });
    const created = await repository.createResource(patient);
    const fullUrl = `https://fhir.example/R4/Patient/${created.id}`;
    expect((await repository.search({ resourceType: 'Patient' })).entry?.map((entry) => entry.fullUrl)).toEqual([fullUrl]);
    await repository.deleteResource('Patient', created.id);
    expect((await repository.readHistory('Patient', created.id)).entry?.map((entry) => entry.fullUrl)).toEqual([fullUrl, fullUrl]);
  });

  test('an update after a delete brings the resource back as a new version', async () => {
    const repository = openRepository();
    const created = await repository.createResource(patient);
    await repository.deleteResource('Patient', created.id);
    const revived = await repository.updateResource({ ...created, active: true });
    expect(revived.active).toBe(true);
    expect((await repository.readResource<Patient>('Patient', created.id)).active).toBe(true);
    expect((await repository.readHistory('Patient', created.id)).entry).toHaveLength(3);
  });

  test('readReference and readReferences resolve references, with errors in place for bad ones', async () => {
    const repository = openRepository();
    const created = await repository.createResource(patient);
    expect((await repository.readReference<Patient>({ reference: `Patient/${created.id}` })).id).toBe(created.id);
    expect(await statusOf(repository.readReference({ reference: 'not-a-reference' }))).toBe(400);
    const results = await repository.readReferences([
      { reference: `Patient/${created.id}` },
      { reference: 'Patient/missing' },
    ]);
    expect((results[0] as Patient).id).toBe(created.id);
    expect(results[1]).toBeInstanceOf(OperationOutcomeError);
  });

  test('a record with more index rows than one statement inserts is found by every one of them', async () => {
    const repository = openRepository();
    // 40 entities: 40 `entity` rows, with its other parameters' rows well over the 32 rows one statement inserts.
    const entities = Array.from({ length: 40 }, (_, index) => ({ what: { reference: `Observation/o${index}` } }));
    const event = await repository.createResource<AuditEvent>({
      resourceType: 'AuditEvent',
      type: { system: 'http://terminology.hl7.org/CodeSystem/audit-event-type', code: 'rest' },
      recorded: '2026-11-30T00:00:00.000Z',
      agent: [{ who: { reference: 'Practitioner/p1' }, requestor: true }],
      source: { observer: { reference: 'Device/d1' } },
      entity: entities,
    });
    for (const { what } of entities) {
      expect(await repository.searchResources(parseSearchRequest<AuditEvent>(`AuditEvent?entity=${what.reference}`))).toEqual([event]);
    }
    expect(await repository.searchResources(parseSearchRequest<AuditEvent>('AuditEvent?agent=Practitioner/p1'))).toEqual([event]);
  });
});

describe('SqliteRepository transactions', () => {
  const communication: Communication = { resourceType: 'Communication', status: 'completed' };

  test('withTransaction commits everything the callback wrote', async () => {
    const repository = openRepository();
    const ids = await repository.withTransaction(
      async (transaction) => {
        const first = await transaction.createResource(communication);
        const second = await transaction.createResource({ ...communication, partOf: [{ reference: `Communication/${first.id}` }] });
        return [first.id, second.id];
      },
      { resourceTypes: ['Communication'] }
    );
    for (const id of ids) {
      expect((await repository.readResource('Communication', id)).id).toBe(id);
    }
  });

  test('a throw inside withTransaction rolls back every write, including updates and deletes', async () => {
    const repository = openRepository();
    const existing = await repository.createResource(patient);
    let createdId = '';
    await expect(
      repository.withTransaction(
        async (transaction) => {
          createdId = (await transaction.createResource(communication)).id;
          await transaction.updateResource({ ...existing, active: true });
          await transaction.createResource(patient);
          await transaction.deleteResource('Patient', existing.id);
          throw new Error('boom');
        },
        { resourceTypes: ['Communication', 'Patient'] }
      )
    ).rejects.toThrow('boom');
    expect(await statusOf(repository.readResource('Communication', createdId))).toBe(404);
    expect(await repository.searchResources({ resourceType: 'Communication' })).toEqual([]);
    expect(await repository.searchResources({ resourceType: 'Patient' })).toHaveLength(1);
    expect((await repository.readResource<Patient>('Patient', existing.id)).active).toBeUndefined();
    expect((await repository.readHistory('Patient', existing.id)).entry).toHaveLength(1);
  });

  test('a failed write inside a transaction undoes only itself', async () => {
    const directory = mkdtempSync(join(tmpdir(), 'fhirgate-store-'));
    const path = join(directory, 'store.sqlite');
    try {
      const repository = openRepository(path);
      // The write of 'half' fails after its resource row is written: only its own rollback takes that row away.
      failWritesMidway(path, 'half');
      await repository.withTransaction(
        async (transaction) => {
          await transaction.createResource({ ...patient, id: 'kept' }, { assignedId: true });
          const indexed = { ...patient, id: 'half', meta: { compartment: [{ reference: 'Project/project-1' }] } };
          expect(await statusOf(transaction.createResource(indexed, { assignedId: true }))).toBe(500);
          await transaction.createResource({ ...patient, id: 'after' }, { assignedId: true });
        },
        { resourceTypes: ['Patient'] }
      );
      expect((await repository.searchResources({ resourceType: 'Patient' })).map((found) => found.id).sort()).toEqual(['after', 'kept']);
      expect(await statusOf(repository.readResource('Patient', 'half'))).toBe(404);
      expect(storedIds(path, 'Patient')).toEqual(['after', 'kept']);
      repository.close();
    } finally {
      rmSync(directory, { recursive: true, force: true });
    }
  });

  test('a nested withTransaction runs in the outer one, and its failure rolls the outer one back', async () => {
    const repository = openRepository();
    await expect(
      repository.withTransaction(
        async (outer) => {
          await outer.createResource(patient);
          await outer.withTransaction(
            async (inner) => {
              await inner.createResource(patient);
              throw new Error('inner failed');
            },
            { resourceTypes: ['Patient'] }
          );
        },
        { resourceTypes: ['Patient'] }
      )
    ).rejects.toThrow('inner failed');
    expect(await repository.searchResources({ resourceType: 'Patient' })).toEqual([]);
  });

  test('a write that an ended transaction left running is a write of its own, not part of the next transaction', async () => {
    const repository = openRepository();
    let startLeftBehind!: () => void;
    const leftBehindMayStart = new Promise<void>((resolve) => {
      startLeftBehind = resolve;
    });
    let leftBehind!: Promise<Patient>;
    await repository.withTransaction(async (transaction) => {
      await transaction.createResource({ ...patient, id: 'inside' }, { assignedId: true });
      // Started from inside the callback, which returns without waiting for it: it runs once the transaction ended.
      leftBehind = leftBehindMayStart.then(() => transaction.createResource({ ...patient, id: 'left-behind' }, { assignedId: true }));
    });
    let rollBack!: () => void;
    const failure = new Promise<void>((resolve) => {
      rollBack = resolve;
    });
    let nextStarted!: () => void;
    const started = new Promise<void>((resolve) => {
      nextStarted = resolve;
    });
    const next = repository.withTransaction(async (inside) => {
      await inside.createResource({ ...patient, id: 'rolled-back' }, { assignedId: true });
      nextStarted();
      await failure;
      throw new Error('roll back');
    });
    await started;
    startLeftBehind();
    await new Promise((resolve) => setImmediate(resolve));
    rollBack();
    await expect(next).rejects.toThrow('roll back');
    expect((await leftBehind).id).toBe('left-behind');
    const stored = await repository.searchResources({ resourceType: 'Patient' });
    expect(stored.map((resource) => resource.id).sort()).toEqual(['inside', 'left-behind']);
  });

  test('writes from outside wait for the transaction in progress and are not rolled back with it', async () => {
    const repository = openRepository();
    let releaseTransaction!: () => void;
    const gate = new Promise<void>((resolve) => {
      releaseTransaction = resolve;
    });
    let transactionStarted!: () => void;
    const started = new Promise<void>((resolve) => {
      transactionStarted = resolve;
    });
    const transaction = repository.withTransaction(
      async (inside) => {
        await inside.createResource({ ...patient, id: 'inside' }, { assignedId: true });
        transactionStarted();
        await gate;
        throw new Error('roll back');
      },
      { resourceTypes: ['Patient'] }
    );
    await started;
    const outsideWrite = repository.createResource({ ...patient, id: 'outside' }, { assignedId: true });
    const outsideRead = repository.searchResources({ resourceType: 'Patient' });
    releaseTransaction();
    await expect(transaction).rejects.toThrow('roll back');
    expect((await outsideWrite).id).toBe('outside');
    // The read queued behind the rollback and the outside write: it never saw the uncommitted 'inside'.
    expect((await outsideRead).map((resource) => resource.id)).toEqual(['outside']);
  });
});
