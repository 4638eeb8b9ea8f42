/**
 * What a reviewer reads of a conversation's stored records (docs/api.md, "What is stored"): each prompt's words and
 * the request exactly as the client sent it; each reply's text, model, tokens, status and the patient summary the
 * model was given.
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
  /** The patient summary sent to the model with a reply's turn. */
  readonly patientContext?: string;
}

/** The thread's prompts and replies, in the order they were sent. */
export function threadEntries(records: readonly Communication[]): ThreadEntry[] {
  return records
    .filter((record) => kindOf(record) !== undefined)
    .sort((first, second) => (first.sent ?? '').localeCompare(second.sent ?? ''))
    .map((record) => entryOf(record, kindOf(record) ?? 'prompt'));
}

function kindOf(record: Communication): ThreadEntry['kind'] | undefined {
  const codes = new Set(record.category?.flatMap((category) => category.coding?.map((coding) => coding.code) ?? []));
  return codes.has(CATEGORY.prompt.code) ? 'prompt' : codes.has(CATEGORY.response.code) ? 'reply' : undefined;
}

function entryOf(record: Communication, kind: ThreadEntry['kind']): ThreadEntry {
  const extensions = record.extension ?? [];
  const usage = extensions.find((extension) => extension.url === EXTENSION.usage)?.extension ?? [];
  const request = stringValue(extensions, EXTENSION.chatRequest);
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
    patientContext: stringValue(extensions, EXTENSION.patientContext),
  };
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
