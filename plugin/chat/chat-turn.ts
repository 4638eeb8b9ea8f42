/**
 * One exchange of a conversation once the prompt is on record: what the model is asked, and how its reply is
 * recorded (step 6), whatever way it ends.
 */
import type { FhirRepository } from '@medplum/fhir-router';
import type { Reference } from '@medplum/fhirtypes';
import { finalError, toAppError, type AppError, type AppErrorCode } from '../errors.ts';
import type { ChatFinishReason, ChatModelRequest, ChatToolCall, ChatUsage } from '../llm/chat-model.ts';
import type { ResolvedModel } from '../llm/model-registry.ts';
import { createUpstreamError, isAbortError } from '../llm/provider-errors.ts';
import type { ChatRequest } from './chat-request.ts';
import type { ConversationParties, ReplyStatus } from './communication-builders.ts';
import { historyRecordOf, type ConversationHistory } from './conversation.ts';
import type { FhirToolbox } from './fhir-tool-loop.ts';
import type { PatientContext } from './patient-context.ts';
import type { ReplyRecords } from './reply-records.ts';
import type { AnswerFields } from './wire-format.ts';
import type { RepositoryOperations } from '../telemetry/repository-operations.ts';
import type { TurnBudget } from '../governance/budgets.ts';
import { estimatedUsage, estimatePromptTokens, type RecordedUsage } from '../governance/usage-estimate.ts';
import { recordedReply, type TurnDeIdentification } from '../governance/patient-data-record.ts';
import { replyDigest, turnExchangeDigest, type ThreadScope } from './thread-digest.ts';

/** Everything the delivery steps need about one exchange. */
export interface ChatTurn {
  readonly repo: FhirRepository;
  readonly projectId: string;
  /** Where the reply is journaled while the turn runs, and recorded when it ends (reply-records.ts). */
  readonly records: ReplyRecords;
  readonly chat: ChatRequest;
  /** The model, with the FHIR tools' loop around it when the turn has them. */
  readonly target: ResolvedModel;
  /** The turn's FHIR tools and the calls they ran; undefined for a turn without them. */
  readonly toolbox?: FhirToolbox;
  readonly parties: ConversationParties;
  readonly rootId: string;
  readonly promptId: string;
  /** Assigned before the model is called, so the response can name the reply's record. */
  readonly replyId: string;
  readonly history: ConversationHistory;
  /** The patient context sent to the model, and its records; undefined for a turn without one. */
  readonly patientContext?: PatientContext;
  /** Stored records about the turn's patient the request took in (Responses `item_reference`s), sent with the prompt. */
  readonly takenIn?: readonly Reference[];
  /** How the turn was de-identified for a model not cleared for patient data; undefined when it was not. */
  readonly deIdentification?: TurnDeIdentification;
  /** `chatcmpl-...`, the same on every chunk. */
  readonly completionId: string;
  /** Unix seconds. */
  readonly created: number;
  readonly modelRequest: Omit<ChatModelRequest, 'signal'>;
  /** The turn's repository operations, when its answer reports them (a non-streaming answer's header). */
  readonly reportedOperations?: RepositoryOperations;
  /** Cancels the provider call: aborted when the client leaves, or when the server shuts down (`isShutdownAbort`). */
  readonly controller: AbortController;
  /** Settles the turn's budgets from the usage its reply records (governance/budgets.ts). */
  readonly budget?: TurnBudget;
  /**
   * How long the provider call of a turn whose client left runs on, unseen, so that the provider's own usage is
   * what the reply records (the governance option `usageWaitMs`); 0 or absent: cancelled at once.
   */
  readonly usageWaitMs?: number;
  /** Whose exchange it is, for the digest a completed reply carries (thread-digest.ts). */
  readonly threadScope?: ThreadScope;
  /** A side request about the conversation, not a turn of it (side-requests.ts). */
  readonly sideRequest?: boolean;
}

/** How a reply ended, for its record. */
export interface ReplyOutcome {
  readonly status: ReplyStatus;
  readonly text: string;
  /** The calls the model asked the client to make (a completed reply only). */
  readonly toolCalls?: readonly ChatToolCall[];
  /** The usage the provider reported; absent when it reported none. */
  readonly usage?: ChatUsage;
  /**
   * Characters of text and calls the provider generated (whether the client saw them or not), for a reply that did
   * not complete: what its usage is estimated from when the provider reported none.
   */
  readonly generatedCharacters?: number;
  readonly finishReason?: ChatFinishReason;
  readonly reason?: string;
  /** A `not-done` reply: the error code its client was answered with. */
  readonly errorCode?: AppErrorCode;
}

