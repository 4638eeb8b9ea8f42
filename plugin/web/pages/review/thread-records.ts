/**
 * What a reviewer reads of a conversation's stored records (docs/api.md, "What is stored"): each prompt's words and
 * the request exactly as the client sent it; each reply's text, model, tokens, cost, latency, status, the patient
 * summary the model was given and, for a turn sent de-identified, the request as the model got it.
 */
import type { Communication, Extension } from '@medplum/fhirtypes';
import { CATEGORY, EXTENSION } from '../../../chat/fhir-vocabulary.ts';

/** One record of a thread, as the review console shows it. */
export interface ThreadEntry {
  readonly id: string;
  readonly kind: 'prompt' | 'reply';
  readonly sent?: string;
  readonly status: string;
  readonly text: string;
  /** A prompt's request body as the client sent it (JSON), pretty-printed. */
  readonly request?: string;
  readonly model?: string;
  readonly tokens?: { readonly prompt?: number; readonly completion?: number; readonly total?: number; readonly estimated: boolean };
  /** The reply's cost in US dollars, as recorded (a model with a price). */
  readonly costUsd?: number;
  /**
   * Milliseconds from the prompt's record to the reply's: how long the turn took to be answered. Undefined when the
   * reply was written after a restart from the journal (its time is then its prompt's plus one millisecond).
   */
  readonly latencyMs?: number;
  /** The patient summary sent to the model with a reply's turn (de-identified, for a turn sent de-identified). */
  readonly patientContext?: string;
  /** For a turn sent de-identified: the request's messages exactly as the model got them (JSON), pretty-printed. */
  readonly deIdentifiedRequest?: string;
  /** For a reply about a patient: the records its model was given (the reply's `about`), as references. */
  readonly shared?: readonly string[];
  /** A reply's prompt (`inResponseTo`), `Communication/<id>`. */
  readonly promptReference?: string;
}

/** The thread's prompts and replies, in the order they were sent. */
export function threadEntries(records: readonly Communication[]): ThreadEntry[] {
  const sentById = new Map(records.map((record) => [`Communication/${record.id ?? ''}`, record.sent]));
  return records
    .filter((record) => kindOf(record) !== undefined)
    .sort((first, second) => (first.sent ?? '').localeCompare(second.sent ?? ''))
    .map((record) => entryOf(record, kindOf(record) ?? 'prompt', sentById));
}

function kindOf(record: Communication): ThreadEntry['kind'] | undefined {
  const codes = new Set(record.category?.flatMap((category) => category.coding?.map((coding) => coding.code) ?? []));
  return codes.has(CATEGORY.prompt.code) ? 'prompt' : codes.has(CATEGORY.response.code) ? 'reply' : undefined;
}

function entryOf(record: Communication, kind: ThreadEntry['kind'], sentById: ReadonlyMap<string, string | undefined>): ThreadEntry {
  const extensions = record.extension ?? [];
  const usage = extensions.find((extension) => extension.url === EXTENSION.usage)?.extension ?? [];
  const request = stringValue(extensions, EXTENSION.chatRequest);
  const deIdentified = extensions.find((extension) => extension.url === EXTENSION.deIdentified)?.extension ?? [];
  const deIdentifiedRequest = deIdentified.filter((part) => part.url === 'request').map((part) => part.valueString ?? '');
  const promptReference = record.inResponseTo?.[0]?.reference;
  return {
    id: record.id ?? '',
    kind,
    sent: record.sent,
    status: record.status,
    text: (record.payload ?? []).map((item) => item.contentString ?? '').join('\n'),
    request: request === undefined ? undefined : prettyJson(request),
    model: stringValue(extensions, EXTENSION.model),
    tokens: usage.length
      ? {
          prompt: integerValue(usage, 'prompt-tokens'),
          completion: integerValue(usage, 'completion-tokens'),
          total: integerValue(usage, 'total-tokens'),
          estimated: usage.some((part) => part.url === 'estimated' && part.valueBoolean === true),
        }
      : undefined,
    costUsd: usage.find((part) => part.url === 'cost')?.valueMoney?.value,
    latencyMs: kind === 'reply' ? latencyOf(sentById.get(promptReference ?? ''), record.sent) : undefined,
    patientContext: stringValue(extensions, EXTENSION.patientContext),
    deIdentifiedRequest: deIdentifiedRequest.length ? prettyJson(deIdentifiedRequest.join('')) : undefined,
    shared: kind === 'reply' && record.about?.length ? record.about.flatMap((reference) => (reference.reference ? [reference.reference] : [])) : undefined,
    promptReference,
  };
}

function latencyOf(promptSent: string | undefined, replySent: string | undefined): number | undefined {
  const latency = Date.parse(replySent ?? '') - Date.parse(promptSent ?? '');
  // A reply written from the journal after a restart is dated a millisecond after its prompt: no measured latency.
  return Number.isFinite(latency) && latency > 1 ? latency : undefined;
}

function stringValue(extensions: readonly Extension[], url: string): string | undefined {
  return extensions.find((extension) => extension.url === url)?.valueString;
}

function integerValue(extensions: readonly Extension[], url: string): number | undefined {
  return extensions.find((extension) => extension.url === url)?.valueInteger;
}

function prettyJson(text: string): string {
  try {
    return JSON.stringify(JSON.parse(text), undefined, 2);
  } catch {
    return text;
  }
}
