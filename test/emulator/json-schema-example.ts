// The emulated model's structured output: a JSON value that follows the request's schema, built the same way every
// time from the schema alone, so a test can predict it (`exampleOf`) and check what reached the client.

type Schema = Record<string, unknown>;

const MAX_DEPTH = 12;

/**
 * A value matching `schema`: `const` or the first `enum` value; the first of `anyOf` / `oneOf`; every property of an
 * object (each from its own schema); `minItems` items of an array (at least one); the minimum of a number or integer
 * (0 otherwise); `true`; null; for a string its `format`'s example or the property's name. `$ref`s into `$defs` and
 * `definitions` are followed.
 */
export function exampleOf(schema: Schema, root: Schema = schema, name = 'text', depth = 0): unknown {
  if (depth > MAX_DEPTH) {
    return null;
  }
  if ('const' in schema) {
    return schema.const;
  }
  if (Array.isArray(schema.enum) && schema.enum.length > 0) {
    return schema.enum[0];
  }
  if (typeof schema.$ref === 'string') {
    const target = resolveReference(root, schema.$ref);
    return target === undefined ? null : exampleOf(target, root, name, depth + 1);
  }
  for (const key of ['anyOf', 'oneOf', 'allOf']) {
    const options = schema[key];
    if (Array.isArray(options) && isSchema(options[0])) {
      return exampleOf(options[0], root, name, depth + 1);
    }
  }
  const type = Array.isArray(schema.type) ? schema.type.find((entry) => entry !== 'null') : schema.type;
  switch (type) {
    case 'object':
      return objectExample(schema, root, depth);
    case 'array': {
      const items = isSchema(schema.items) ? schema.items : {};
      const count = typeof schema.minItems === 'number' && schema.minItems > 1 ? schema.minItems : 1;
      return Array.from({ length: count }, () => exampleOf(items, root, name, depth + 1));
    }
    case 'integer':
    case 'number':
      return typeof schema.minimum === 'number' ? schema.minimum : typeof schema.exclusiveMinimum === 'number' ? schema.exclusiveMinimum + 1 : 0;
    case 'boolean':
      return true;
    case 'null':
      return null;
    case 'string':
      return stringExample(schema, name);
    default:
      return isSchema(schema.properties) ? objectExample(schema, root, depth) : name;
  }
}

function objectExample(schema: Schema, root: Schema, depth: number): Record<string, unknown> {
  const properties = isSchema(schema.properties) ? schema.properties : {};
  const value: Record<string, unknown> = {};
  for (const [key, property] of Object.entries(properties)) {
    value[key] = exampleOf(isSchema(property) ? property : {}, root, key, depth + 1);
  }
  return value;
}

const FORMAT_EXAMPLES: Readonly<Record<string, string>> = {
  date: '2025-01-01',
  'date-time': '2025-01-01T00:00:00Z',
  time: '00:00:00',
  email: 'someone@example.org',
  uri: 'https://example.org/',
  uuid: '00000000-0000-4000-8000-000000000000',
};

function stringExample(schema: Schema, name: string): string {
  const example = (typeof schema.format === 'string' ? FORMAT_EXAMPLES[schema.format] : undefined) ?? name;
  const minLength = typeof schema.minLength === 'number' ? schema.minLength : 0;
  return example.padEnd(minLength, 'x');
}

function resolveReference(root: Schema, reference: string): Schema | undefined {
  const match = /^#\/(\$defs|definitions)\/(.+)$/.exec(reference);
  const definitions = match ? root[match[1]] : undefined;
  const target = match && isSchema(definitions) ? definitions[match[2]] : undefined;
  return isSchema(target) ? target : undefined;
}

function isSchema(value: unknown): value is Schema {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
