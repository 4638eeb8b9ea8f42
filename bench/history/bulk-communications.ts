/**
 * Conversations for the history benchmark, built with the plugin's own Communication builders and given the
 * server-owned meta the writing repository sets (project, author, compartments), so that a bulk-inserted row is
 * what a chat request would have written: prompts by the caller, roots and replies by the AI agent.
 */
import { randomUUID } from 'node:crypto';
import type { Communication, Reference } from '@medplum/fhirtypes';
import {
  buildConversationRoot,
  buildPrompt,
  buildReply,
  type CommunicationParty,
  type ConversationParties,
} from '../../plugin/chat/communication-builders.ts';
import { DEFAULT_CATEGORY_SYSTEM } from '../../plugin/chat/fhir-vocabulary.ts';

/** Who a seeded conversation belongs to. */
export interface ConversationOwner {
  readonly projectId: string;
  /** The caller, e.g. `Practitioner/<id>`: sender and `meta.author` of prompts. */
  readonly caller: string;
  /** `Device/<id>` of the project's AI agent: `meta.author` of roots and replies. */
  readonly agent: string;
  /** `Patient/<id>`, or undefined for a conversation without patient. */
  readonly subject?: string;
}

/** One seeded conversation's Communications, root first, then prompt and reply of each turn. */
export interface SeededConversation {
  readonly rootId: string;
  readonly resources: readonly Communication[];
}

const MODEL_ID = 'openai-compatible/bench-model';
const QUESTIONS = [
  'What changed since the last visit?',
  'Summarise the latest blood pressure readings and flag anything above target.',
  'Which medications interact with the new prescription?',
  'Draft a short note for the referral letter.',
  'Are there open follow-ups from the previous consultation?',
];

/**
 * A conversation of `turns` turns starting at `startMillis`, one message a second. Prompts carry the request body
 * as the chat-request extension; replies carry model, usage and history extensions as the chat route writes them.
 */
export function buildSeededConversation(owner: ConversationOwner, turns: number, startMillis: number): SeededConversation {
  const parties: ConversationParties = {
    categorySystem: DEFAULT_CATEGORY_SYSTEM,
    caller: { reference: owner.caller } as CommunicationParty,
    agent: { reference: owner.agent, display: 'fhirgate AI agent' },
    subject: owner.subject ? { reference: owner.subject } : undefined,
  };
  const rootId = randomUUID();
  let clock = startMillis;
  const sentAt = (): string => {
    clock += 1000;
    return new Date(clock).toISOString();
  };
  const resources: Communication[] = [withMeta(owner, owner.agent, { ...buildConversationRoot(parties, sentAt()), id: rootId })];
  let firstId: string | undefined;
  for (let turn = 0; turn < turns; turn++) {
    const text = `${QUESTIONS[turn % QUESTIONS.length]} (turn ${turn + 1})`;
    const requestBody = {
      model: MODEL_ID,
      messages: [{ role: 'user', content: text }],
      ...(turn > 0 ? { conversation_id: rootId } : {}),
    };
    const promptId = randomUUID();
    resources.push(withMeta(owner, owner.caller, { ...buildPrompt(parties, { rootId, messages: [{ role: 'user', content: text }], requestBody, sent: sentAt() }), id: promptId }));
    firstId ??= promptId;
    const history = Math.min(2 * turn, 50);
    const reply = buildReply(parties, {
      id: randomUUID(),
      rootId,
      promptId,
      text: `Echo: ${text}`,
      status: 'completed',
      modelId: MODEL_ID,
      usage: { promptTokens: 12 + history * 8, completionTokens: 14 },
      history: { count: history, oldest: history > 0 ? firstId : undefined },
      sent: sentAt(),
    });
    resources.push(withMeta(owner, owner.agent, reply));
  }
  return { rootId, resources };
}

/** The meta the writing repository sets: project, author and compartments, never what the writer sent. */
function withMeta(owner: ConversationOwner, author: string, resource: Communication): Communication {
  const compartment: Reference[] = [{ reference: `Project/${owner.projectId}` }];
  if (owner.subject) {
    compartment.push({ reference: owner.subject });
  }
  return { ...resource, meta: { project: owner.projectId, author: { reference: author }, compartment } };
}
