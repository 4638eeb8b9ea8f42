/**
 * The SQLite file behind the standalone store: connection settings and the versioned schema.
 *
 * Tables:
 * - `resources`: the current version of every resource ever created (a deleted one keeps its row, content NULL).
 *   `content` is the JSON compressed (content-codec.ts), or JSON text in rows written before schema 5.
 * - `resource_history`: every superseded version, oldest first by `seq`; a delete is a row with content NULL. The
 *   current version is only its row in `resources`, moved here when a newer version supersedes it.
 * - `search_index`: one row per (resource, search parameter, normalized value) for the indexed parameters; the
 *   resource type as its code in `resource_types` and the parameter as its code in `search_params` (a byte or two,
 *   not the name, in each of a row's two copies).
 * - `store_info`: key/value facts about the file (which search parameters `search_index` was built for).
 */
import { DatabaseSync } from 'node:sqlite';
import { prepareOwnerOnlyDatabaseFile } from './owner-only-files.ts';

/** The schema version this code writes; kept in `PRAGMA user_version`. */
export const STORE_SCHEMA_VERSION = 5;

/** SQLite `synchronous` levels the store accepts. FULL: a commit that returned survives power loss. */
export type SynchronousMode = 'FULL' | 'EXTRA' | 'NORMAL';

/** How the database file is opened. */
export interface StoreDatabaseOptions {
  /** Defaults to FULL: the store is an audit trail, a write that returned must survive a crash. */
  readonly synchronous?: SynchronousMode;
  /** How long a write waits for another process's lock before failing; defaults to 5000 ms. */
  readonly busyTimeoutMs?: number;
  /**
   * SQLite's own page cache, in MiB (it lives in the process, so it counts in its resident memory); defaults to 8.
   * Pages it does not hold are read from the operating system's file cache.
   */
  readonly cacheSizeMiB?: number;
}

const DEFAULT_BUSY_TIMEOUT_MS = 5000;
/**
 * 8 MiB holds the index pages a chat turn touches; measured against 64 MiB on a store of 1,000,000 Communications,
 * the history benchmark was no slower, and a chat instance's peak memory with 1,000 streams was 50–90 MB lower
 * (bench/findings.md, "Memory under 1,000 streams").
 */
export const DEFAULT_CACHE_SIZE_MIB = 8;

/** Each entry moves the schema from version `index` to `index + 1`. */
const MIGRATIONS: readonly string[] = [
  `
  CREATE TABLE resources (
    pk INTEGER PRIMARY KEY,
    resource_type TEXT NOT NULL,
    id TEXT NOT NULL,
    version_id TEXT NOT NULL,
    last_updated TEXT NOT NULL,
    project TEXT,
    deleted INTEGER NOT NULL DEFAULT 0,
    content TEXT
  );
  CREATE UNIQUE INDEX resources_by_id ON resources (resource_type, id);
  CREATE INDEX resources_by_last_updated ON resources (resource_type, last_updated);
  CREATE INDEX resources_by_project ON resources (resource_type, project, last_updated);

  CREATE TABLE resource_history (
    seq INTEGER PRIMARY KEY,
    resource_pk INTEGER NOT NULL,
    version_id TEXT NOT NULL,
    last_updated TEXT NOT NULL,
    content TEXT
  );
  CREATE INDEX resource_history_by_resource ON resource_history (resource_pk, seq);

  CREATE TABLE search_index (
    resource_type TEXT NOT NULL,
    param TEXT NOT NULL,
    value TEXT NOT NULL,
    extra TEXT NOT NULL,
    resource_pk INTEGER NOT NULL,
    PRIMARY KEY (resource_type, param, value, extra, resource_pk)
  ) WITHOUT ROWID;
  CREATE INDEX search_index_by_resource ON search_index (resource_pk, param, value);

  CREATE TABLE store_info (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
  ) WITHOUT ROWID;
  `,
  // `_id` compares ids without regard to case, as Medplum's matcher does: looked up here, not one row at a time.
  `
  CREATE INDEX resources_by_lower_id ON resources (resource_type, lower(id));
  `,
  // The current version's JSON was kept twice, in \`resources\` and in its history row: a third of a chat turn's bytes.
  // Its history row now holds NULL (resource-store.ts reads the resource's instead). The pages freed are reused by
  // later writes; the file itself shrinks only with VACUUM.
  `
  UPDATE resource_history SET content = NULL
  WHERE content IS NOT NULL
    AND EXISTS (SELECT 1 FROM resources r WHERE r.pk = resource_history.resource_pk AND r.version_id = resource_history.version_id);
  `,
  // Index rows name their resource type by a small code instead of its name. The rows are rebuilt from \`resources\`
  // when the store opens (no fingerprint: resource-store.ts, ensureIndex).
  `
  CREATE TABLE resource_types (
    code INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE
  );
  DROP TABLE search_index;
  CREATE TABLE search_index (
    type_code INTEGER NOT NULL,
    param TEXT NOT NULL,
    value TEXT NOT NULL,
    extra TEXT NOT NULL,
    resource_pk INTEGER NOT NULL,
    PRIMARY KEY (type_code, param, value, extra, resource_pk)
  ) WITHOUT ROWID;
  CREATE INDEX search_index_by_resource ON search_index (resource_pk, param, value);
  DELETE FROM store_info WHERE key = 'search_index_fingerprint';
  `,
  // New JSON is written compressed, as a BLOB (content-codec.ts); the text of older rows stays as it is and is read
  // as it is (older code, which cannot read a BLOB, refuses the file by its version). A version has a history row
  // only once superseded: the current one is its row in \`resources\`.
  // Index rows name their parameter by a small code too, given when the store opens (search_params); the rows are
  // rebuilt from \`resources\`.
  `
  DELETE FROM resource_history
  WHERE EXISTS (SELECT 1 FROM resources r WHERE r.pk = resource_history.resource_pk AND r.version_id = resource_history.version_id);
  CREATE TABLE search_params (
    code INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE
  );
  DROP TABLE search_index;
  CREATE TABLE search_index (
    type_code INTEGER NOT NULL,
    param INTEGER NOT NULL,
    value TEXT NOT NULL,
    extra TEXT NOT NULL,
    resource_pk INTEGER NOT NULL,
    PRIMARY KEY (type_code, param, value, extra, resource_pk)
  ) WITHOUT ROWID;
  CREATE INDEX search_index_by_resource ON search_index (resource_pk, param, value);
  DELETE FROM store_info WHERE key = 'search_index_fingerprint';
  `,
];

