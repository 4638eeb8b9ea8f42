/**
 * The `next_page` token of a search answered page by page, and its reading when the client passes it back as
 * `page_token`. A token is only a position in the search's results and a digest of the search it belongs to: each
 * page runs the client's arguments through the same checks as the first (the patient read as the caller, the
 * search parameters validated, narrowed to the patient), so a token, forged or not, cannot reach anything the
 * first page could not. The digest tells a client that passes a token with other arguments that it does not fit,
 * rather than giving it a page of another search.
 */
import { createHash } from 'node:crypto';
import { MAX_PAGE_OFFSET } from '../chat/fhir-tools.ts';

const TOKEN_PATTERN = /^pg1\.(\d{1,5})\.([A-Za-z0-9_-]{16})$/;

/** The longest token (the room a page keeps for it in its text). */
export const PAGE_TOKEN_RESERVE = `,"next_page":"pg1.${MAX_PAGE_OFFSET}.${'x'.repeat(16)}"`.length;

/** The token of the page of `search` that starts at `offset`; `search` names the tool, the patient and the validated query. */
export function pageTokenOf(search: readonly unknown[], offset: number): string {
  return `pg1.${offset}.${digestOf(search)}`;
}

/** Where the page a token names starts: 0 without a token, a message for one that is not this search's. */
export function pageOffsetOf(token: unknown, search: readonly unknown[]): number | string {
  if (token === undefined) {
    return 0;
  }
  const match = typeof token === 'string' ? TOKEN_PATTERN.exec(token) : null;
  if (!match || match[2] !== digestOf(search) || Number(match[1]) > MAX_PAGE_OFFSET) {
    return 'page_token is not a next_page of this search: pass the next_page an answer gave, with the same arguments as that call.';
  }
  return Number(match[1]);
}

function digestOf(search: readonly unknown[]): string {
  return createHash('sha256').update(JSON.stringify(search.map(canonical))).digest('base64url').slice(0, 16);
}

/** A value with its objects' keys in order: the same search digests the same however its parameters were ordered. */
function canonical(value: unknown): unknown {
  if (Array.isArray(value)) {
    return value.map(canonical);
  }
  if (typeof value === 'object' && value !== null) {
    return Object.fromEntries(Object.entries(value).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([key, item]) => [key, canonical(item)]));
  }
  return value;
}
