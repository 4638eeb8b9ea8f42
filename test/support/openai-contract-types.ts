/**
 * The answers of OpenAI's API as the official `openai` package declares them: the types the contract test
 * (test/openai-contract.test.ts) turns into JSON Schemas. Only types: nothing here runs.
 */
import type { ChatCompletion, ChatCompletionChunk } from 'openai/resources/chat/completions';
import type { Model } from 'openai/resources/models';
import type { Response, ResponseStreamEvent } from 'openai/resources/responses/responses';
import type { ErrorObject } from 'openai/resources/shared';

/** `POST /v1/chat/completions`, JSON. */
export type ContractChatCompletion = ChatCompletion;
/** Each `data:` line of a chat-completions stream. */
export type ContractChatCompletionChunk = ChatCompletionChunk;
/** A Response object: `POST /v1/responses` and `GET /v1/responses/{id}`. */
export type ContractResponse = Response;
/** Each event of a Responses stream. */
export type ContractResponseStreamEvent = ResponseStreamEvent;
/** `GET /v1/models/{id}`. */
export type ContractModel = Model;
/** `GET /v1/models`: the SDK pages it; on the wire it is a list object. */
export interface ContractModelList {
  object: 'list';
  data: Model[];
}
/** Every error answer, and the in-band error of a chat-completions stream. */
export interface ContractErrorBody {
  error: ErrorObject;
}
