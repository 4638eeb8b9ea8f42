/**
 * Exports for an auditor, as FHIR `collection` Bundles (JSON) built from what the reviewer may read, with their own
 * token: a conversation (its root, every prompt and reply, and the AuditEvents of what its replies disclosed), or a
 * patient's disclosures over a period (the AuditEvents, and the replies they were sent for). Records the reviewer's
 * AccessPolicy hides (the patient's chart) are not in it: the AuditEvents name them by reference.
 */
import type { MedplumClient, SearchRequest } from '@medplum/core';
import { formatSearchQuery } from '@medplum/core';
import type { AuditEvent, Bundle, Communication, Resource } from '@medplum/fhirtypes';

/** Records read per request while collecting an export. */
const PAGE = 200;
/** References per `_id` / `entity` list, so a request's URL stays short. */
const CHUNK = 50;

/** A `collection` Bundle of the records, once each (by type and id), each with its full URL on the server. */
export function buildExportBundle(baseUrl: string, records: readonly Resource[], timestamp = new Date().toISOString()): Bundle {
  const seen = new Set<string>();
  const entry: NonNullable<Bundle['entry']> = [];
  for (const resource of records) {
    const key = `${resource.resourceType}/${resource.id ?? ''}`;
    if (resource.id && !seen.has(key)) {
      seen.add(key);
      entry.push({ fullUrl: new URL(`fhir/R4/${key}`, baseUrl).toString(), resource });
    }
  }
  return { resourceType: 'Bundle', type: 'collection', timestamp, total: entry.length, entry } as Bundle;
}

/** The references of the replies a set of AuditEvents disclosed for (their role `3` entities). */
export function repliesOf(events: readonly AuditEvent[]): string[] {
  return [
    ...new Set(
      events.flatMap((event) =>
        (event.entity ?? []).flatMap((entity) => (entity.role?.code === '3' && entity.what?.reference?.startsWith('Communication/') ? [entity.what.reference] : []))
      )
    ),
  ];
}

/**
 * A conversation's records and the disclosures of its replies. A user whose AccessPolicy gives no AuditEvents (a
 * clinician exporting their own conversation) gets the records without them, as the server refuses them.
 */
export async function collectConversation(medplum: MedplumClient, conversationId: string): Promise<Resource[]> {
  const root = await medplum.readResource('Communication', conversationId);
  const records = await searchAll<Communication>(medplum, 'Communication', { 'part-of': `Communication/${conversationId}`, _sort: 'sent' });
  const replies = records.filter((record) => record.inResponseTo?.length).map((record) => `Communication/${record.id ?? ''}`);
  const events: AuditEvent[] = [];
  try {
    for (const chunk of chunks(replies)) {
      events.push(...(await searchAll<AuditEvent>(medplum, 'AuditEvent', { entity: chunk.join(','), _sort: 'date' })));
    }
  } catch (error) {
    if (!isForbidden(error)) {
      throw error;
    }
    events.length = 0;
  }
  return [root, ...records, ...events];
}

/** The disclosures a search finds (every page), and the replies they were sent for. */
export async function collectDisclosures(medplum: MedplumClient, search: SearchRequest): Promise<Resource[]> {
  // A period is two filters on `date`: the query keeps both.
  const query = new URLSearchParams(formatSearchQuery({ ...search, fields: undefined, count: undefined, offset: undefined, total: undefined }));
  const events = await searchAll<AuditEvent>(medplum, 'AuditEvent', query);
  const replies: Communication[] = [];
  for (const chunk of chunks(repliesOf(events))) {
    replies.push(...(await searchAll<Communication>(medplum, 'Communication', { _id: chunk.map((reference) => reference.split('/')[1]).join(',') })));
  }
  return [...events, ...replies];
}

/** Offers `bundle` to the browser as a download named `fileName`. */
export function downloadBundle(bundle: Bundle, fileName: string): void {
  const url = URL.createObjectURL(new Blob([JSON.stringify(bundle, undefined, 2)], { type: 'application/fhir+json' }));
  const link = document.createElement('a');
  link.href = url;
  link.download = fileName;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}

async function searchAll<T extends Resource>(medplum: MedplumClient, resourceType: T['resourceType'], query: Record<string, string> | URLSearchParams): Promise<T[]> {
  const found: T[] = [];
  for (let offset = 0; ; offset += PAGE) {
    const params = new URLSearchParams(query);
    params.set('_count', String(PAGE));
    params.set('_offset', String(offset));
    const bundle = await medplum.search(resourceType, params, { cache: 'no-cache' });
    const page = (bundle.entry ?? []).flatMap((entry) => (entry.resource && entry.search?.mode !== 'include' ? [entry.resource as T] : []));
    found.push(...page);
    if (page.length < PAGE) {
      return found;
    }
  }
}

/** A refusal of the server (403), recognised by its shape: an OperationOutcome of code `forbidden`. */
function isForbidden(error: unknown): boolean {
  const outcome = (error as { outcome?: { issue?: { code?: string }[] } } | undefined)?.outcome;
  return outcome?.issue?.some((issue) => issue.code === 'forbidden') ?? false;
}

function chunks<T>(items: readonly T[]): T[][] {
  const result: T[][] = [];
  for (let start = 0; start < items.length; start += CHUNK) {
    result.push(items.slice(start, start + CHUNK));
  }
  return result;
}
