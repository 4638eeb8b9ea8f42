/**
 * Fuzzing with fast-check: thousands of generated bodies and headers on each route. Whatever arrives, the answer
 * is never a 5xx, the process keeps answering, and a refused request stores nothing.
 */
import fc from 'fast-check';
import type { SecurityContext } from './context.ts';

const KIND = 'fuzzing';

export async function fuzzAttacks(context: SecurityContext, runsPerRoute: number): Promise<void> {
  const { log, host, tokenA, projectA, deviceTokenA } = context;
  const routes: [string, string, Record<string, string>][] = [
    ['POST /v1/chat/completions', 'v1/chat/completions', { Authorization: `Bearer ${tokenA}`, 'X-Project-ID': projectA.projectId }],
    ['POST /v1/responses', 'v1/responses', { Authorization: `Bearer ${tokenA}`, 'X-Project-ID': projectA.projectId }],
    ['POST /account/api/token/device/', 'account/api/token/device/', {}],
    ['POST /graphql', 'graphql', { Authorization: `Bearer ${deviceTokenA}` }],
  ];
  const body = fc.oneof(
    fc.jsonValue().map((value) => JSON.stringify(value)),
    fc.record({ messages: fc.array(fc.record({ role: fc.string(), content: fc.oneof(fc.string(), fc.integer(), fc.constant(null)) }), { maxLength: 5 }), model: fc.option(fc.string()) }).map((value) => JSON.stringify(value)),
    fc
      .record({
        input: fc.oneof(fc.string(), fc.array(fc.record({ type: fc.option(fc.string()), role: fc.string(), content: fc.oneof(fc.string(), fc.array(fc.record({ type: fc.string(), text: fc.jsonValue() }), { maxLength: 3 })), id: fc.option(fc.string()) }, { requiredKeys: [] }), { maxLength: 5 })),
        previous_response_id: fc.option(fc.oneof(fc.string(), fc.string().map((id) => `resp_${id}`))),
        text: fc.option(fc.record({ format: fc.jsonValue() })),
      })
      .map((value) => JSON.stringify(value)),
    fc.record({ device_id: fc.oneof(fc.string(), fc.integer()), api_key: fc.oneof(fc.string(), fc.constant(null)) }).map((value) => JSON.stringify(value)),
    fc.record({ query: fc.string(), variables: fc.option(fc.dictionary(fc.string(), fc.jsonValue())), operationName: fc.option(fc.string()) }).map((value) => JSON.stringify(value)),
    fc.string({ unit: 'binary', maxLength: 300 })
  );
  const headerValue = fc.string({ minLength: 0, maxLength: 40 }).filter((value) => /^[\t\x20-\x7e]*$/.test(value));
  const extraHeaders = fc.record(
    {
      'content-type': fc.constantFrom('application/json', 'text/plain', 'application/json; charset=latin1', 'multipart/form-data', ''),
      'x-project-id': headerValue,
      'idempotency-key': headerValue,
      authorization: fc.oneof(headerValue, fc.constant('Bearer '), fc.constant(`Bearer ${tokenA}`)),
    },
    { requiredKeys: [] }
  );

  for (const [name, path, baseHeaders] of routes) {
    let fiveHundreds = 0;
    let storedByRefused = 0;
    let runs = 0;
    await fc.assert(
      fc.asyncProperty(body, extraHeaders, async (payload, headers) => {
        runs++;
        const stored = await context.storedCommunications();
        const response = await fetch(`${host.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...baseHeaders, ...headers }, body: payload });
        await response.arrayBuffer();
        if (response.status >= 500) fiveHundreds++;
        if (response.status >= 400 && (await context.storedCommunications()) !== stored) storedByRefused++;
        return true;
      }),
      { numRuns: runsPerRoute, seed: 20261122 }
    );
    const alive = (await fetch(`${host.url}healthcheck`)).status === 200;
    await log.run(KIND, `${runs} generated requests on ${name}`, async () => ({
      status: fiveHundreds ? 500 : alive ? 200 : 0,
      letThrough: storedByRefused > 0 || !alive,
      note: `${fiveHundreds} answered 5xx, ${storedByRefused} refused requests stored something${alive ? '' : ', the host stopped answering'}`,
    }));
  }
}
