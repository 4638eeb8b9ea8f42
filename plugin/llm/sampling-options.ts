/**
 * Reads the optional OpenAI request fields a client sent (`ChatModelRequest.extra`) into typed options, once, so
 * each adapter only decides which of them its provider takes and under which name. Unknown fields and values of
 * the wrong type are left out: a provider never receives a field fhirgate has not checked.
 */

/** The optional sampling fields fhirgate understands, in OpenAI's meaning. */
export interface SamplingOptions {
  /** `top_p`. */
  readonly topP?: number;
  /** `top_k`: not an OpenAI field, but Anthropic and Ollama take it. */
  readonly topK?: number;
  /** `stop`: OpenAI accepts one string or a list; always a non-empty list here. */
  readonly stop?: readonly string[];
  /** `seed`. */
  readonly seed?: number;
  /** `user`: the end-user identifier OpenAI uses for abuse monitoring. */
  readonly user?: string;
  /** `presence_penalty`. */
  readonly presencePenalty?: number;
  /** `frequency_penalty`. */
  readonly frequencyPenalty?: number;
  /** `logit_bias`: token id to bias. */
  readonly logitBias?: Readonly<Record<string, number>>;
  /** The type of `response_format`: plain text or a JSON object (JSON schemas are not passed on). */
  readonly responseFormat?: 'text' | 'json_object';
  /** `parallel_tool_calls`: whether the model may make several calls in one reply (OpenAI only; with tools only). */
  readonly parallelToolCalls?: boolean;
}

/** Reads the fields of `extra` that fhirgate understands; others, and values of the wrong type, are dropped. */
export function readSamplingOptions(extra: Readonly<Record<string, unknown>>): SamplingOptions {
  return {
    topP: readFiniteNumber(extra.top_p),
    topK: readInteger(extra.top_k),
    stop: readStop(extra.stop),
    seed: readInteger(extra.seed),
    user: typeof extra.user === 'string' && extra.user !== '' ? extra.user : undefined,
    presencePenalty: readFiniteNumber(extra.presence_penalty),
    frequencyPenalty: readFiniteNumber(extra.frequency_penalty),
    logitBias: readLogitBias(extra.logit_bias),
    responseFormat: readResponseFormat(extra.response_format),
    parallelToolCalls: typeof extra.parallel_tool_calls === 'boolean' ? extra.parallel_tool_calls : undefined,
  };
}

function readFiniteNumber(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isFinite(value) ? value : undefined;
}

function readInteger(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isSafeInteger(value) ? value : undefined;
}

function readStop(value: unknown): readonly string[] | undefined {
  if (typeof value === 'string') {
    return value === '' ? undefined : [value];
  }
  if (!Array.isArray(value)) {
    return undefined;
  }
  const sequences = value.filter((sequence): sequence is string => typeof sequence === 'string' && sequence !== '');
  return sequences.length > 0 ? sequences : undefined;
}

function readLogitBias(value: unknown): Readonly<Record<string, number>> | undefined {
  if (!isPlainObject(value)) {
    return undefined;
  }
  const bias: Record<string, number> = {};
  for (const [token, weight] of Object.entries(value)) {
    if (typeof weight !== 'number' || !Number.isFinite(weight)) {
      return undefined;
    }
    bias[token] = weight;
  }
  return bias;
}

function readResponseFormat(value: unknown): 'text' | 'json_object' | undefined {
  if (!isPlainObject(value)) {
    return undefined;
  }
  return value.type === 'text' || value.type === 'json_object' ? value.type : undefined;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
