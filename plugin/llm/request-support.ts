/**
 * What the adapters' `checkRequest` share: the 400 that refuses a field a provider cannot honour, named as the
 * client named it (the chat-completions field), and the checks several providers make alike.
 */
import { AppError } from '../errors.ts';
import type { ChatGenerationOptions, ChatRequestShape, ChatTokenLogprob } from './chat-model.ts';

/** The chat-completions field each option comes from. */
const FIELD_NAMES: Readonly<Record<Exclude<keyof ChatGenerationOptions, 'openAiOnly' | 'vendorFields'>, string>> = {
  topP: 'top_p',
  topK: 'top_k',
  stop: 'stop',
  seed: 'seed',
  presencePenalty: 'presence_penalty',
  frequencyPenalty: 'frequency_penalty',
  logitBias: 'logit_bias',
  parallelToolCalls: 'parallel_tool_calls',
  responseFormat: 'response_format',
  logprobs: 'logprobs',
  reasoningEffort: 'reasoning_effort',
  endUser: 'user',
  store: 'store',
  metadata: 'metadata',
};

/** Who refuses: the provider's configured name and what it is (`Anthropic`, `Ollama`, ...). */
export interface ProviderLabel {
  readonly provider: string;
  readonly kind: string;
}

/** The 400 for a field the provider cannot honour; `why` says what it takes instead, if anything. */
export function refuseField(label: ProviderLabel, param: string, why = 'is not supported'): AppError {
  return new AppError('invalid_request', `Invalid request: ${param} ${why} by the provider '${label.provider}' (${label.kind}).`, { details: { param } });
}

/** Refuses the first of `names` the request sets. */
export function refuseOptions(label: ProviderLabel, request: ChatRequestShape, names: readonly Exclude<keyof ChatGenerationOptions, 'openAiOnly' | 'vendorFields'>[]): void {
  const options = request.options ?? {};
  const set = names.find((name) => options[name] !== undefined);
  if (set !== undefined) {
    throw refuseField(label, FIELD_NAMES[set]);
  }
}

/** Refuses the first field only OpenAI's API has (`service_tier`, `prediction`, ...). */
export function refuseOpenAiOnly(label: ProviderLabel, request: ChatRequestShape): void {
  const name = Object.keys(request.options?.openAiOnly ?? {})[0];
  if (name !== undefined) {
    throw refuseField(label, name, 'is an OpenAI field, not supported');
  }
}

/**
 * Refuses the first field of the request that fhirgate does not know and `passedOn` does not list (the provider's
 * `passThroughFields`; none for a provider that takes no such fields).
 */
export function refuseVendorFields(label: ProviderLabel, request: ChatRequestShape, passedOn: ReadonlySet<string> = new Set()): void {
  const name = Object.keys(request.options?.vendorFields ?? {}).find((field) => !passedOn.has(field));
  if (name !== undefined) {
    const param = name.slice(0, 64);
    throw new AppError(
      'invalid_request',
      `Invalid request: ${param}: is not a field fhirgate knows, and the provider '${label.provider}' (${label.kind}) is not set to receive it; an OpenAI-style provider receives such a field only when its operator lists it in the provider's passThroughFields (see the request fields in docs/api.md).`,
      { details: { param } },
    );
  }
}

/**
 * Refuses a `schema` beside `response_format: {type: "json_object"}`, the OpenAI-compatible servers' extension,
 * for a provider that has no such thing; `instead` says what the provider takes.
 */
export function refuseJsonObjectSchema(label: ProviderLabel, request: ChatRequestShape, instead: string): void {
  const format = request.options?.responseFormat;
  if (format?.type === 'json_object' && format.schema !== undefined) {
    throw refuseField(label, 'response_format.schema', `beside type json_object (an extension of OpenAI-compatible servers) is not supported; ${instead}`);
  }
}

/** Refuses OpenAI's participant names (`messages[i].name`), which the provider's messages cannot carry. */
export function refuseParticipantNames(label: ProviderLabel, request: ChatRequestShape): void {
  const index = request.messages.findIndex((message) => 'name' in message && message.name !== undefined);
  if (index >= 0) {
    throw refuseField(label, `messages.${index}.name`);
  }
}

/** A token's UTF-8 bytes, as OpenAI reports them next to its log probability. */
export function utf8Bytes(token: string): number[] {
  return [...Buffer.from(token, 'utf8')];
}

/** Log probabilities in the port's shape from a provider that reports `{token, logprob, top_logprobs?}`. */
export function toTokenLogprobs(
  entries: readonly { readonly token: string; readonly logprob: number; readonly top_logprobs?: readonly { readonly token: string; readonly logprob: number }[] }[]
): ChatTokenLogprob[] {
  return entries.map((entry) => ({
    token: entry.token,
    logprob: entry.logprob,
    bytes: utf8Bytes(entry.token),
    topLogprobs: (entry.top_logprobs ?? []).map((top) => ({ token: top.token, logprob: top.logprob, bytes: utf8Bytes(top.token) })),
  }));
}
