/**
 * Builds the Communications of a conversation exactly as the spec's table says: the conversation root, the
 * prompt (`ai-prompt`) and the reply (`ai-response`).
 */
import type { Communication, Device, Extension, Patient, Reference } from '@medplum/fhirtypes';
import type { ChatFinishReason, ChatUsage } from '../llm/chat-model.ts';
import { CATEGORY, EXTENSION } from './fhir-vocabulary.ts';

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

function category(system: string, kind: (typeof CATEGORY)[keyof typeof CATEGORY]): Communication['category'] {
  return [{ coding: [{ system, code: kind.code, display: kind.display }] }];
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

/** The prompt: the request's last user message as payload, the whole request body as an extension. */
export function buildPrompt(parties: ConversationParties, input: { rootId: string; text: string; requestBody: unknown; sent: string }): Communication {
  return {
    resourceType: 'Communication',
    status: 'completed',
    category: category(parties.categorySystem, CATEGORY.prompt),
    subject: parties.subject,
    sender: parties.caller,
    recipient: [parties.agent],
    sent: input.sent,
    payload: [{ contentString: input.text }],
    partOf: [{ reference: `Communication/${input.rootId}` }],
    extension: [{ url: EXTENSION.chatRequest, valueString: JSON.stringify(input.requestBody) }],
  };
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
  readonly modelId: string;
  readonly usage?: ChatUsage;
  /** Why the model stopped, for a reply that completed. */
  readonly finishReason?: ChatFinishReason;
  readonly history: { readonly count: number; readonly oldest?: string };
  /** The patient context sent with the prompt, and the records it came from. */
  readonly patientContext?: { readonly text: string; readonly shared: readonly Reference[] };
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
      ],
    });
  }
  if (reply.patientContext) {
    extension.push({ url: EXTENSION.patientContext, valueString: reply.patientContext.text });
  }
  extension.push({
    url: EXTENSION.history,
    extension: [
      { url: 'count', valueInteger: reply.history.count },
      ...(reply.history.oldest ? [{ url: 'oldest', valueReference: { reference: `Communication/${reply.history.oldest}` } }] : []),
    ],
  });
  return {
    resourceType: 'Communication',
    id: reply.id,
    status: reply.status,
    statusReason: reply.reason ? { text: reply.reason } : undefined,
    category: category(parties.categorySystem, CATEGORY.response),
    subject: parties.subject,
    sender: parties.agent,
    recipient: [parties.caller],
    sent: reply.sent,
    payload: [{ contentString: reply.text }],
    partOf: [{ reference: `Communication/${reply.rootId}` }],
    inResponseTo: [{ reference: `Communication/${reply.promptId}` }],
    about: reply.patientContext?.shared.length ? [...reply.patientContext.shared] : undefined,
    extension,
  };
}
