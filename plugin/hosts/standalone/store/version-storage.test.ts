/**
 * Each version's JSON is stored once: the current one in `resources`, superseded ones in `resource_history`; and a
 * store written before (schema version 2: the current JSON kept twice, index rows naming their type) opens, keeps
 * every version, drops the second copies and has its index rebuilt.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { parseSearchRequest } from '@medplum/core';
import type { Observation, Patient } from '@medplum/fhirtypes';
import { decodeContent } from './content-codec.ts';
import { STORE_SCHEMA_VERSION } from './schema.ts';
import { SqliteRepository } from './sqlite-repository.ts';

let directory: string;
let path: string;

beforeEach(() => {
  directory = mkdtempSync(join(tmpdir(), 'fhirgate-versions-'));
  path = join(directory, 'store.sqlite');
});

afterEach(() => {
  rmSync(directory, { recursive: true, force: true });
});

/** How many copies of each version's JSON the file holds, by version id. */
function copiesByVersion(id: string): Record<string, number> {
  const database = new DatabaseSync(path, { readOnly: true });
  try {
    const copies: Record<string, number> = {};
    const rows = database
      .prepare(
        `SELECT version_id FROM resources WHERE id = ? AND content IS NOT NULL
         UNION ALL SELECT h.version_id FROM resource_history h JOIN resources r ON r.pk = h.resource_pk WHERE r.id = ? AND h.content IS NOT NULL`
      )
      .all(id, id);
    for (const row of rows) {
      copies[String(row.version_id)] = (copies[String(row.version_id)] ?? 0) + 1;
    }
    return copies;
  } finally {
    database.close();
  }
}

/**
 * Rewrites the file as schema version 2 wrote it: JSON as text; every version has a history row holding its JSON
 * (the current one's too, newest by `seq`); index rows name their resource type and parameter.
 */
function rewriteAsVersion2(): void {
  const database = new DatabaseSync(path);
  try {
    database.function('json_text', (value) => (value === null ? null : decodeContent(value)));
    database.exec(`
      UPDATE resources SET content = json_text(content);
      UPDATE resource_history SET content = json_text(content);
      INSERT INTO resource_history (resource_pk, version_id, last_updated, content) SELECT pk, version_id, last_updated, content FROM resources;
      CREATE TABLE search_index_v2 (
        resource_type TEXT NOT NULL, param TEXT NOT NULL, value TEXT NOT NULL, extra TEXT NOT NULL, resource_pk INTEGER NOT NULL,
        PRIMARY KEY (resource_type, param, value, extra, resource_pk)
      ) WITHOUT ROWID;
      INSERT INTO search_index_v2 SELECT t.name, p.name, s.value, s.extra, s.resource_pk FROM search_index s
        JOIN resource_types t ON t.code = s.type_code JOIN search_params p ON p.code = s.param;
      DROP TABLE search_index;
      DROP TABLE resource_types;
      DROP TABLE search_params;
      ALTER TABLE search_index_v2 RENAME TO search_index;
      CREATE INDEX search_index_by_resource ON search_index (resource_pk, param, value);
      PRAGMA user_version = 2;
    `);
  } finally {
    database.close();
  }
}

/** SQLite's type of each stored JSON of the resource `id`, the current version first. */
function contentTypes(id: string): string[] {
  const database = new DatabaseSync(path, { readOnly: true });
  try {
    return database
      .prepare(
        `SELECT typeof(content) AS kind FROM (SELECT content, 1e18 AS seq FROM resources WHERE id = ?
         UNION ALL SELECT h.content, h.seq FROM resource_history h JOIN resources r ON r.pk = h.resource_pk WHERE r.id = ? AND h.content IS NOT NULL)
         ORDER BY seq DESC`
      )
      .all(id, id)
      .map((row) => String(row.kind));
  } finally {
    database.close();
  }
}

