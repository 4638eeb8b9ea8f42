/**
 * Request bodies and unauthenticated work (OWASP API4, API8): on every route of the standalone host, a body that is
 * not JSON, one over the route's size and one nested 5,000 levels deep are each refused with the route's own error
 * shape and status (400, 413, 400 naming the nesting), never HTML, never a 5xx, and never echoed or printed (a
 * client secret in a malformed body appears in no log line and nowhere on stderr). A route with a bearer token
 * answers 401 without waiting for the body; the routes that must read a body before anyone is known (the device
 * token exchange, OAuth's token endpoint) hold a bounded number of places, and the next request gets 429 at once.
 */
import { randomUUID } from 'node:crypto';
import { ensureAdminClient } from '../plugin/hosts/standalone/admin-client.ts';
import type { SecurityContext } from './context.ts';
import { sendWithBodyHeldBack, type HeldRequest } from '../test/support/raw-http.ts';
import type { AttackOutcome } from './suite.ts';

const BODIES = 'request bodies';
const UNAUTHENTICATED = 'unauthenticated work';
/** The defaults the suite's host runs with (plugin options, the standalone host's options). */
export const INPUT_LIMITS = { maxJsonDepth: 64, maxUnauthenticatedRequests: 64, smallBodyBytes: 16 * 1024, largeBodyBytes: 1024 * 1024 };
/** Stands for a client secret in a body that does not parse: it must never come back, nor reach a log. */
export const SECRET_IN_BODY = 'client-secret-in-a-malformed-body-7f3a9c';

type Shape = 'openai' | 'oauth' | 'outcome' | 'graphql';

interface BodyRoute {
  readonly name: string;
  readonly method: string;
  readonly path: string;
  readonly headers: Record<string, string>;
  readonly shape: Shape;
  readonly maxBytes: number;
  /** A body the route would read, with `extra` (JSON) as one more field. */
  readonly body: (extra: string) => string;
  /** No route serves it: whatever the body, 404. */
  readonly unserved?: boolean;
}

