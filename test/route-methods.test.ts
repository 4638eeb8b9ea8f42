/**
 * Every path fhirgate serves answers every method in its own error body: a method the path does not serve is 405
 * with `Allow`, an unknown path under fhirgate's own is 404, never the host's 404 page or another surface's shape.
 */
import { startChatHost, type ChatHost } from './support/chat-host.ts';

describe('methods and paths fhirgate owns', () => {
  let chatHost: ChatHost;

  beforeAll(async () => {
    chatHost = await startChatHost({ plugin: { device_auth: { valid_keys: { 'sensor-1': '0123456789abcdef0123456789abcdef' }, jwt_secret: 'route-methods-test-signing-secret-0123456789', project_id: 'a-project' } } });
  });
  afterAll(() => chatHost.close());

  const ask = (method: string, path: string) => fetch(`${chatHost.host.url}${path.slice(1)}`, { method });

  test.each([
    ['GET', '/account/api/token/device/', 'POST'],
    ['GET', '/account/api/token/device', 'POST'],
    ['PUT', '/account/api/token/device/', 'POST'],
    ['GET', '/v1/chat/completions', 'POST'],
    ['DELETE', '/v1/chat/completions', 'POST'],
    ['POST', '/v1/models', 'GET'],
    ['POST', '/v1/usage', 'GET'],
    ['POST', '/v1/governance', 'GET'],
    ['GET', '/v1/responses', 'POST'],
    ['DELETE', '/v1/responses/resp_0b5e', 'GET'],
  ])('%s %s is 405 in the spec error body, Allow: %s', async (method, path, allowed) => {
    const response = await ask(method, path);
    expect(response.status).toBe(405);
    expect(response.headers.get('allow')).toBe(allowed);
    expect(response.headers.get('content-type')).toMatch(/^application\/json/);
    expect(await response.json()).toEqual({ error: { message: expect.stringContaining(`use ${allowed}`), type: 'invalid_request_error', code: 'method_not_allowed', param: null } });
  });

  test('GET /graphql is 405 as a GraphQL error, Allow: POST', async () => {
    const response = await ask('GET', '/graphql');
    expect(response.status).toBe(405);
    expect(response.headers.get('allow')).toBe('POST');
    expect(await response.json()).toEqual({ errors: [{ message: expect.stringContaining('use POST'), extensions: { code: 'METHOD_NOT_ALLOWED' } }] });
  });

  test.each([['POST', '/account/api/token/device/extra'], ['GET', '/v1/nothing-here']])('%s %s is 404 in the spec error body', async (method, path) => {
    const response = await ask(method, path);
    expect(response.status).toBe(404);
    expect(await response.json()).toEqual({ error: { message: expect.any(String), type: 'invalid_request_error', code: 'not_found', param: null } });
  });
});
