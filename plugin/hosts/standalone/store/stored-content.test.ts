/**
 * What the store keeps of each version, through the repository: the JSON compressed, no history row for a current
 * version, and the recently read JSON remembered by row and version, never by row alone.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import type { Patient } from '@medplum/fhirtypes';
import { SqliteRepository } from './sqlite-repository.ts';

let directory: string;
let path: string;

beforeEach(() => {
  directory = mkdtempSync(join(tmpdir(), 'fhirgate-stored-content-'));
  path = join(directory, 'store.sqlite');
});

afterEach(() => {
  rmSync(directory, { recursive: true, force: true });
});

function inFile<T>(query: (database: DatabaseSync) => T): T {
  const database = new DatabaseSync(path, { readOnly: true });
  try {
    return query(database);
  } finally {
    database.close();
  }
}

test('a new resource is one row with its JSON compressed, and no history row until a newer version supersedes it', async () => {
  const repository = SqliteRepository.open(path);
  try {
    const created = await repository.createResource<Patient>({ resourceType: 'Patient', name: [{ family: 'Okafor' }] });
    expect(inFile((database) => database.prepare('SELECT typeof(content) AS kind FROM resources WHERE id = ?').get(created.id)?.kind)).toBe('blob');
    expect(inFile((database) => database.prepare('SELECT COUNT(*) AS n FROM resource_history').get()?.n)).toBe(0);
    const updated = await repository.updateResource<Patient>({ ...created, active: true });
    expect(inFile((database) => database.prepare('SELECT version_id FROM resource_history').all().map((row) => row.version_id))).toEqual([created.meta?.versionId]);
    expect((await repository.readHistory<Patient>('Patient', created.id)).entry?.map((entry) => entry.resource?.meta?.versionId)).toEqual([
      updated.meta?.versionId,
      created.meta?.versionId,
    ]);
  } finally {
    repository.close();
  }
});

test('a row given again, after a rolled-back write, by another process reads as the resource it now holds', async () => {
  const first = SqliteRepository.open(path);
  const second = SqliteRepository.open(path);
  try {
    await expect(
      first.withTransaction(
        async (transaction) => {
          await transaction.createResource<Patient>({ resourceType: 'Patient', name: [{ family: 'Rolled back' }] });
          throw new Error('undone');
        },
        { resourceTypes: ['Patient'] }
      )
    ).rejects.toThrow('undone');
    // SQLite gives the next row the pk the undone insert had; this process wrote nothing to it.
    const kept = await second.createResource<Patient>({ resourceType: 'Patient', name: [{ family: 'Kept' }] });
    expect((await first.readResource<Patient>('Patient', kept.id)).name?.[0]?.family).toBe('Kept');
    expect((await first.searchResources<Patient>({ resourceType: 'Patient' })).map((patient) => patient.name?.[0]?.family)).toEqual(['Kept']);
    expect((await first.readHistory<Patient>('Patient', kept.id)).entry?.map((entry) => entry.resource?.name?.[0]?.family)).toEqual(['Kept']);
  } finally {
    first.close();
    second.close();
  }
});

test('a version written by another process is read from the file, not from what this one remembers', async () => {
  const first = SqliteRepository.open(path);
  const second = SqliteRepository.open(path);
  try {
    const created = await first.createResource<Patient>({ resourceType: 'Patient', name: [{ family: 'Before' }] });
    expect((await second.readResource<Patient>('Patient', created.id)).name?.[0]?.family).toBe('Before');
    await second.updateResource<Patient>({ ...created, name: [{ family: 'After' }] });
    expect((await first.readResource<Patient>('Patient', created.id)).name?.[0]?.family).toBe('After');
    expect((await first.searchResources<Patient>({ resourceType: 'Patient' })).map((patient) => patient.name?.[0]?.family)).toEqual(['After']);
  } finally {
    first.close();
    second.close();
  }
});