export async function inputAttacks(context: SecurityContext): Promise<void> {
  const { log, host, projectA, tokenA, deviceTokenA } = context;
  // An administrator of project A: the admin API reads the body only for one.
  const adminIds = { clientId: randomUUID(), membershipId: randomUUID() };
  await ensureAdminClient(host.store, projectA.projectId, adminIds);
  const adminToken = await host.accessTokenFor(adminIds.membershipId);
  const json = { 'Content-Type': 'application/json' };
  const { smallBodyBytes: small, largeBodyBytes: large } = INPUT_LIMITS;
  const routes: BodyRoute[] = [
    { name: 'POST /oauth2/token', method: 'POST', path: 'oauth2/token', headers: json, shape: 'oauth', maxBytes: small, body: (extra) => `{"grant_type":"client_credentials","client_id":"x","client_secret":"y","extra":${extra}}` },
    { name: 'POST /auth/method', method: 'POST', path: 'auth/method', headers: json, shape: 'outcome', maxBytes: small, body: (extra) => `{"email":"nobody@example.org","extra":${extra}}` },
    { name: 'POST /auth/login', method: 'POST', path: 'auth/login', headers: json, shape: 'outcome', maxBytes: small, body: (extra) => `{"email":"nobody@example.org","password":"wrong","extra":${extra}}` },
    { name: 'POST /auth/profile', method: 'POST', path: 'auth/profile', headers: json, shape: 'outcome', maxBytes: small, body: (extra) => `{"login":"x","profile":"y","extra":${extra}}` },
    {
      name: 'POST /admin/projects/:id/invite',
      method: 'POST',
      path: `admin/projects/${projectA.projectId}/invite`,
      headers: { ...json, Authorization: `Bearer ${adminToken}` },
      shape: 'outcome',
      maxBytes: large,
      body: (extra) => `{"resourceType":"Practitioner","firstName":"Eve","lastName":"Input","email":"eve@example.org","extra":${extra}}`,
    },
    { name: 'POST /fhir/R4/Patient', method: 'POST', path: 'fhir/R4/Patient', headers: { 'Content-Type': 'application/fhir+json', Authorization: `Bearer ${tokenA}` }, shape: 'outcome', maxBytes: large, body: (extra) => `{"resourceType":"Patient","extra":${extra}}` },
    {
      name: 'POST /v1/chat/completions',
      method: 'POST',
      path: 'v1/chat/completions',
      headers: { ...json, Authorization: `Bearer ${tokenA}`, 'X-Project-ID': projectA.projectId },
      shape: 'openai',
      maxBytes: large,
      body: (extra) => `{"messages":[{"role":"user","content":"Hello"}],"metadata":${extra}}`,
    },
    {
      name: 'POST /v1/responses',
      method: 'POST',
      path: 'v1/responses',
      headers: { ...json, Authorization: `Bearer ${tokenA}`, 'X-Project-ID': projectA.projectId },
      shape: 'openai',
      maxBytes: large,
      body: (extra) => `{"input":"Hello","metadata":${extra}}`,
    },
    { name: 'POST /account/api/token/device/', method: 'POST', path: 'account/api/token/device/', headers: json, shape: 'openai', maxBytes: small, body: (extra) => `{"device_id":"sec-input-device","api_key":"x","extra":${extra}}` },
    { name: 'POST /graphql', method: 'POST', path: 'graphql', headers: { ...json, Authorization: `Bearer ${deviceTokenA}` }, shape: 'graphql', maxBytes: large, body: (extra) => `{"query":"{ __typename }","variables":{"extra":${extra}}}` },
    { name: 'POST to a path nobody serves', method: 'POST', path: 'no/such/route', headers: json, shape: 'outcome', maxBytes: large, body: (extra) => `{"extra":${extra}}`, unserved: true },
    { name: 'PUT /oauth2/token (a method nobody serves)', method: 'PUT', path: 'oauth2/token', headers: json, shape: 'outcome', maxBytes: small, body: (extra) => `{"extra":${extra}}`, unserved: true },
  ];

  const printed = captureStderr();
  try {
    const malformed = `{"grant_type":"client_credentials","client_id":"x","client_secret":"${SECRET_IN_BODY}"`;
    const deep = `${'['.repeat(5000)}1${']'.repeat(5000)}`;
    for (const route of routes) {
      const send = (body: string, headers: Record<string, string> = route.headers) => fetch(`${host.url}${route.path}`, { method: route.method, headers, body });
      await log.run(BODIES, `a body that is not JSON (with a client secret) on ${route.name}`, async () => {
        const response = await send(malformed);
        const text = await response.text();
        if (text.includes(SECRET_IN_BODY)) return { status: response.status, letThrough: true, note: 'the body was echoed' };
        return answeredAs(response, text, route.shape, route.unserved ? 404 : 400);
      });
      await log.run(BODIES, `a body over the route's ${route.maxBytes / 1024} KiB on ${route.name}`, async () => {
        const response = await send(route.body(JSON.stringify('x'.repeat(route.maxBytes + 16 * 1024))));
        return answeredAs(response, await response.text(), route.shape, route.unserved ? 404 : 413);
      });
      await log.run(BODIES, `a field nested 5,000 levels deep on ${route.name}`, async () => {
        const response = await send(route.body(deep));
        const text = await response.text();
        const outcome = answeredAs(response, text, route.shape, route.unserved ? 404 : 400);
        const message = messageOf(text, route.shape) ?? '';
        return outcome.letThrough || route.unserved || /nest|deep/i.test(message) ? outcome : { status: response.status, letThrough: true, note: `refused for another reason: ${message.slice(0, 120)}` };
      });
    }
    await log.run(BODIES, 'a form body over 16 KiB on POST /oauth2/token', async () => {
      const response = await fetch(`${host.url}oauth2/token`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
        body: `grant_type=client_credentials&client_id=x&client_secret=${'y'.repeat(small + 1024)}`,
      });
      return answeredAs(response, await response.text(), 'oauth', 413);
    });
  } finally {
    printed.restore();
  }
  await log.run(BODIES, `the client secret of a malformed body on stderr (${printed.lines.length} lines written)`, async () => {
    const leaked = printed.lines.filter((line) => line.includes(SECRET_IN_BODY)).length;
    return { status: 0, letThrough: leaked > 0, note: leaked ? `${leaked} lines` : undefined };
  });

  await heldBodyAttacks(context);
  await placesAttacks(context);
}

/** A route with a bearer token answers 401 from the headers: it never waits for the body of a caller it refuses. */
async function heldBodyAttacks(context: SecurityContext): Promise<void> {
  const { log, host, projectA } = context;
  const cases: [string, string, Record<string, string>][] = [
    ['POST /fhir/R4/Patient without a token', 'fhir/R4/Patient', { 'Content-Type': 'application/fhir+json' }],
    ['POST /fhir/R4/Patient with a token that is not one', 'fhir/R4/Patient', { 'Content-Type': 'application/fhir+json', Authorization: 'Bearer not-a-token' }],
    ['POST /v1/chat/completions without a token', 'v1/chat/completions', { 'Content-Type': 'application/json', 'X-Project-ID': projectA.projectId }],
    ['POST /v1/responses without a token', 'v1/responses', { 'Content-Type': 'application/json', 'X-Project-ID': projectA.projectId }],
    ['POST /graphql without a token', 'graphql', { 'Content-Type': 'application/json' }],
    ['POST /admin/projects/:id/invite without a token', `admin/projects/${projectA.projectId}/invite`, { 'Content-Type': 'application/json' }],
  ];
  for (const [name, path, headers] of cases) {
    await log.run(UNAUTHENTICATED, `${name}, its 900 KB body held back`, async () => {
      const held = await sendWithBodyHeldBack(host.url, 'POST', `/${path}`, headers, 900_000, '{"resourceType":"Patient","name":[{"family":"');
      try {
        const status = await held.answered(5000);
        if (status === undefined) return { status: 0, letThrough: true, note: 'no answer while the body was held back: it was read before the token was checked' };
        return { status, letThrough: status !== 401, note: status === 401 ? undefined : 'expected 401' };
      } finally {
        held.socket.destroy();
      }
    });
  }
}

