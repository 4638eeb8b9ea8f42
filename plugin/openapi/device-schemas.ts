/**
 * The device token route's answer and `/graphql`'s, as the description's component schemas. Kept true by
 * test/openapi-conformance.test.ts.
 */
import { arrayOf, INTEGER, nullable, objectOf, oneOfValues, text, type JsonSchema } from './json-schema.ts';

/** The `extensions.code` values of fhirgate's own GraphQL errors (plugin/graphql/graphql-response.ts). */
const GRAPHQL_CODES = [
  'BAD_REQUEST',
  'GRAPHQL_PARSE_FAILED',
  'GRAPHQL_VALIDATION_FAILED',
  'UNAUTHENTICATED',
  'FORBIDDEN',
  'NOT_FOUND',
  'METHOD_NOT_ALLOWED',
  'RATE_LIMITED',
  'SERVICE_UNAVAILABLE',
  'INTERNAL_SERVER_ERROR',
];

/** The schemas of this file, by component name. */
export const DEVICE_SCHEMAS: Readonly<Record<string, JsonSchema>> = {
  DeviceToken: objectOf(
    {
      access: { type: 'string', pattern: '^[A-Za-z0-9_-]+\\.[A-Za-z0-9_-]+\\.[A-Za-z0-9_-]+$', description: 'The device token: a JWT (HS256) with `sub`, `entity_id`, `exp` and `is_device`.' },
      expires_in: { ...INTEGER, description: 'Seconds until it expires.' },
    },
    [],
    'A short-lived device token, for `/graphql`.'
  ),
  GraphqlResponse: {
    type: 'object',
    description: "A GraphQL response: `data`, and `errors` where there were any. fhirgate's own refusals carry `extensions.code`.",
    properties: {
      data: nullable({ type: 'object' }),
      errors: arrayOf({
        type: 'object',
        properties: {
          message: text(),
          locations: arrayOf(objectOf({ line: INTEGER, column: INTEGER })),
          path: arrayOf({ anyOf: [{ type: 'string' }, INTEGER] }),
          extensions: { type: 'object', properties: { code: { anyOf: [oneOfValues(GRAPHQL_CODES), text("Medplum's engine's own code")] } } },
        },
        required: ['message'],
      }),
    },
    additionalProperties: false,
  },
};
