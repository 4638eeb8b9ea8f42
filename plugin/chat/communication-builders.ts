/**
 * Builds the Communications of a conversation exactly as the spec's table says: the conversation root, the
 * prompt (`ai-prompt`) and the reply (`ai-response`).
 */
import type { Communication, Device, Extension, Patient, Reference } from '@medplum/fhirtypes';
import type { ChatFinishReason, ChatMessage, ChatToolCall } from '../llm/chat-model.ts';
import type { RecordedUsage } from '../governance/usage-estimate.ts';
import { CATEGORY, ERROR_CODE_SYSTEM, EXTENSION, MODEL_MEDIUM_SYSTEM, SIDE_REQUEST_CATEGORY } from './fhir-vocabulary.ts';
import { textPayload, textPieces } from './fhir-text.ts';
import { moneyOf } from '../governance/model-prices.ts';
import { promptContentOf } from './prompt-messages.ts';
import { EXCHANGE_DIGEST_SYSTEM, THREAD_DIGEST_SYSTEM } from './thread-digest.ts';

/** Who talks to whom in one conversation. */
export interface ConversationParties {
  readonly categorySystem: string;
  /** The caller's profile, e.g. `Practitioner/123`. */
  readonly caller: CommunicationParty;
  /** The project's AI agent, `Device/<id>`. */
  readonly agent: Reference<Device>;
  /** `Patient/<id>` when the request named a patient. */
  readonly subject?: Reference<Patient>;
}

/** A reference that may be a Communication's sender and recipient. */
export type CommunicationParty = NonNullable<Communication['sender']>;

/** How a reply ended. */
export type ReplyStatus = 'completed' | 'stopped' | 'not-done';

function category(system: string, kind: { readonly code: string; readonly display: string }): Communication['category'] {
  return [{ coding: [{ system, code: kind.code, display: kind.display }] }];
}

/** The record's kind; a side request's prompt or reply has the side request's category as its second. */
function categories(system: string, kind: (typeof CATEGORY)[keyof typeof CATEGORY], sideRequest: boolean | undefined): Communication['category'] {
  return [...(category(system, kind) ?? []), ...(sideRequest ? (category(system, SIDE_REQUEST_CATEGORY) ?? []) : [])];
}

/** The root of a new conversation; its id is the `conversation_id`. */
export function buildConversationRoot(parties: ConversationParties, sent: string): Communication {
  return {
    resourceType: 'Communication',
    status: 'in-progress',
    category: category(parties.categorySystem, CATEGORY.conversation),
    subject: parties.subject,
    sender: parties.caller,
    recipient: [parties.agent],
    sent,
  };
}

/**
 * The prompt: every message the turn adds to the conversation (turn-input.ts), the user's words and tool results as
 * its payload, each message described in order by a `message` extension (prompt-messages.ts); the whole request
 * body as an extension. A side request's prompt has the side request's category too (side-requests.ts).
 */
export function buildPrompt(
  parties: ConversationParties,
  input: { rootId: string; messages: readonly ChatMessage[]; requestBody: unknown; sent: string; sideRequest?: boolean }
): Communication {
  const content = promptContentOf(input.messages);
  return {
    resourceType: 'Communication',
    status: 'completed',
    category: categories(parties.categorySystem, CATEGORY.prompt, input.sideRequest),
    subject: parties.subject,
    sender: parties.caller,
    recipient: [parties.agent],
    sent: input.sent,
    payload: content.payload.length > 0 ? content.payload : undefined,
    partOf: [{ reference: `Communication/${input.rootId}` }],
    extension: [
      ...content.extension,
      // A body over a FHIR string's 1 MiB is kept in several extensions, in order (fhir-text.ts).
      ...textPieces(JSON.stringify(input.requestBody)).map((valueString) => ({ url: EXTENSION.chatRequest, valueString })),
    ],
  };
}

/** A FHIR tool fhirgate ran for the model during one reply: what was asked, what the model was given, from which records. */
export interface FhirToolRecord {
  readonly id: string;
  readonly name: string;
  readonly arguments: string;
  /** The text the model was given as the call's result. */
  readonly result: string;
  /** The records the result came from (the patient's records, never another's). */
  readonly shared: readonly Reference[];
}

/** What is known about a reply when it is recorded. */
export interface ReplyRecord {
  readonly id: string;
  readonly rootId: string;
  readonly promptId: string;
  readonly text: string;
  readonly status: ReplyStatus;
  /** Why a reply is `not-done` or `stopped`. */
  readonly reason?: string;
  /** A `not-done` reply: the error code its client was answered with. */
  readonly errorCode?: string;
  readonly modelId: string;
  /** The provider's usage, or fhirgate's estimate for a reply that did not complete (`estimated`). */
  readonly usage?: RecordedUsage;
  /** What the usage cost, in nano-dollars, at the model's price (governance/model-prices.ts); absent without a price. */
  readonly cost?: number;
  /** Why the model stopped, for a reply that completed. */
  readonly finishReason?: ChatFinishReason;
  /** The history sent: how many messages, the oldest one's record, the prompt whose opening instructions it carried. */
  readonly history: { readonly count: number; readonly oldest?: string; readonly instructions?: string };
  /** The patient context sent with the prompt, and the records it came from. */
  readonly patientContext?: { readonly text: string; readonly shared: readonly Reference[] };
  /** Stored records about the patient the request took in (Responses `item_reference`s), sent with the prompt. */
  readonly takenIn?: readonly Reference[];
  /** FHIR tools run for the model while it answered, in order. */
  readonly fhirTools?: readonly FhirToolRecord[];
  /** Calls the model asked the client to make (the reply's `tool_calls`). */
  readonly toolCalls?: readonly ChatToolCall[];
  /** A completed reply: the digest of the exchange as its client saw it (thread-digest.ts). */
  readonly threadDigest?: string;
  /** A completed turn's reply: the digest of its last user message and its text, as a side request quotes them. */
  readonly exchangeDigest?: string;
  /** The reply of a side request about the conversation, not a turn of it (side-requests.ts). */
  readonly sideRequest?: boolean;
  readonly sent: string;
}