/** The SQL value of a resource type's code in \`search_index\`, from its name bound as the one parameter. */
export const TYPE_CODE_OF_NAME = '(SELECT code FROM resource_types WHERE name = ?)';

/** The SQL value of an index row parameter's code in \`search_index\`, from its name bound as the one parameter. */
export const PARAM_CODE_OF_NAME = '(SELECT code FROM search_params WHERE name = ?)';

/** The SQL set of the codes of two index row parameters, from their names bound as two parameters. */
export const PARAM_CODES_OF_TWO_NAMES = '(SELECT code FROM search_params WHERE name IN (?, ?))';

/**
 * Opens (creating if missing, owner-only) a store file, or ':memory:', with WAL, a busy timeout so that several processes
 * can share the file, the requested durability, and the schema migrated to {@link STORE_SCHEMA_VERSION}.
 */
export function openStoreDatabase(path: string, options: StoreDatabaseOptions = {}): DatabaseSync {
  prepareOwnerOnlyDatabaseFile(path);
  const database = new DatabaseSync(path, { timeout: options.busyTimeoutMs ?? DEFAULT_BUSY_TIMEOUT_MS });
  try {
    database.exec('PRAGMA journal_mode = WAL');
    database.exec(`PRAGMA synchronous = ${options.synchronous ?? 'FULL'}`);
    // Negative means KiB.
    database.exec(`PRAGMA cache_size = ${-1024 * (options.cacheSizeMiB ?? DEFAULT_CACHE_SIZE_MIB)}`);
    database.exec('PRAGMA temp_store = MEMORY');
    migrateSchema(database);
    return database;
  } catch (error) {
    database.close();
    throw error;
  }
}

/** Reads `PRAGMA user_version`. */
export function readSchemaVersion(database: DatabaseSync): number {
  const row = database.prepare('PRAGMA user_version').get();
  return Number(row?.user_version ?? 0);
}

function migrateSchema(database: DatabaseSync): void {
  if (readSchemaVersion(database) === STORE_SCHEMA_VERSION) {
    return;
  }
  database.exec('BEGIN IMMEDIATE');
  try {
    // Read again under the write lock: another process may have migrated the file meanwhile.
    const found = readSchemaVersion(database);
    if (found > STORE_SCHEMA_VERSION) {
      throw new Error(`Store schema version ${found} is newer than this code understands (${STORE_SCHEMA_VERSION})`);
    }
    for (let version = found; version < STORE_SCHEMA_VERSION; version++) {
      database.exec(MIGRATIONS[version]);
    }
    database.exec(`PRAGMA user_version = ${STORE_SCHEMA_VERSION}`);
    database.exec('COMMIT');
  } catch (error) {
    database.exec('ROLLBACK');
    throw error;
  }
}