/** The fields every answer of the turn carries (the model read now: a fallback may be the one answering). */
export function answerFieldsOf(turn: ChatTurn): AnswerFields {
  return { completionId: turn.completionId, created: turn.created, modelId: turn.target.id, conversationId: turn.rootId, replyId: turn.replyId, includeUsage: turn.chat.includeUsage };
}

/**
 * Step 6: writes the reply's Communication, `inResponseTo` the prompt, as the project's AI agent; if the store
 * does not take it, the reply waits in the outbox and is written later (reply-records.ts).
 */
export async function recordReply(turn: ChatTurn, outcome: ReplyOutcome): Promise<void> {
  const sent = new Date();
  const usage = chargedUsage(turn, outcome);
  // The usage the reply records is what the budgets count, in the period of its `sent`; its cost goes on record too.
  const cost = turn.budget?.settle(turn.target.id, usage, sent);
  // A de-identified turn's record holds what the model received and said, as sent (governance/patient-data-record.ts).
  const resource = recordedReply(turn.deIdentification, turn.parties, {
    id: turn.replyId,
    rootId: turn.rootId,
    promptId: turn.promptId,
    modelId: turn.target.id,
    history: historyRecordOf(turn.history),
    sideRequest: turn.sideRequest,
    patientContext: turn.patientContext,
    takenIn: turn.takenIn,
    fhirTools: turn.toolbox?.calls,
    toolCalls: outcome.toolCalls,
    text: outcome.text,
    status: outcome.status,
    reason: outcome.reason,
    errorCode: outcome.errorCode,
    usage,
    cost,
    finishReason: outcome.finishReason,
    // A later request that repeats this exchange continues the conversation (a client that keeps the history).
    threadDigest: outcome.status === 'completed' && turn.threadScope ? replyDigest(turn.threadScope, turn.chat.messages, outcome) : undefined,
    // A side request may quote this turn's exchange (side-requests.ts); a side request's own is no exchange of the conversation.
    exchangeDigest: outcome.status === 'completed' && turn.threadScope && !turn.sideRequest ? turnExchangeDigest(turn.threadScope, turn.chat.messages, outcome.text) : undefined,
    sent: sent.toISOString(),
  });
  await turn.records.record(turn.projectId, { ...resource, id: turn.replyId });
}

/**
 * Ends a turn that failed (its provider, or a step after the prompt's record): the reply is recorded `not-done` with
 * `text` (what the client was sent of it) and the error, which is returned as the client is to get it: final, since
 * fhirgate has retried what it could and the prompt is on record. A retry would be a new turn, and the same request
 * under the same Idempotency-Key is answered with this error again (idempotency.ts), never a second provider call.
 */
export async function recordFailure(turn: ChatTurn, text: string, error: unknown, generatedCharacters?: number): Promise<AppError> {
  const failure = finalError(toAppError(isAbortError(error) ? strayAbort(turn) : error));
  await recordReply(turn, { status: 'not-done', text, reason: failure.message, errorCode: failure.code, generatedCharacters });
  return failure;
}

/**
 * An abort the turn did not ask for (its signal is not aborted, its client is still there: the delivery steps check
 * both first) came from the provider's side: a failure of the call, said as one, never a client that left.
 */
function strayAbort(turn: ChatTurn): AppError {
  return createUpstreamError(turn.target.id.split('/')[0], { kind: 'unknown', errorName: 'AbortError' });
}

/**
 * What the reply is charged: the provider's usage; else, for a reply that completed (from a provider that reports
 * no usage: some OpenAI-compatible servers, streamed) or that the provider worked on and did not finish (its client
 * left or the server stopped it: `stopped`; it failed after some output: `not-done`), the prompt's tokens and those
 * of what it generated, estimated and marked so. A provider that failed before any output charges nothing, as
 * providers do.
 */
function chargedUsage(turn: ChatTurn, outcome: ReplyOutcome): RecordedUsage | undefined {
  if (outcome.usage) {
    return outcome.usage;
  }
  const generated = outcome.generatedCharacters ?? (outcome.status === 'completed' ? generatedCharactersOf(outcome.text, outcome.toolCalls) : 0);
  if (outcome.status === 'completed' || outcome.status === 'stopped' || (outcome.status === 'not-done' && generated > 0)) {
    return estimatedUsage(estimatePromptTokens(turn.modelRequest.messages, turn.modelRequest.tools), generated);
  }
  return undefined;
}

/** Characters of a reply's text and calls: what its usage is estimated from when the provider reported none. */
export function generatedCharactersOf(text: string, toolCalls: readonly ChatToolCall[] | undefined): number {
  return text.length + (toolCalls ?? []).reduce((sum, call) => sum + call.name.length + call.arguments.length, 0);
}
