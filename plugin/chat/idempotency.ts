/**
 * `Idempotency-Key`: a client that retries a request (a lost connection, a timeout) sends the same key and gets
 * the same result, never a second turn. The key is scoped to the caller (project and profile). The ids of the
 * turn's prompt and reply are derived from it, so the store itself refuses a second prompt under the same key, even
 * from two instances at once. A new conversation's root is not: when the store refuses its first prompt the root is
 * taken back (record-prompt.ts), and the request sent again starts the conversation with a root of its own.
 * Under a key:
 * - no prompt yet under the key: the turn runs, with those ids;
 * - its reply is `completed`: the same answer is sent again, from the records (`Idempotent-Replayed: true`);
 * - its prompt is stored but its reply is not yet: 409, retry shortly (the turn is running, or its reply is on its
 *   way from the outbox or the journal);
 * - its reply ended `not-done` (its provider failed, after fhirgate's own retries): the same error again, from the
 *   reply's record (`Idempotent-Replayed: true`), never another provider call: a client that retries a failing turn
 *   must not multiply the provider's load or the conversations;
 * - its reply ended `stopped` (the client left, the server shut down): the retry is a new attempt, with ids derived
 *   from the key and the attempt's number, so each attempt keeps one prompt and one reply;
 * - no prompt under the key (the request was refused before anything was stored, e.g. a 503): the turn runs;
 * - the same key with a different request body: 400.
 */
import { createHash } from 'node:crypto';
import type { WithId } from '@medplum/core';
import type { FhirRepository } from '@medplum/fhir-router';
import type { Communication } from '@medplum/fhirtypes';
import type { Request } from 'express';
import { AppError, isAppErrorCode } from '../errors.ts';
import { findCommunication } from './conversation.ts';
import { ERROR_CODE_SYSTEM } from './fhir-vocabulary.ts';
import { recordedRequest } from './recorded-messages.ts';

/** The header, as OpenAI, Stripe and the IETF draft name it. */
export const IDEMPOTENCY_HEADER = 'idempotency-key';
/** The header that marks an answer given again from the records of a turn made under the same key. */
export const REPLAYED_HEADER = 'Idempotent-Replayed';
const KEY_PATTERN = /^[\x21-\x7e]{1,255}$/;
/** Attempts under one key: a client that keeps retrying a failing turn gets a clear 400 after this many. */
const MAX_ATTEMPTS = 10;

/** The ids a turn's prompt and reply are written with. */
export interface TurnIds {
  readonly promptId: string;
  readonly replyId: string;
}

/** What to do with a request, given its key. */
export type IdempotentTurn =
  | { readonly kind: 'run'; readonly ids: TurnIds }
  | { readonly kind: 'replay'; readonly prompt: WithId<Communication>; readonly reply: WithId<Communication> }
  /** The turn under the key failed: its error, read from its reply's record, is the answer again. */
  | { readonly kind: 'failed'; readonly error: AppError };

/** The request's key, or undefined without one; a malformed key is a 400. */
export function idempotencyKeyOf(request: Request): string | undefined {
  const value = request.headers[IDEMPOTENCY_HEADER];
  if (value === undefined) {
    return undefined;
  }
  if (typeof value !== 'string' || !KEY_PATTERN.test(value)) {
    throw new AppError('invalid_request', 'Idempotency-Key must be 1 to 255 visible ASCII characters.', { details: { param: 'Idempotency-Key' } });
  }
  return value;
}

/** The ids of attempt `attempt` under a key; a UUID-shaped digest, so a key never appears in a record. */
export function turnIdsFor(scope: readonly string[], attempt: number): TurnIds {
  const idOf = (part: string): string => {
    const hex = createHash('sha256').update([...scope, String(attempt), part].join('\n')).digest('hex');
    // Version 8 (custom) UUID layout.
    return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-8${hex.slice(13, 16)}-${((Number.parseInt(hex[16], 16) & 0x3) | 0x8).toString(16)}${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
  };
  return { promptId: idOf('prompt'), replyId: idOf('reply') };
}

/**
 * Decides what a request with `key` does: run (with the attempt's ids), replay a completed turn or a failed one's
 * error, or refuse (409 in progress, 400 another body or too many attempts). Reads through the caller's repository.
 */
export async function resolveIdempotentTurn(
  repo: FhirRepository,
  scope: readonly string[],
  body: Readonly<Record<string, unknown>>
): Promise<IdempotentTurn> {
  const requestJson = JSON.stringify(body);
  for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
    const ids = turnIdsFor(scope, attempt);
    const prompt = await findCommunication(repo, ids.promptId);
    if (!prompt) {
      return { kind: 'run', ids };
    }
    const recorded = recordedRequest(prompt);
    if (recorded !== requestJson) {
      throw new AppError('invalid_request', 'This Idempotency-Key was already used with a different request.', { details: { param: 'Idempotency-Key' } });
    }
    const reply = await findCommunication(repo, ids.replyId);
    if (!reply) {
      throw inProgress();
    }
    if (reply.status === 'completed') {
      return { kind: 'replay', prompt, reply };
    }
    if (reply.status === 'not-done') {
      return { kind: 'failed', error: recordedFailure(reply) };
    }
  }
  throw new AppError('invalid_request', `This Idempotency-Key was tried ${MAX_ATTEMPTS} times without a reply that completed or failed; use a new key.`, {
    details: { param: 'Idempotency-Key' },
  });
}

/**
 * The error a `not-done` reply's client was answered with (chat-turn.ts `recordFailure`): its code and message, final.
 * A reply recorded without a code (by an older version) failed at its provider.
 */
export function recordedFailure(reply: Communication): AppError {
  const code = reply.statusReason?.coding?.find((coding) => coding.system === ERROR_CODE_SYSTEM)?.code;
  const message = reply.statusReason?.text ?? 'The LLM provider failed.';
  return new AppError(isAppErrorCode(code) ? code : 'upstream_error', message);
}

/** 409: a turn under this key has its prompt on record and no reply yet. */
export function inProgress(): AppError {
  return new AppError('conflict', 'A request with this Idempotency-Key is in progress; retry shortly for its result.', {
    isRetryable: true,
    retryAfterSeconds: 1,
  });
}
