import { readFile } from 'node:fs/promises';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { parseChatRequest } from '../chat/chat-request.ts';
import { AppError } from '../errors.ts';
import { buildOpenApiDocument, renderOpenApiFile } from './openapi-document.ts';

const document = buildOpenApiDocument();
const DOCUMENT_ID = 'https://fhirgate.invalid/openapi.json';

function compiler(): Ajv2020 {
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  ajv.addFormat('date', /^\d{4}-\d{2}-\d{2}$/);
  ajv.addSchema(document as object, DOCUMENT_ID);
  return ajv;
}

describe('the OpenAPI description', () => {
  test('docs/openapi.json is the description the plugin serves (npm run openapi writes it)', async () => {
    const committed = await readFile(new URL('../../docs/openapi.json', import.meta.url), 'utf8');
    expect(committed).toBe(renderOpenApiFile(document));
  });

  test('every schema compiles and every reference resolves', () => {
    const ajv = compiler();
    const pointers = Object.keys((document.components as { schemas: object }).schemas).map((name) => `/components/schemas/${name}`);
    for (const pointer of pointers) {
      expect([pointer, typeof ajv.getSchema(`${DOCUMENT_ID}#${pointer}`)]).toEqual([pointer, 'function']);
    }
    const references = [...JSON.stringify(document).matchAll(/"\$ref":"#([^"]+)"/g)].map((match) => match[1]);
    const resolve = (pointer: string): unknown =>
      pointer
        .split('/')
        .slice(1)
        .reduce<unknown>((node, segment) => (node as Record<string, unknown> | undefined)?.[segment.replaceAll('~1', '/').replaceAll('~0', '~')], document);
    expect(references.filter((pointer) => resolve(pointer) === undefined)).toEqual([]);
  });

  test('every operation has its own id, says how it is authenticated, and describes a success and its errors', () => {
    const operations = Object.entries(document.paths).flatMap(([path, item]) => Object.entries(item).map(([method, operation]) => ({ path, method, operation })));
    const ids = operations.map(({ operation }) => operation.operationId);
    expect(new Set(ids).size).toBe(ids.length);
    for (const { path, method, operation } of operations) {
      expect([path, method, Array.isArray(operation.security), '200' in operation.responses]).toEqual([path, method, true, true]);
    }
  });

  describe('the chat request body, generated from the zod schema the route validates with', () => {
    const validate = compiler().getSchema(`${DOCUMENT_ID}#/components/schemas/ChatCompletionRequest`);
    const accepted: Record<string, unknown>[] = [
      { messages: [{ role: 'user', content: 'hi' }] },
      { messages: [{ role: 'developer', content: [{ type: 'text', text: 'a' }] }, { role: 'user', content: 'hi', name: 'alice' }], model: 'openai/gpt-4o', stream: true, stream_options: { include_usage: true } },
      {
        messages: [
          { role: 'user', content: 'weather?' },
          { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{}' } }] },
          { role: 'tool', tool_call_id: 'call_1', content: 'sunny' },
        ],
        tools: [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object' }, strict: true } }],
        tool_choice: { type: 'function', function: { name: 'get_weather' } },
        response_format: { type: 'json_object', schema: { type: 'object' } },
        conversation_id: 'a1b2',
        patient_id: 'p-1',
        patient_context: 'summary',
        temperature: null,
        min_p: 0.1,
      },
    ];
    const refused: Record<string, unknown>[] = [
      {},
      { messages: [] },
      { messages: [{ role: 'user', content: 'hi' }], temperature: 3 },
      { messages: [{ role: 'user', content: 'hi' }], conversation_id: 'not an id' },
      { messages: [{ role: 'user', content: 'hi' }], functions: [{ name: 'f' }] },
      { messages: [{ role: 'function', name: 'f', content: 'x' }] },
      { messages: [{ role: 'user', content: 'hi', extra: 1 }] },
      { messages: [{ role: 'user', content: 'hi' }], response_format: { type: 'json_object', strict: true } },
    ];

    test.each(accepted)('a body the route accepts is valid: %j', (body) => {
      expect(parseChatRequest(body)).toBeDefined();
      expect(validate?.(body)).toBe(true);
    });

    test.each(refused)('a body the route refuses is not: %j', (body) => {
      expect(() => parseChatRequest(body)).toThrow(AppError);
      expect(validate?.(body)).toBe(false);
    });
  });
});