/** The reply, `inResponseTo` its prompt, with the model, usage and history window as extensions. */
export function buildReply(parties: ConversationParties, reply: ReplyRecord): Communication {
  const extension: Extension[] = [{ url: EXTENSION.model, valueString: reply.modelId }];
  if (reply.finishReason) {
    extension.push({ url: EXTENSION.finishReason, valueCode: reply.finishReason });
  }
  if (reply.usage) {
    extension.push({
      url: EXTENSION.usage,
      extension: [
        { url: 'prompt-tokens', valueInteger: reply.usage.promptTokens },
        { url: 'completion-tokens', valueInteger: reply.usage.completionTokens },
        { url: 'total-tokens', valueInteger: reply.usage.promptTokens + reply.usage.completionTokens },
        ...(reply.cost === undefined ? [] : [{ url: 'cost', valueMoney: moneyOf(reply.cost) }]),
        // The provider reported none (the reply did not complete): fhirgate's estimate (governance/usage-estimate.ts).
        ...(reply.usage.estimated ? [{ url: 'estimated', valueBoolean: true }] : []),
      ],
    });
  }
  if (reply.patientContext) {
    extension.push({ url: EXTENSION.patientContext, valueString: reply.patientContext.text });
  }
  for (const call of reply.fhirTools ?? []) {
    extension.push({ url: EXTENSION.fhirToolCall, extension: [...callParts(call), ...stringPart('result', call.result)] });
  }
  for (const call of reply.toolCalls ?? []) {
    extension.push({ url: EXTENSION.toolCall, extension: callParts(call) });
  }
  extension.push({
    url: EXTENSION.history,
    extension: [
      { url: 'count', valueInteger: reply.history.count },
      ...(reply.history.oldest ? [{ url: 'oldest', valueReference: { reference: `Communication/${reply.history.oldest}` } }] : []),
      ...(reply.history.instructions ? [{ url: 'instructions', valueReference: { reference: `Communication/${reply.history.instructions}` } }] : []),
    ],
  });
  return {
    resourceType: 'Communication',
    id: reply.id,
    identifier: identifiersOf(reply),
    status: reply.status,
    statusReason: reply.reason || reply.errorCode ? statusReasonOf(reply.reason, reply.errorCode) : undefined,
    category: categories(parties.categorySystem, CATEGORY.response, reply.sideRequest),
    medium: [{ coding: [{ system: MODEL_MEDIUM_SYSTEM, code: reply.modelId }] }],
    subject: parties.subject,
    sender: parties.agent,
    recipient: [parties.caller],
    sent: reply.sent,
    // A reply without text (none delivered, or only tool calls) has no payload; a long one has several items.
    payload: reply.text ? textPayload(reply.text) : undefined,
    partOf: [{ reference: `Communication/${reply.rootId}` }],
    inResponseTo: [{ reference: `Communication/${reply.promptId}` }],
    about: sharedRecords(reply),
    extension,
  };
}

function identifiersOf(reply: ReplyRecord): Communication['identifier'] {
  const identifiers = [
    ...(reply.threadDigest ? [{ system: THREAD_DIGEST_SYSTEM, value: reply.threadDigest }] : []),
    ...(reply.exchangeDigest ? [{ system: EXCHANGE_DIGEST_SYSTEM, value: reply.exchangeDigest }] : []),
  ];
  return identifiers.length > 0 ? identifiers : undefined;
}

function statusReasonOf(reason: string | undefined, errorCode: string | undefined): NonNullable<Communication['statusReason']> {
  return { ...(errorCode ? { coding: [{ system: ERROR_CODE_SYSTEM, code: errorCode }] } : {}), ...(reason ? { text: reason } : {}) };
}

/**
 * Every record of the patient that reached the model for this reply, once each: the summary's, the records the
 * request took in, then the tools'.
 */
function sharedRecords(reply: ReplyRecord): Reference[] | undefined {
  const references = new Set<string>();
  for (const record of [...(reply.patientContext?.shared ?? []), ...(reply.takenIn ?? []), ...(reply.fhirTools ?? []).flatMap((call) => call.shared)]) {
    if (record.reference) {
      references.add(record.reference);
    }
  }
  return references.size > 0 ? [...references].map((reference) => ({ reference })) : undefined;
}

function callParts(call: { readonly id: string; readonly name: string; readonly arguments: string }): Extension[] {
  return [...stringPart('id', call.id), ...stringPart('name', call.name), ...stringPart('arguments', call.arguments)];
}

/** A sub-extension with a string value, left out when there is nothing in it (FHIR strings are never empty or blank). */
function stringPart(url: string, value: string): Extension[] {
  return value.trim() ? [{ url, valueString: value }] : [];
}
