/**
 * A request body checked against a zod object schema field by field, only the fields it has (and the required
 * ones): the same data and the same first issue as the schema's own `safeParse`, for a fraction of the cost.
 *
 * Why: the chat request's schema has some forty fields, nearly all optional, and a typical body gives four. zod's
 * object parse visits every field of the shape, present or not, and in a server, where each request finds zod's
 * code and schema objects out of the CPU's caches, that costs about 55 µs a request against 4 µs when the same
 * parse is repeated at once (measured in the standalone host: bench/findings.md, "Where a turn's CPU goes above the
 * floor's"). Visiting only the fields given halves it.
 *
 * Equivalence with `schema.safeParse(body)`, which present-fields.test.ts checks over a corpus of bodies:
 * - the fields are checked in the shape's order, so the first issue is the one zod reports first;
 * - a required field that is absent is checked as `undefined`, giving zod's own "expected ..., received
 *   undefined" issue at its path;
 * - a strict schema refuses unknown keys after the fields are checked, with zod's `unrecognized_keys` issue;
 * - the data holds the parsed value of each field given, and the default of an absent field that has one; an
 *   absent optional field stays absent, as in zod.
 * Object-level checks (`.refine` on the object itself) are not run: a schema with them must use `safeParse`.
 */
import type { z } from 'zod';

/** The outcome of {@link presentFieldsParser}'s parse: as zod's `safeParse`, with the first issue only. */
export type PresentFieldsResult<T> = { readonly success: true; readonly data: T } | { readonly success: false; readonly issue: z.core.$ZodIssue };

/** A parser for `schema`'s bodies, field by field; the schema's fields are read once, here. */
export function presentFieldsParser<S extends z.ZodObject>(schema: S): (body: Readonly<Record<string, unknown>>) => PresentFieldsResult<z.output<S>> {
  if (schema.def.checks?.length) {
    throw new Error('presentFieldsParser: the schema has object-level checks; use safeParse');
  }
  const shape = schema.shape as Readonly<Record<string, z.ZodType>>;
  const fields = Object.entries(shape);
  // Absent, a field is checked anyway when `undefined` is not a value of it (zod's issue for a missing field), or
  // when it makes one of `undefined` (a default, which zod's object fills in).
  const checkedWhenAbsent = new Set(
    fields
      .filter(([, field]) => {
        const absent = field.safeParse(undefined);
        return !absent.success || absent.data !== undefined;
      })
      .map(([name]) => name)
  );
  const strict = schema.def.catchall?._zod.def.type === 'never';
  return (body) => {
    const data: Record<string, unknown> = {};
    for (const [name, field] of fields) {
      const given = Object.hasOwn(body, name);
      if (!given && !checkedWhenAbsent.has(name)) {
        continue;
      }
      const result = field.safeParse(body[name]);
      if (!result.success) {
        const issue = result.error.issues[0];
        return { success: false, issue: { ...issue, path: [name, ...issue.path] } };
      }
      if (given || result.data !== undefined) {
        data[name] = result.data;
      }
    }
    if (strict) {
      const unknown = Object.keys(body).filter((name) => !Object.hasOwn(shape, name));
      if (unknown.length > 0) {
        const issue: z.core.$ZodIssueUnrecognizedKeys = { code: 'unrecognized_keys', keys: unknown, path: [], message: `Unrecognized key${unknown.length > 1 ? 's' : ''}: ${unknown.map((name) => `"${name}"`).join(', ')}`, input: body };
        return { success: false, issue };
      }
    }
    return { success: true, data: data as z.output<S> };
  };
}
