/**
 * The `/v1` Responses routes: `POST /responses` (a turn, JSON or streamed) and `GET /responses/{id}` (a stored
 * response, read under the caller's AccessPolicy). Responses are audit records: nothing deletes or cancels one.
 */
import express, { type Router } from 'express';
import { AppError, toAppError } from '../errors.ts';
import { authenticateCaller } from '../chat/authenticate-caller.ts';
import { handleTurn, type ChatServices } from '../chat/chat-completion.ts';
import { methodNotAllowed } from '../http/method-not-allowed.ts';
import { streamRecordedResponse } from './deliver-response.ts';
import { replyIdOfResponse, responseObject } from './response-object.ts';
import { LOGPROBS_INCLUDE } from './responses-request.ts';
import { readerFor, RESPONSES_API } from './responses-api.ts';
import { readRecordedResponse, requireReply } from './stored-responses.ts';

/** The Responses routes. */
export function createResponsesRoutes(services: ChatServices): Router {
  const router = express.Router();
  router.post('/responses', async (request, response) => {
    try {
      await handleTurn(services, RESPONSES_API, request, response);
    } catch (error) {
      throw inResponsesTerms(toAppError(error), request.body);
    }
  });
  router.get('/responses/:id', async (request, response) => {
    const caller = await authenticateCaller(services.host, request);
    const query = readRetrieveQuery(request.query);
    const replyId = replyIdOfResponse(request.params.id);
    if (replyId === undefined) {
      throw new AppError('not_found', `Response '${request.params.id.slice(0, 128)}' not found.`);
    }
    const reader = await readerFor(services, caller);
    const recorded = await readRecordedResponse(reader, await requireReply(reader, replyId, 'response_id'));
    const headers = { 'X-Conversation-ID': recorded.fields.conversationId };
    if (query.stream) {
      await streamRecordedResponse(response, recorded, headers, query.startingAfter);
      return;
    }
    response.set(headers).json(responseObject(recorded.fields));
  });
  router.all('/responses', methodNotAllowed(['POST']));
  router.all('/responses/:id', methodNotAllowed(['GET']));
  return router;
}

/** `GET /v1/responses/{id}`'s query: `stream` (and `starting_after`), `include`; anything else is refused by name. */
function readRetrieveQuery(query: Record<string, unknown>): { stream: boolean; startingAfter?: number } {
  const known = ['stream', 'starting_after', 'include', 'include[]', 'include_obfuscation'];
  const unknown = Object.keys(query).find((name) => !known.includes(name));
  if (unknown !== undefined) {
    throw invalid(unknown.slice(0, 64), 'is not a query parameter fhirgate knows.');
  }
  const include = [query.include, query['include[]']].flat().filter((value) => value !== undefined);
  if (include.some((value) => value === LOGPROBS_INCLUDE)) {
    throw invalid('include', 'fhirgate does not record log probabilities: a stored response has none.');
  }
  if (include.some((value) => value !== 'reasoning.encrypted_content')) {
    throw invalid('include', 'is not supported here.');
  }
  if (query.include_obfuscation !== undefined && query.include_obfuscation !== 'false') {
    throw invalid('include_obfuscation', 'fhirgate does not pad its stream.');
  }
  const stream = query.stream === 'true' ? true : query.stream === undefined || query.stream === 'false' ? false : undefined;
  if (stream === undefined) {
    throw invalid('stream', 'must be true or false.');
  }
  if (query.starting_after === undefined) {
    return { stream };
  }
  const startingAfter = Number(query.starting_after);
  if (!stream || typeof query.starting_after !== 'string' || !Number.isSafeInteger(startingAfter) || startingAfter < -1) {
    throw invalid('starting_after', 'must be a sequence number, with stream=true.');
  }
  return { stream, startingAfter };
}

/**
 * The steps a Responses turn shares with chat completions, and the providers' checks, name fields as chat
 * completions do: renamed here to the fields the client sent.
 */
const RENAMES: readonly (readonly [RegExp, string])[] = [
  [/^response_format(\.json_schema)?/, 'text.format'],
  [/^reasoning_effort$/, 'reasoning.effort'],
  [/^verbosity$/, 'text.verbosity'],
  [/^logprobs$/, 'include'],
  [/^max_(completion_)?tokens$/, 'max_output_tokens'],
  [/^tools\.(\d+)\.function\./, 'tools.$1.'],
  [/^messages(\..*)?$/, 'input'],
];

/** `error` with the field it names (and its message's mention of it) as the Responses API names it. */
export function inResponsesTerms(error: AppError, body: unknown): AppError {
  const param = error.details?.param;
  if (typeof param !== 'string') {
    return error;
  }
  const continues = typeof body === 'object' && body !== null && 'previous_response_id' in body ? 'previous_response_id' : 'conversation';
  const rule = RENAMES.find(([pattern]) => pattern.test(param));
  const renamed = param === 'conversation_id' ? continues : rule ? param.replace(rule[0], rule[1]) : param;
  if (renamed === param) {
    return error;
  }
  return new AppError(error.code, error.message.replace(param, renamed), {
    details: { ...error.details, param: renamed },
    cause: error.cause,
    isRetryable: error.isRetryable,
    retryAfterSeconds: error.retryAfterSeconds,
  });
}

function invalid(param: string, message: string): AppError {
  return new AppError('invalid_request', `Invalid request: ${param}: ${message}`, { details: { param } });
}
