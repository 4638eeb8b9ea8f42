/**
 * What a store file takes on disk: its files after a checkpoint, and its pages by table and index (SQLite's
 * `dbstat`), for the bytes-per-turn measurement (bench/bytes-per-turn/) and the test that holds it.
 */
import { existsSync, statSync } from 'node:fs';
import { DatabaseSync } from 'node:sqlite';

/** Sizes of a store's files, in bytes. */
export interface StoreFileSizes {
  /** The main file. */
  readonly mainBytes: number;
  /** Pages of the main file that hold data (not on the free list). */
  readonly usedBytes: number;
  /** The WAL after the checkpoint (0 unless a reader kept SQLite from truncating it). */
  readonly walBytes: number;
}

/** Bytes one table or index of the store occupies. */
export interface StoreObjectSize {
  readonly name: string;
  /** Its pages × the page size. */
  readonly bytes: number;
  /** Bytes of those pages holding records (the rest is page headers and unused space in pages). */
  readonly recordBytes: number;
}

/** Checkpoints the store file's WAL through a connection of its own, then measures its files. */
export function measureStoreFiles(storeFile: string): StoreFileSizes {
  const database = new DatabaseSync(storeFile);
  try {
    database.exec('PRAGMA wal_checkpoint(TRUNCATE)');
    const pageSize = Number(database.prepare('PRAGMA page_size').get()?.page_size);
    const pageCount = Number(database.prepare('PRAGMA page_count').get()?.page_count);
    const freePages = Number(database.prepare('PRAGMA freelist_count').get()?.freelist_count);
    return {
      mainBytes: statSync(storeFile).size,
      usedBytes: (pageCount - freePages) * pageSize,
      walBytes: existsSync(`${storeFile}-wal`) ? statSync(`${storeFile}-wal`).size : 0,
    };
  } finally {
    database.close();
  }
}

/** The store's tables and indexes by the bytes they occupy, largest first. */
export function measureStoreObjects(storeFile: string): StoreObjectSize[] {
  const database = new DatabaseSync(storeFile, { readOnly: true });
  try {
    return database
      .prepare('SELECT name, SUM(pgsize) AS bytes, SUM(payload) AS records FROM dbstat GROUP BY name ORDER BY bytes DESC')
      .all()
      .map((row) => ({ name: String(row.name), bytes: Number(row.bytes), recordBytes: Number(row.records) }));
  } finally {
    database.close();
  }
}
