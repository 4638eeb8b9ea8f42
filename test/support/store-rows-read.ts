/**
 * For the store's tests: how many rows the store's statements returned while a search ran (index rows of slices,
 * and resources loaded), so a test can say a search read one page, not the whole store. Restored by
 * `jest.restoreAllMocks()`.
 */
import { jest } from '@jest/globals';
import { ResourceStore } from '../../plugin/hosts/standalone/store/resource-store.ts';

/** What a search read: rows its statements returned, and of those the resources whose content it loaded. */
export interface SearchReads {
  readonly rows: number;
  readonly resources: number;
}

/** Rows the store's statements returned while `search` ran (index rows of slices, and resources loaded). */
export async function rowsRead(search: () => Promise<unknown>): Promise<number> {
  return (await readsOf(search)).rows;
}

/** The rows `search` read, and how many resources' content it loaded. */
export async function readsOf(search: () => Promise<unknown>): Promise<SearchReads> {
  let rows = 0;
  let resources = 0;
  const queryAll = ResourceStore.prototype.queryAll;
  jest.spyOn(ResourceStore.prototype, 'queryAll').mockImplementation(function (this: ResourceStore, sql, params) {
    const result = queryAll.call(this, sql, params);
    rows += result.length;
    return result;
  });
  const contentsOf = ResourceStore.prototype.contentsOf;
  jest.spyOn(ResourceStore.prototype, 'contentsOf').mockImplementation(function (this: ResourceStore, pks) {
    const result = contentsOf.call(this, pks);
    rows += result.size;
    resources += result.size;
    return result;
  });
  await search();
  return { rows, resources };
}