/** The routes that read a body before anyone is known hold a bounded number of places. */
async function placesAttacks(context: SecurityContext): Promise<void> {
  const { log, host } = context;
  const limit = INPUT_LIMITS.maxUnauthenticatedRequests;
  const routes: [string, string, string, Shape][] = [
    ['POST /account/api/token/device/', 'account/api/token/device/', '{"device_id":"sec-unknown-device","api_key":"guess"}', 'openai'],
    ['POST /oauth2/token', 'oauth2/token', '{"grant_type":"client_credentials","client_id":"nobody","client_secret":"guess"}', 'oauth'],
  ];
  for (const [name, path, body, shape] of routes) {
    const send = () => fetch(`${host.url}${path}`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body });
    const held: HeldRequest[] = [];
    try {
      for (let index = 0; index < limit; index++) {
        held.push(await sendWithBodyHeldBack(host.url, 'POST', `/${path}`, { 'Content-Type': 'application/json' }, 200, '{"device_id":"'));
      }
      await new Promise((resolve) => setTimeout(resolve, 300));
      await log.run(UNAUTHENTICATED, `${name}: one more while ${limit} unauthenticated requests hold their bodies back`, async () => {
        const response = await send();
        const text = await response.text();
        const refusedHere = response.status === 429 && response.headers.get('retry-after') !== null && /unauthenticated/i.test(messageOf(text, shape) ?? '');
        return refusedHere ? { status: 429, letThrough: false } : { status: response.status, letThrough: true, note: 'answered: the unauthenticated requests in flight are not bounded' };
      });
    } finally {
      held.forEach((request) => request.socket.destroy());
    }
    await log.run(UNAUTHENTICATED, `${name}: the places come back once the held requests go`, async () => {
      let last: { status: number; text: string } = { status: 0, text: '' };
      for (let attempt = 0; attempt < 20; attempt++) {
        const response = await send();
        last = { status: response.status, text: await response.text() };
        if (!(last.status === 429 && /unauthenticated/i.test(messageOf(last.text, shape) ?? ''))) break;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      const stillRefused = last.status === 429 && /unauthenticated/i.test(messageOf(last.text, shape) ?? '');
      return { status: last.status, letThrough: stillRefused, note: stillRefused ? 'the route stays refused: places were not given back' : undefined };
    });
  }
}

/** The answer has `status` and the route's own error shape (JSON, not Express's HTML page). */
function answeredAs(response: Response, text: string, shape: Shape, status: number): AttackOutcome {
  // Another status means the body was read and acted on (or the server failed on it).
  if (response.status !== status) return { status: response.status, letThrough: true, note: `expected ${status}` };
  if (messageOf(text, shape) === undefined) return { status: response.status, letThrough: true, note: `not the ${shape} error shape: ${text.slice(0, 80)}` };
  return { status: response.status, letThrough: false };
}

/** The human-readable message of an error body of `shape`, or undefined when the body is not of that shape. */
export function messageOf(text: string, shape: Shape): string | undefined {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return undefined;
  }
  const record = (value: unknown): Record<string, unknown> | undefined => (typeof value === 'object' && value !== null ? (value as Record<string, unknown>) : undefined);
  const top = record(body);
  switch (shape) {
    case 'openai': {
      const error = record(top?.error);
      return typeof error?.message === 'string' && typeof error.type === 'string' && typeof error.code === 'string' ? error.message : undefined;
    }
    case 'oauth':
      return typeof top?.error === 'string' && typeof top.error_description === 'string' ? top.error_description : undefined;
    case 'outcome': {
      const issue = record(Array.isArray(top?.issue) ? top.issue[0] : undefined);
      return top?.resourceType === 'OperationOutcome' && issue ? String(record(issue.details)?.text ?? issue.diagnostics ?? '') : undefined;
    }
    case 'graphql': {
      const error = record(Array.isArray(top?.errors) ? top.errors[0] : undefined);
      return typeof error?.message === 'string' && typeof record(error.extensions)?.code === 'string' ? error.message : undefined;
    }
  }
}

/** Everything written to stderr (Express's default error handler prints there) until `restore`. */
function captureStderr(): { readonly lines: string[]; restore(): void } {
  const lines: string[] = [];
  const write = process.stderr.write.bind(process.stderr);
  process.stderr.write = ((chunk: string | Uint8Array, ...rest: unknown[]) => {
    lines.push(typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8'));
    return (write as (...args: unknown[]) => boolean)(chunk, ...rest);
  }) as typeof process.stderr.write;
  return { lines, restore: () => void (process.stderr.write = write) };
}
