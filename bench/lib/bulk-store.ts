/**
 * Bulk loading of a benchmark's store file: rows written straight into the store's SQLite schema, each what the
 * repository would write (the compressed JSON in `resources`, no history row as for any current version, and the
 * given `search_index` rows), in one transaction without a journal. Secondary indexes are dropped during the load and rebuilt after it
 * (same SQL), which is far faster than updating them row by row. A load that fails is rebuilt from scratch, so
 * neither a journal nor durability buys anything during it.
 */
import { randomUUID } from 'node:crypto';
import { stringify } from '@medplum/core';
import type { Resource } from '@medplum/fhirtypes';
import type { DatabaseSync, StatementSync } from 'node:sqlite';
import { PARAM_CODE_OF_NAME, TYPE_CODE_OF_NAME, openStoreDatabase } from '../../plugin/hosts/standalone/store/schema.ts';
import { encodeContent } from '../../plugin/hosts/standalone/store/content-codec.ts';
import { SearchIndexSpec, type IndexRow } from '../../plugin/hosts/standalone/store/search-index.ts';

/** A store file being bulk-loaded; `finish()` commits and rebuilds its indexes, `close()` releases it. */
export class BulkStore {
  readonly #database: DatabaseSync;
  readonly #droppedIndexes: string[];
  readonly #insertResource: StatementSync;
  readonly #insertIndexRow: StatementSync;
  readonly #addType: StatementSync;
  /** Resources inserted so far. */
  count = 0;

  /** Opens the store file at `path` (its schema made if missing) for loading. */
  constructor(path: string) {
    this.#database = openStoreDatabase(path, { synchronous: 'NORMAL' });
    // Without a journal the rows are written once, not to the WAL and then again by the checkpoint.
    this.#database.exec('PRAGMA journal_mode = OFF');
    this.#database.exec('PRAGMA synchronous = OFF');
    this.#database.exec('PRAGMA cache_size = -2000000');
    const secondary = this.#database
      .prepare("SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL AND name != 'resources_by_id'")
      .all();
    this.#droppedIndexes = secondary.map((row) => String(row.sql));
    for (const row of secondary) {
      this.#database.exec(`DROP INDEX ${String(row.name)}`);
    }
    // Each index row parameter's code, as the repository gives them when it opens the store.
    const addParam = this.#database.prepare('INSERT OR IGNORE INTO search_params (name) VALUES (?)');
    for (const name of new SearchIndexSpec().rowParams()) {
      addParam.run(name);
    }
    this.#database.exec('BEGIN IMMEDIATE');
    this.#insertResource = this.#database.prepare(
      'INSERT INTO resources (resource_type, id, version_id, last_updated, project, deleted, content) VALUES (?, ?, ?, ?, ?, 0, ?)'
    );
    this.#insertIndexRow = this.#database.prepare(
      `INSERT OR IGNORE INTO search_index (type_code, param, value, extra, resource_pk) VALUES (${TYPE_CODE_OF_NAME}, ${PARAM_CODE_OF_NAME}, ?, ?, ?)`
    );
    this.#addType = this.#database.prepare('INSERT OR IGNORE INTO resource_types (name) VALUES (?)');
  }

  /**
   * Inserts `resource` as the store would keep it, last updated at `lastUpdated` (a fresh versionId); `indexRowsOf`
   * gives its index rows from the stored form (and its JSON).
   */
  insert<T extends Resource & { id: string }>(resource: T, lastUpdated: string, indexRowsOf: (stored: T, content: string) => readonly IndexRow[]): void {
    // As SqliteRepository.#newVersion: fresh versionId, lastUpdated, the JSON of the stored form.
    const versionId = randomUUID();
    const stored = { ...resource, meta: { ...resource.meta, versionId, lastUpdated } };
    const content = stringify(stored);
    const { lastInsertRowid } = this.#insertResource.run(
      stored.resourceType,
      stored.id,
      versionId,
      lastUpdated,
      stored.meta.project?.toLowerCase() ?? null,
      encodeContent(content)
    );
    const pk = Number(lastInsertRowid);
    this.#addType.run(stored.resourceType);
    for (const row of indexRowsOf(stored, content)) {
      this.#insertIndexRow.run(stored.resourceType, row.param, row.value, row.extra, pk);
    }
    this.count++;
  }

  /** Commits, rebuilds the dropped indexes and puts the file back in WAL mode. */
  finish(): void {
    this.#database.exec('COMMIT');
    for (const sql of this.#droppedIndexes) {
      this.#database.exec(sql);
    }
    this.#database.exec('PRAGMA journal_mode = WAL');
  }

  close(): void {
    if (this.#database.isOpen) {
      this.#database.close();
    }
  }
}

