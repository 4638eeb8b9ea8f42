/**
 * The Responses API's answers as the description's component schemas: the Response object, its output items and
 * the events of its stream, as plugin/responses/ builds them. Kept true by test/openapi-conformance.test.ts.
 */
import { arrayOf, BOOLEAN, constant, INTEGER, NUMBER, nullable, objectOf, oneOfValues, ref, text, ANY_OBJECT, type JsonSchema } from './json-schema.ts';

const ITEM_STATUS = oneOfValues(['in_progress', 'completed', 'incomplete']);

const tokenLogprob = objectOf({
  token: text(),
  logprob: NUMBER,
  bytes: nullable(arrayOf(INTEGER)),
  top_logprobs: arrayOf(objectOf({ token: text(), logprob: NUMBER, bytes: nullable(arrayOf(INTEGER)) })),
});

/** An event of the stream: its `type`, the fields of that type, and its `sequence_number`. */
function event(type: string, fields: Readonly<Record<string, JsonSchema>>, optional: readonly string[] = []): JsonSchema {
  return objectOf({ type: constant(type), ...fields, sequence_number: INTEGER }, optional);
}

const responseEvent = (type: string): JsonSchema => event(type, { response: ref('Response') });
const itemEvent = (type: string): JsonSchema => event(type, { output_index: INTEGER, item: ref('ResponseOutputItem') });
const partEvent = (type: string): JsonSchema => event(type, { item_id: text(), output_index: INTEGER, content_index: INTEGER, part: ref('ResponseOutputText') });

/** The schemas of this file, by component name. */
export const RESPONSES_SCHEMAS: Readonly<Record<string, JsonSchema>> = {
  ResponseOutputText: objectOf({ type: constant('output_text'), text: text(), annotations: { type: 'array', maxItems: 0 }, logprobs: arrayOf(tokenLogprob, 'Empty unless the request asked for log probabilities.') }),
  ResponseOutputItem: {
    description: "The reply's message (`msg_<reply id>`), or one of its function calls (`fc_<reply id>_<index>`).",
    oneOf: [
      objectOf({ id: { type: 'string', pattern: '^msg_' }, type: constant('message'), status: ITEM_STATUS, role: constant('assistant'), content: arrayOf(ref('ResponseOutputText')) }),
      objectOf({ id: { type: 'string', pattern: '^fc_' }, type: constant('function_call'), status: ITEM_STATUS, call_id: text(), name: text(), arguments: text() }),
    ],
  },
  ResponseUsage: objectOf({
    input_tokens: INTEGER,
    input_tokens_details: objectOf({ cached_tokens: INTEGER, cache_write_tokens: INTEGER }),
    output_tokens: INTEGER,
    output_tokens_details: objectOf({ reasoning_tokens: INTEGER }),
    total_tokens: INTEGER,
  }),
  Response: objectOf(
    {
      id: { type: 'string', pattern: '^resp_', description: '`resp_<id of the reply Communication>`.' },
      object: constant('response'),
      created_at: INTEGER,
      status: oneOfValues(['in_progress', 'completed', 'incomplete', 'failed', 'cancelled']),
      completed_at: INTEGER,
      background: constant(false),
      error: nullable(objectOf({ code: text(), message: text() })),
      incomplete_details: nullable(objectOf({ reason: oneOfValues(['max_output_tokens', 'content_filter']) })),
      model: text('`provider/model` of the model that answered.'),
      output: arrayOf(ref('ResponseOutputItem')),
      usage: nullable(ref('ResponseUsage')),
      conversation: objectOf({ id: text("fhirgate's conversation: send it as `conversation` to continue it.") }),
      access_programs: { type: 'null', description: "OpenAI's access programs are not served: always null." },
      instructions: nullable(text()),
      max_output_tokens: nullable(INTEGER),
      metadata: { type: 'object', additionalProperties: { type: 'string' } },
      parallel_tool_calls: BOOLEAN,
      previous_response_id: nullable(text()),
      reasoning: objectOf({ effort: nullable(text()), summary: { type: 'null' } }),
      store: BOOLEAN,
      temperature: nullable(NUMBER),
      text: objectOf({ format: ANY_OBJECT, verbosity: text() }, ['verbosity']),
      tool_choice: { anyOf: [text(), ANY_OBJECT] },
      tools: arrayOf(ANY_OBJECT),
      top_p: nullable(NUMBER),
      top_logprobs: nullable(INTEGER),
      truncation: oneOfValues(['auto', 'disabled']),
      user: text(),
      safety_identifier: nullable(text()),
      service_tier: text(),
    },
    ['completed_at', 'user', 'service_tier'],
    "OpenAI's Response object; fhirgate is its store: every response is recorded and readable with `GET /v1/responses/{id}`."
  ),
  ResponseStreamEvent: {
    description:
      'One event of a Responses stream: an `event: <type>` line and a `data:` line with this object, numbered from 0 (`sequence_number`); the stream ends after `response.completed`, `response.incomplete`, `response.failed` or `error`, with no `[DONE]`.',
    oneOf: [
      responseEvent('response.created'),
      responseEvent('response.in_progress'),
      responseEvent('response.completed'),
      responseEvent('response.incomplete'),
      responseEvent('response.failed'),
      itemEvent('response.output_item.added'),
      itemEvent('response.output_item.done'),
      partEvent('response.content_part.added'),
      partEvent('response.content_part.done'),
      event('response.output_text.delta', { item_id: text(), output_index: INTEGER, content_index: INTEGER, delta: text(), logprobs: arrayOf(tokenLogprob) }),
      event('response.output_text.done', { item_id: text(), output_index: INTEGER, content_index: INTEGER, text: text(), logprobs: arrayOf(tokenLogprob) }),
      event('response.function_call_arguments.delta', { item_id: text(), output_index: INTEGER, delta: text() }),
      event('response.function_call_arguments.done', { item_id: text(), output_index: INTEGER, name: text(), arguments: text() }),
      event('error', { code: text("fhirgate's error code (docs/api.md#errors)."), message: text(), param: nullable(text()) }),
    ],
  },
};
