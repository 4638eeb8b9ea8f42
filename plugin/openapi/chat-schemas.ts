/**
 * The answers of the chat-completions routes, the model list and the usage report, and the spec's error body, as
 * the description's component schemas: OpenAI's shapes (plugin/chat/wire-format.ts builds them) with fhirgate's
 * own fields. Kept true by test/openapi-conformance.test.ts, which validates real answers against them.
 */
import { HTTP_STATUS_BY_CODE } from '../errors.ts';
import { arrayOf, constant, INTEGER, NULL, NUMBER, nullable, objectOf, oneOfValues, ref, text, type JsonSchema } from './json-schema.ts';

const FINISH_REASONS = ['stop', 'length', 'content_filter', 'tool_calls'];

const conversationId = text("fhirgate's own: the conversation the exchange belongs to (the id of its root Communication); send it back as `conversation_id` to continue it.");
const communicationId = text("fhirgate's own: the id of the stored reply, the `ai-response` Communication (`GET /fhir/R4/Communication/{id}`).");

const topLogprob = objectOf({ token: text(), logprob: NUMBER, bytes: nullable(arrayOf(INTEGER)) });

/** The schemas of this file, by component name. */
export const CHAT_SCHEMAS: Readonly<Record<string, JsonSchema>> = {
  ErrorResponse: objectOf(
    {
      error: objectOf(
        {
          message: text('What went wrong, for a person; never holds keys, tokens or message text.'),
          type: oneOfValues(['invalid_request_error', 'authentication_error', 'permission_error', 'rate_limit_error', 'api_error']),
          code: oneOfValues(Object.keys(HTTP_STATUS_BY_CODE), "fhirgate's error code; docs/api.md#errors has what each means."),
          param: nullable(text('The request field at fault, named as the client sent it (`messages.0.content.1.type`); null when no one field is.')),
        }
      ),
    },
    [],
    "The spec's error body."
  ),
  Usage: objectOf({ prompt_tokens: INTEGER, completion_tokens: INTEGER, total_tokens: INTEGER }, [], 'Token counts as the provider reported them; zeros when it reported none.'),
  TokenLogprobs: objectOf({ content: arrayOf(objectOf({ token: text(), logprob: NUMBER, bytes: nullable(arrayOf(INTEGER)), top_logprobs: arrayOf(topLogprob) })), refusal: NULL }),
  ChatCompletion: objectOf(
    {
      id: { type: 'string', pattern: '^chatcmpl-' },
      object: constant('chat.completion'),
      created: INTEGER,
      model: text('`provider/model` of the model that answered.'),
      choices: {
        type: 'array',
        minItems: 1,
        maxItems: 1,
        items: objectOf(
          {
            index: INTEGER,
            message: objectOf(
              {
                role: constant('assistant'),
                content: nullable(text('The reply; null when the model only asked for calls.')),
                refusal: NULL,
                tool_calls: arrayOf(objectOf({ id: text(), type: constant('function'), function: objectOf({ name: text(), arguments: text() }) })),
              },
              ['tool_calls']
            ),
            finish_reason: oneOfValues(FINISH_REASONS),
            logprobs: nullable(ref('TokenLogprobs', 'Null unless the request asked for log probabilities.')),
          }
        ),
      },
      usage: ref('Usage'),
      conversation_id: conversationId,
      communication_id: communicationId,
    },
    [],
    "OpenAI's `chat.completion`, with fhirgate's `conversation_id` and `communication_id`."
  ),
  ChatCompletionChunk: objectOf(
    {
      id: { type: 'string', pattern: '^chatcmpl-' },
      object: constant('chat.completion.chunk'),
      created: INTEGER,
      model: text(),
      conversation_id: conversationId,
      communication_id: { ...communicationId, description: "fhirgate's own, on the last chunk (the one with `finish_reason`): the id of the stored reply." },
      choices: {
        type: 'array',
        maxItems: 1,
        description: 'One choice; empty on the usage chunk.',
        items: objectOf({
          index: INTEGER,
          delta: objectOf(
            {
              role: constant('assistant'),
              content: nullable(text()),
              refusal: NULL,
              tool_calls: arrayOf(
                objectOf(
                  { index: INTEGER, id: text(), type: constant('function'), function: objectOf({ name: text(), arguments: text() }, ['name']) },
                  ['id', 'type'],
                  "A fragment of a call: `id`, `type` and `function.name` on the call's first, then more `arguments`."
                )
              ),
            },
            ['role', 'content', 'refusal', 'tool_calls'],
            'First chunk: the role (and a call the reply opens with); then text or call fragments; the last: empty.'
          ),
          logprobs: nullable(ref('TokenLogprobs')),
          finish_reason: nullable(oneOfValues(FINISH_REASONS)),
        }),
      },
      usage: nullable(ref('Usage', 'Only with `stream_options.include_usage`: null on every chunk but the usage chunk.')),
    },
    ['communication_id', 'usage'],
    "One `data:` event of a chat-completions stream, OpenAI's `chat.completion.chunk` field for field (docs/api.md)."
  ),
  ChatCompletionStreamEvent: {
    description:
      "What each `data:` line of the stream holds: a chunk, or, after a failure once the stream began, the spec's error body (then the stream ends). A stream that completes ends with the line `data: [DONE]`.",
    anyOf: [ref('ChatCompletionChunk'), ref('ErrorResponse')],
  },
  Model: objectOf(
    {
      id: text('`provider/model`.'),
      object: constant('model'),
      created: INTEGER,
      owned_by: text('The operator of the server (option `operatorName`).'),
      fhirgate: objectOf({
        patient_data: oneOfValues(['cleared', 'refused', 'de-identified'], "What a turn about a patient does on this model in the caller's project."),
      }),
    },
    [],
    'A model the caller may use.'
  ),
  ModelList: objectOf({ object: constant('list'), data: arrayOf(ref('Model')) }),
  UsageTotals: usageTotals(),
  UsageReport: objectOf(
    {
      object: constant('usage_report'),
      project_id: text(),
      scope: oneOfValues(['project', 'readable'], "`project`: a project administrator's report, every reply; `readable`: the replies the caller's AccessPolicy reads."),
      start: { type: 'string', format: 'date' },
      end: { type: 'string', format: 'date' },
      group_by: arrayOf(oneOfValues(['user', 'model', 'day'])),
      data: arrayOf(ref('UsageTotals', 'One group: its `user`, `model` and `day`, those grouped by, and its sums.')),
      total: ref('UsageTotals'),
    },
    [],
    "The usage of the replies the caller may read: replies, tokens and cost per group (docs/governance.md#usage-report)."
  ),
  Governance: objectOf(
    {
      object: constant('governance'),
      project_id: text(),
      can_change: { type: 'boolean', description: "Whether the caller is a project administrator, who changes them with `POST /admin/projects/{id}/settings`." },
      settings: arrayOf(objectOf({ name: text(), value: nullable(text()) }, [], 'A governance entry of Project.setting as stored.')),
      model_access: nullable(oneOfValues(['all', 'access-policy'])),
      patient_data: nullable(
        objectOf({
          policy: oneOfValues(['refuse', 'de-identify']),
          tool_arguments: oneOfValues(['pseudonymize', 're-identify']),
          project_models: nullable(arrayOf(text())),
          models: arrayOf(objectOf({ id: text(), patient_data: oneOfValues(['cleared', 'refused', 'de-identified']) })),
        })
      ),
      budgets: arrayOf(
        objectOf({
          setting: text(),
          scope: oneOfValues(['project', 'user']),
          period: oneOfValues(['day', 'month']),
          measure: oneOfValues(['tokens', 'cost']),
          limit: NUMBER,
          spent: NUMBER,
          remaining: NUMBER,
          resets_at: { type: 'string', format: 'date-time' },
        })
      ),
      problems: arrayOf(objectOf({ setting: text(), message: text() })),
    },
    [],
    "The project's governance settings, for every member: never Project.secret (docs/governance.md#reading-the-settings-every-member)."
  ),
};

/** The sums of a usage group, with the group's own values where the report is grouped by them. */
function usageTotals(): JsonSchema {
  const sums = { replies: INTEGER, replies_without_usage: INTEGER, replies_estimated: INTEGER, prompt_tokens: INTEGER, completion_tokens: INTEGER, total_tokens: INTEGER, estimated_tokens: INTEGER, cost_usd: NUMBER };
  return objectOf({ user: text(), model: text(), day: { type: 'string', format: 'date' }, ...sums }, ['user', 'model', 'day']);
}

/** The error codes answered with `status`. */
export function errorCodesOf(status: number): string[] {
  return Object.entries(HTTP_STATUS_BY_CODE)
    .filter(([, codeStatus]) => codeStatus === status)
    .map(([code]) => code);
}
