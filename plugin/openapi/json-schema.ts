/**
 * The few JSON Schema (2020-12, as OpenAPI 3.1 takes it) builders the description is written with, so that each
 * answer's schema reads as its fields. Objects are closed (`additionalProperties: false`): an answer that grows a
 * field the description does not name fails the conformance test (test/openapi-conformance.test.ts).
 */

/** A JSON Schema object. */
export type JsonSchema = { readonly [keyword: string]: unknown };

/** A closed object; every property is required unless named in `optional`. */
export function objectOf(properties: Readonly<Record<string, JsonSchema>>, optional: readonly string[] = [], description?: string): JsonSchema {
  return {
    type: 'object',
    ...(description ? { description } : {}),
    properties,
    required: Object.keys(properties).filter((name) => !optional.includes(name)),
    additionalProperties: false,
  };
}

/** A reference to a schema of the description's components. */
export function ref(name: string, description?: string): JsonSchema {
  return description ? { $ref: `#/components/schemas/${name}`, description } : { $ref: `#/components/schemas/${name}` };
}

/** `schema`, or null. */
export function nullable(schema: JsonSchema): JsonSchema {
  return { anyOf: [schema, { type: 'null' }] };
}

/** An array of `items`. */
export function arrayOf(items: JsonSchema, description?: string): JsonSchema {
  return { type: 'array', items, ...(description ? { description } : {}) };
}

/** A string, with what it holds. */
export function text(description?: string): JsonSchema {
  return description ? { type: 'string', description } : { type: 'string' };
}

/** One of `values`. */
export function oneOfValues(values: readonly string[], description?: string): JsonSchema {
  return { type: 'string', enum: [...values], ...(description ? { description } : {}) };
}

/** Exactly `value`. */
export function constant(value: string | boolean): JsonSchema {
  return { const: value };
}

export const INTEGER: JsonSchema = { type: 'integer' };
export const NUMBER: JsonSchema = { type: 'number' };
export const BOOLEAN: JsonSchema = { type: 'boolean' };
export const NULL: JsonSchema = { type: 'null' };
/** Any JSON object. */
export const ANY_OBJECT: JsonSchema = { type: 'object' };
