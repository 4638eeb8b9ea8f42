// What a request asks of the reply beyond its text, read from each provider's fields and checked as that provider
// checks them: a structured format (the model then answers JSON following the schema, `json-schema-example.ts`),
// log probabilities, a reasoning effort, and OpenAI's `n` choices. A request the real API refuses gets its 400.
import { isPlainObject } from './behaviour.ts';
import type { NormalizedMessage } from './provider-format.ts';

/**
 * The structured output a request asks for; `schema` absent: any JSON object. A `json_object` with a schema is JSON
 * mode constrained by it, as OpenAI-compatible servers take it (llama.cpp's server, vLLM; `instructor`'s JSON_SCHEMA
 * mode sends it).
 */
export type NormalizedResponseFormat =
  | { type: 'json_object'; schema?: Record<string, unknown> }
  | { type: 'json_schema'; name?: string; schema?: Record<string, unknown>; strict?: boolean };

/** The reply's options, the same in every format. */
export interface OutputOptions {
  responseFormat?: NormalizedResponseFormat;
  /** Log probabilities of each token, with `top` alternatives. */
  logprobs?: { top: number };
  /** OpenAI's `reasoning_effort`, Anthropic's `output_config.effort`, Ollama's `think` (as text: `true`, `low`, ...). */
  reasoningEffort?: string;
  /** Choices to answer (OpenAI's `n`); 1 elsewhere. */
  choices: number;
}

const OPENAI_EFFORTS = new Set(['none', 'minimal', 'low', 'medium', 'high', 'xhigh', 'max']);
const ANTHROPIC_EFFORTS = new Set(['low', 'medium', 'high', 'xhigh', 'max']);
const OLLAMA_THINK_LEVELS = new Set(['low', 'medium', 'high']);

/** OpenAI's `response_format`, `logprobs`, `top_logprobs`, `reasoning_effort` and `n`; a string is the 400's message. */
export function readOpenAiOutputOptions(body: Record<string, unknown>, messages: readonly NormalizedMessage[]): OutputOptions | string {
  const options: OutputOptions = { choices: 1 };
  const format = body.response_format;
  if (format !== undefined && format !== null) {
    if (!isPlainObject(format) || !['text', 'json_object', 'json_schema'].includes(String(format.type))) {
      return "Invalid value for 'response_format.type': expected one of 'text', 'json_object' or 'json_schema'.";
    }
    if (format.type === 'json_object') {
      // OpenAI's own rule: JSON mode needs the word in the conversation, so the model is told to write JSON.
      if (!messages.some((message) => /json/i.test(message.content))) {
        return "'messages' must contain the word 'json' in some form, to use 'response_format' of type 'json_object'.";
      }
      if (format.schema !== undefined && !isPlainObject(format.schema)) {
        return "Invalid type for 'response_format.schema': expected an object.";
      }
      options.responseFormat = isPlainObject(format.schema) ? { type: 'json_object', schema: format.schema } : { type: 'json_object' };
    } else if (format.type === 'json_schema') {
      const definition = format.json_schema;
      if (!isPlainObject(definition) || typeof definition.name !== 'string') {
        return "Missing required parameter: 'response_format.json_schema.name'.";
      }
      if (definition.schema !== undefined && !isPlainObject(definition.schema)) {
        return "Invalid type for 'response_format.json_schema.schema': expected an object.";
      }
      options.responseFormat = {
        type: 'json_schema',
        name: definition.name,
        ...(definition.schema === undefined ? {} : { schema: definition.schema }),
        ...(typeof definition.strict === 'boolean' ? { strict: definition.strict } : {}),
      };
    }
  }
  if (body.top_logprobs !== undefined && body.top_logprobs !== null) {
    if (body.logprobs !== true) {
      return "Invalid value for 'top_logprobs': 'logprobs' must be set to true when 'top_logprobs' is used.";
    }
    if (typeof body.top_logprobs !== 'number' || !Number.isInteger(body.top_logprobs) || body.top_logprobs < 0 || body.top_logprobs > 20) {
      return "Invalid 'top_logprobs': expected an integer between 0 and 20.";
    }
  }
  if (body.logprobs === true) {
    options.logprobs = { top: typeof body.top_logprobs === 'number' ? body.top_logprobs : 0 };
  }
  if (body.reasoning_effort !== undefined && body.reasoning_effort !== null) {
    if (typeof body.reasoning_effort !== 'string' || !OPENAI_EFFORTS.has(body.reasoning_effort)) {
      return `Invalid value for 'reasoning_effort': expected one of ${[...OPENAI_EFFORTS].join(', ')}.`;
    }
    options.reasoningEffort = body.reasoning_effort;
  }
  if (body.n !== undefined && body.n !== null) {
    if (typeof body.n !== 'number' || !Number.isInteger(body.n) || body.n < 1 || body.n > 128) {
      return "Invalid 'n': expected an integer between 1 and 128.";
    }
    if (body.n > 1 && body.stream === true) {
      return 'The LLM emulator does not stream n > 1 choices.';
    }
    options.choices = body.n;
  }
  return options;
}

/** Anthropic's `output_config` (`format`, `effort`); a string is the 400's message. */
export function readAnthropicOutputOptions(body: Record<string, unknown>): OutputOptions | string {
  const options: OutputOptions = { choices: 1 };
  const config = body.output_config;
  if (config === undefined || config === null) {
    return options;
  }
  if (!isPlainObject(config)) {
    return 'output_config: Input should be a valid dictionary';
  }
  if (config.format !== undefined && config.format !== null) {
    if (!isPlainObject(config.format) || config.format.type !== 'json_schema') {
      return "output_config.format.type: Input should be 'json_schema'";
    }
    if (!isPlainObject(config.format.schema)) {
      return 'output_config.format.schema: Field required';
    }
    options.responseFormat = { type: 'json_schema', schema: config.format.schema };
  }
  if (config.effort !== undefined && config.effort !== null) {
    if (typeof config.effort !== 'string' || !ANTHROPIC_EFFORTS.has(config.effort)) {
      return `output_config.effort: Input should be ${[...ANTHROPIC_EFFORTS].map((effort) => `'${effort}'`).join(', ')}`;
    }
    options.reasoningEffort = config.effort;
  }
  return options;
}

/** Ollama's `format` (`json` or a schema), `think`, `logprobs` and `top_logprobs`; a string is the 400's message. */
export function readOllamaOutputOptions(body: Record<string, unknown>): OutputOptions | string {
  const options: OutputOptions = { choices: 1 };
  if (body.format !== undefined && body.format !== null && body.format !== '') {
    if (body.format === 'json') {
      options.responseFormat = { type: 'json_object' };
    } else if (isPlainObject(body.format)) {
      options.responseFormat = { type: 'json_schema', schema: body.format };
    } else {
      return `invalid format: ${JSON.stringify(body.format)}`;
    }
  }
  if (body.think !== undefined && body.think !== null) {
    if (typeof body.think !== 'boolean' && !(typeof body.think === 'string' && OLLAMA_THINK_LEVELS.has(body.think))) {
      return `invalid think value: ${JSON.stringify(body.think)} (must be true, false, "low", "medium" or "high")`;
    }
    options.reasoningEffort = String(body.think);
  }
  if (body.logprobs === true) {
    options.logprobs = { top: typeof body.top_logprobs === 'number' ? body.top_logprobs : 0 };
  }
  return options;
}