function observationAbout(patientId: string): Observation {
  return { resourceType: 'Observation', status: 'final', code: { text: 'pulse' }, subject: { reference: `Patient/${patientId}` } };
}

/** Create, two updates, a delete and a revival: every kind of version. */
async function writeVersions(repository: SqliteRepository): Promise<Patient[]> {
  const first = await repository.createResource<Patient>({ resourceType: 'Patient', name: [{ family: 'One' }] });
  const second = await repository.updateResource<Patient>({ ...first, name: [{ family: 'Two' }] });
  const third = await repository.updateResource<Patient>({ ...second, name: [{ family: 'Three' }] });
  await repository.deleteResource('Patient', first.id);
  const revived = await repository.updateResource<Patient>({ ...third, name: [{ family: 'Four' }] });
  return [first, second, third, revived];
}

async function expectEveryVersion(repository: SqliteRepository, versions: readonly Patient[]): Promise<void> {
  const id = versions[0].id as string;
  const history = await repository.readHistory<Patient>('Patient', id);
  expect(history.entry?.map((entry) => entry.resource?.name?.[0]?.family ?? entry.response?.status)).toEqual(['Four', '410', 'Three', 'Two', 'One']);
  for (const version of versions) {
    expect(await repository.readVersion<Patient>('Patient', id, version.meta?.versionId as string)).toEqual(version);
  }
  expect(await repository.readResource<Patient>('Patient', id)).toEqual(versions[versions.length - 1]);
}

describe('stored versions', () => {
  test('each version’s JSON is stored once, and history and vread return every version', async () => {
    const repository = SqliteRepository.open(path);
    try {
      const versions = await writeVersions(repository);
      await expectEveryVersion(repository, versions);
      const copies = copiesByVersion(versions[0].id as string);
      expect(Object.values(copies)).toEqual([1, 1, 1, 1]);
      expect(Object.keys(copies).sort()).toEqual(versions.map((version) => version.meta?.versionId).sort());
    } finally {
      repository.close();
    }
  });

  test('a store of schema version 2 opens: every version is kept, the current JSON’s second copy is dropped, the index rebuilt', async () => {
    const repository = SqliteRepository.open(path);
    const versions = await writeVersions(repository);
    const indexedBefore = await repository.createResource<Observation>(observationAbout(versions[0].id as string));
    repository.close();
    rewriteAsVersion2();
    expect(Object.values(copiesByVersion(versions[0].id as string))).toContain(2);

    const reopened = SqliteRepository.open(path);
    try {
      await expectEveryVersion(reopened, versions);
      expect(Object.values(copiesByVersion(versions[0].id as string))).toEqual([1, 1, 1, 1]);
      const reread = new DatabaseSync(path, { readOnly: true });
      expect(reread.prepare('PRAGMA user_version').get()?.user_version).toBe(STORE_SCHEMA_VERSION);
      reread.close();
      // The JSON written before is read as the text it is; what is written now is compressed.
      expect(contentTypes(versions[0].id as string)).toEqual(['text', 'text', 'text', 'text']);
      // And it keeps working: a further version keeps the one it supersedes; the index was rebuilt with type codes.
      const fifth = await reopened.updateResource<Patient>({ ...versions[3], name: [{ family: 'Five' }] });
      expect(contentTypes(versions[0].id as string)).toEqual(['blob', 'text', 'text', 'text', 'text']);
      expect((await reopened.readVersion<Patient>('Patient', fifth.id, versions[3].meta?.versionId as string)).name?.[0]?.family).toBe('Four');
      const indexedAfter = await reopened.createResource<Observation>(observationAbout(fifth.id));
      const found = await reopened.searchResources(parseSearchRequest(`Observation?subject=Patient/${fifth.id}`));
      expect(found.map((observation) => observation.id).sort()).toEqual([indexedBefore.id, indexedAfter.id].sort());
    } finally {
      reopened.close();
    }
  });
});
