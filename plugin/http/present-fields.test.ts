import { z } from 'zod';
import { presentFieldsParser } from './present-fields.ts';

// The kinds of field the request schemas have: transforms over unions, discriminated unions of strict objects,
// refinements, optional and required fields, a default, records and bounded arrays.
const content = z.union([z.string(), z.array(z.object({ type: z.string() }).passthrough())]).transform((value) => (typeof value === 'string' ? value : value.length));
const message = z.discriminatedUnion('role', [
  z.object({ role: z.literal('user'), content }).strict(),
  z.object({ role: z.literal('assistant'), content: content.nullish(), name: z.string().min(1).optional() }).strict(),
]);
const refused = z
  .unknown()
  .refine((value) => value === null, { message: 'is not supported' })
  .optional();
const fields = {
  messages: z.array(message).min(1, 'must not be empty'),
  model: z.string().min(1).optional(),
  stream: z.boolean().optional(),
  temperature: z.number().min(0).max(2).optional(),
  n: z.number().int().positive().default(1),
  metadata: z.record(z.string().max(8), z.string()).optional(),
  stop: z.union([z.string(), z.array(z.string()).max(4)]).optional(),
  audio: refused,
  options: z.object({ include_usage: z.boolean().nullish() }).strict().optional(),
};
const strict = z.object(fields).strict();
const loose = z.object(fields);

const user = { role: 'user', content: 'hello' };
const bodies: Record<string, unknown>[] = [
  { messages: [user] },
  { messages: [user], model: 'm', stream: true, temperature: 1.5, n: 3 },
  { messages: [user, { role: 'assistant', content: null }, { role: 'user', content: [{ type: 'text', text: 'x' }] }] },
  { messages: [user], metadata: { a: 'b' }, stop: ['x', 'y'], options: { include_usage: true } },
  {},
  { model: 'm' },
  { messages: [] },
  { messages: 'hello' },
  { messages: [{ role: 'tool', content: 'x' }] },
  { messages: [{ role: 'user', content: 5 }] },
  { messages: [{ role: 'user', content: 'x', extra: 1 }] },
  { messages: [user], temperature: 3 },
  { messages: [user], n: 0 },
  { messages: [user], metadata: { 'much too long': 'b' } },
  { messages: [user], stop: ['a', 'b', 'c', 'd', 'e'] },
  { messages: [user], audio: { voice: 'x' } },
  { messages: [user], options: { include_usage: true, other: 1 } },
  { messages: [user], unknown_field: 1 },
  { messages: [user], unknown_field: 1, another: 2 },
  { messages: [user], unknown_field: 1, temperature: 9 },
  { temperature: 9, model: '', messages: [] },
  { model: 5, messages: [user] },
];

describe('presentFieldsParser', () => {
  for (const [name, schema] of [
    ['a strict schema', strict],
    ['a schema that strips unknown keys', loose],
  ] as const) {
    it(`gives what safeParse gives, data and first issue, for ${name}`, () => {
      const parse = presentFieldsParser(schema);
      for (const body of bodies) {
        const expected = schema.safeParse(body);
        const actual = parse(body);
        const firstIssue = expected.success ? undefined : expected.error.issues[0];
        expect({ body, result: actual }).toEqual({
          body,
          result: expected.success
            ? { success: true, data: expected.data }
            : {
                success: false,
                issue: expect.objectContaining({
                  code: firstIssue?.code,
                  path: firstIssue?.path,
                  message: firstIssue?.message,
                  ...(firstIssue?.code === 'unrecognized_keys' ? { keys: firstIssue.keys } : {}),
                }),
              },
        });
      }
    });
  }

  it('fills in a default for a field the body does not give, as zod does', () => {
    const result = presentFieldsParser(strict)({ messages: [user] });
    expect(result).toEqual({ success: true, data: { messages: [{ role: 'user', content: 'hello' }], n: 1 } });
  });

  it('refuses a schema with checks of the whole object, which it would not run', () => {
    const checked = z.object({ a: z.string().optional(), b: z.string().optional() }).refine((value) => value.a !== value.b);
    expect(() => presentFieldsParser(checked)).toThrow('object-level checks');
  });
});
