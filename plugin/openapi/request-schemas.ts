/**
 * The request bodies of the description, generated from the zod schemas the routes validate with (zod's
 * `toJSONSchema`, as the body goes in), so that the description cannot say other than what is checked. What zod's
 * schema cannot say is added here: OpenAI's rule that a top-level `null` counts as not given, that a refused field
 * takes only null, the chat request's top-level fields of a provider's own (`passThroughFields`), and what
 * fhirgate's own fields mean.
 */
import { z } from 'zod';
import { chatRequestSchema } from '../chat/chat-request.ts';
import { tokenRequestSchema } from '../devices/device-token-route.ts';
import { responsesSchema } from '../responses/responses-request.ts';
import { objectOf, nullable, text, type JsonSchema } from './json-schema.ts';

type MutableSchema = Record<string, unknown>;

/** What fhirgate's own fields of a turn mean (docs/api.md). */
const FHIRGATE_FIELDS: Readonly<Record<string, string>> = {
  conversation_id: "fhirgate's own: continues this conversation (the `conversation_id` of an earlier answer); its history is loaded from the records. Absent: a new conversation starts.",
  patient_id: "fhirgate's own: the patient the turn is about (a FHIR Patient id); the turn's records name it as their subject.",
  patient_context: "fhirgate's own: how the patient's chart is shared with the model (the project's default when absent).",
};

/** The request body of `POST /v1/chat/completions`. */
export function chatCompletionRequestSchema(): JsonSchema {
  const schema = fromZod(chatRequestSchema);
  const messages = (schema.properties as MutableSchema).messages as MutableSchema;
  const variants = ((messages.items as MutableSchema).oneOf as MutableSchema[]).filter((variant) => !isRole(variant, 'function'));
  (messages.items as MutableSchema).oneOf = variants;
  return {
    ...topLevel(schema),
    description:
      "OpenAI's chat-completions request. Every field is honoured, passed on to the provider, or refused (400 naming it); see docs/api.md for each field and provider. `null` counts as not given.",
    // A top-level field fhirgate does not know is a provider's own, passed on where the operator lists it.
    additionalProperties: {
      description:
        "A field of the provider's own (vLLM's `min_p`, ...): passed on as sent to a provider whose operator lists it in `passThroughFields`, refused (400 naming it) otherwise.",
    },
  };
}

/** The request body of `POST /v1/responses`. */
export function responsesRequestSchema(): JsonSchema {
  const schema = topLevel(fromZod(responsesSchema));
  const properties = schema.properties as MutableSchema;
  properties.input = {
    ...(properties.input as MutableSchema),
    description:
      'A string (one user message) or a list of input items: messages (`role`, `content` as a string or `input_text` / `output_text` parts), `function_call`, `function_call_output` and `item_reference` items (docs/api.md).',
  };
  return { ...schema, description: "OpenAI's Responses request; every field is honoured, passed on or refused (400 naming it), a field fhirgate does not know refused too (docs/api.md)." };
}

/** The request body of `POST /account/api/token/device/`. */
export function deviceTokenRequestSchema(): JsonSchema {
  return { ...fromZod(tokenRequestSchema), description: "A device's id and its pre-registered API key." };
}

/** The request body of `POST /graphql`: GraphQL over HTTP's, one document per request (no batches). */
export function graphqlRequestSchema(): JsonSchema {
  return objectOf(
    {
      query: { type: 'string', minLength: 1, description: "The GraphQL document: the spec's device dialect, or Medplum's." },
      operationName: nullable(text()),
      variables: nullable({ type: 'object' }),
    },
    ['operationName', 'variables'],
    'A GraphQL request (GraphQL over HTTP): one document per request.'
  );
}

/** The JSON Schema of what `schema` takes in, as a mutable object to add to. */
function fromZod(schema: z.ZodType): MutableSchema {
  const { $schema: _dialect, ...rest } = z.toJSONSchema(schema, { io: 'input', target: 'draft-2020-12', unrepresentable: 'any' }) as MutableSchema;
  return refusedAsNull(rest) as MutableSchema;
}

/** A field zod checks only by refusing every value but null is `{}` in its JSON Schema: null, said so. */
function refusedAsNull(value: unknown): unknown {
  if (Array.isArray(value)) {
    return value.map(refusedAsNull);
  }
  if (typeof value !== 'object' || value === null) {
    return value;
  }
  const entries = Object.entries(value).map(([key, inner]) => {
    if (key === 'properties' && typeof inner === 'object' && inner !== null) {
      return [
        key,
        Object.fromEntries(
          Object.entries(inner).map(([name, property]) => [
            name,
            isEmptySchema(property) ? { type: 'null', description: 'Not supported: refused (400 naming it) unless null (docs/api.md).' } : refusedAsNull(property),
          ])
        ),
      ];
    }
    return [key, refusedAsNull(inner)];
  });
  return Object.fromEntries(entries);
}

/** OpenAI takes null for "not given" on every optional top-level field; fhirgate's own fields described. */
function topLevel(schema: MutableSchema): MutableSchema {
  const required = new Set((schema.required as string[] | undefined) ?? []);
  const properties = Object.fromEntries(
    Object.entries(schema.properties as MutableSchema).map(([name, property]) => {
      const described = FHIRGATE_FIELDS[name] ? { description: FHIRGATE_FIELDS[name] } : {};
      if (required.has(name) || (property as MutableSchema).type === 'null') {
        return [name, { ...(property as MutableSchema), ...described }];
      }
      return [name, { anyOf: [property, { type: 'null' }], ...described }];
    })
  );
  return { ...schema, properties };
}

function isEmptySchema(value: unknown): boolean {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && Object.keys(value).length === 0;
}

function isRole(variant: MutableSchema, role: string): boolean {
  return ((variant.properties as MutableSchema | undefined)?.role as MutableSchema | undefined)?.const === role;
}
