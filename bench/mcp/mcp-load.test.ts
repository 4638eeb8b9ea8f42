import { answerProblem } from './mcp-load.ts';

const CALL = { method: 'POST', url: 'http://127.0.0.1/mcp', headers: {}, body: '{}' } as const;
const READ = { method: 'GET', url: 'http://127.0.0.1/fhir/R4/Observation/1', headers: {} } as const;

describe('answerProblem: what the MCP load counts as an error', () => {
  test('a tool result, as JSON or as one SSE event, is a success, even when the records quote "isError"', () => {
    const text = JSON.stringify({ records: [{ note: '"isError":true' }] });
    expect(answerProblem(CALL, 200, JSON.stringify({ jsonrpc: '2.0', id: 1, result: { content: [{ type: 'text', text }] } }))).toBeUndefined();
    expect(answerProblem(CALL, 200, `event: message\ndata: ${JSON.stringify({ jsonrpc: '2.0', id: 1, result: { content: [] } })}\n\n`)).toBeUndefined();
  });

  test('a refusal (a tool error), a JSON-RPC error and a status other than 200 are errors, never fast answers', () => {
    expect(answerProblem(CALL, 200, JSON.stringify({ jsonrpc: '2.0', id: 1, result: { content: [{ type: 'text', text: 'refused' }], isError: true } }))).toMatch(/tool error/);
    expect(answerProblem(CALL, 200, JSON.stringify({ jsonrpc: '2.0', id: 1, error: { code: -32602, message: 'Tool x not found' } }))).toMatch(/no JSON-RPC result/);
    expect(answerProblem(CALL, 429, '{}')).toMatch(/status 429/);
    expect(answerProblem(READ, 403, '{}')).toMatch(/status 403/);
    expect(answerProblem(READ, 200, '{"resourceType":"Observation"}')).toBeUndefined();
  });
});
