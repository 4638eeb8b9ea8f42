/**
 * Resource consumption (OWASP API4): oversized bodies, too many or too long messages, a `max_tokens` over the cap,
 * GraphQL documents one step over each bound (and exactly at it, accepted), batching, and more concurrent streams
 * than a caller may hold. Each is refused before anything is stored or sent to the provider.
 */
import type { SecurityContext } from './context.ts';
import { accepted, refused } from './suite.ts';

const KIND = 'resource consumption';
/** The plugin's defaults (options.ts, graphql/document-limits.ts) the suite's host runs with. */
export const LIMITS = { maxBodyBytes: 1024 * 1024, maxMessages: 1000, maxTokens: 32_768, maxConcurrentStreams: 8, maxConcurrentTurns: 16, graphqlDepth: 12, graphqlFields: 100 };

export async function consumptionAttacks(context: SecurityContext): Promise<void> {
  const { log, host, tokenA, projectA } = context;
  const headers = { 'X-Project-ID': projectA.projectId };
  const unchanged = async (attack: () => Promise<Response>): Promise<{ status: number; sideEffect?: string }> => {
    const stored = await context.storedCommunications();
    const calls = context.providerCalls();
    const response = await attack();
    await response.arrayBuffer();
    const sideEffect = (await context.storedCommunications()) !== stored ? 'stored' : context.providerCalls() !== calls ? 'provider called' : undefined;
    return { status: response.status, sideEffect };
  };
  const message = (content: string) => ({ role: 'user', content });

  const chatCases: [string, unknown, number[]][] = [
    ['a body over maxBodyBytes', { messages: [message('x'.repeat(LIMITS.maxBodyBytes + 10))] }, [413]],
    ['a 1 MB message', { messages: [message('y'.repeat(1024 * 1024))] }, [413]],
    ['10,000 messages', { messages: Array.from({ length: 10_000 }, (_, index) => message(`m${index}`)) }, [400, 413]],
    ['one message over maxMessages', { messages: Array.from({ length: LIMITS.maxMessages + 1 }, () => message('m')) }, [400]],
    ['max_tokens over the cap', { messages: [message('long please')], max_tokens: LIMITS.maxTokens + 1 }, [400]],
    ['max_tokens of 2^53', { messages: [message('long please')], max_tokens: Number.MAX_SAFE_INTEGER }, [400]],
    ['max_completion_tokens over the cap', { messages: [message('long please')], max_completion_tokens: LIMITS.maxTokens + 1 }, [400]],
    ['deeply nested JSON', `${'{"a":'.repeat(5000)}1${'}'.repeat(5000)}`, [400]],
  ];
  for (const [name, body, expected] of chatCases) {
    await log.run(KIND, name, async () => {
      const { status, sideEffect } = await unchanged(() => context.chat(tokenA, body, headers));
      return refused(status, expected, sideEffect);
    });
  }
  await log.run(KIND, 'exactly maxMessages messages are accepted', async () => {
    const calls = context.providerCalls();
    const response = await context.chat(tokenA, { messages: Array.from({ length: LIMITS.maxMessages }, () => message('m')) }, headers);
    await response.arrayBuffer();
    // Answered from every message: the provider was given all of them, none dropped to fit.
    const sent = context.providerCalls() === calls + 1 ? context.emulator.received.at(-1)?.messages.filter((item) => item.role === 'user').length : 0;
    return accepted(response.status, response.status === 200 && sent === LIMITS.maxMessages, `the limit itself was refused, or ${sent} of its messages reached the provider`);
  });

  // More streams than a caller may hold: the emulator keeps them open; the one over the limit is a 429.
  await log.run(KIND, `stream ${LIMITS.maxConcurrentStreams + 1} at once from one caller`, async () => {
    const slow = `Hold on. [emulator-behaviour ${JSON.stringify({ latencyMs: 5000 })}]`;
    const callsBefore = context.providerCalls();
    const held = Array.from({ length: LIMITS.maxConcurrentStreams }, () => context.chat(tokenA, { stream: true, messages: [message(slow)] }, headers));
    // Every held stream has its place once its request reached the provider, however busy the machine is.
    for (const deadline = Date.now() + 4000; context.providerCalls() - callsBefore < LIMITS.maxConcurrentStreams && Date.now() < deadline; ) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    const { status, sideEffect } = await unchanged(() => context.chat(tokenA, { stream: true, messages: [message('One more')] }, headers));
    await Promise.all((await Promise.all(held)).map((response) => response.arrayBuffer()));
    return refused(status, [429], sideEffect);
  });

  // More non-streaming turns than a caller may have running: the ones over the limit are 429, and never reach the provider.
  await log.run(KIND, `${LIMITS.maxConcurrentTurns * 4} non-streaming requests at once from one caller`, async () => {
    const slow = `Hold on. [emulator-behaviour ${JSON.stringify({ latencyMs: 1000 })}]`;
    const callsBefore = context.providerCalls();
    const responses = await Promise.all(Array.from({ length: LIMITS.maxConcurrentTurns * 4 }, () => context.chat(tokenA, { messages: [message(slow)] }, headers)));
    await Promise.all(responses.map((response) => response.arrayBuffer()));
    const limited = responses.filter((response) => response.status === 429).length;
    const called = context.providerCalls() - callsBefore;
    return called > LIMITS.maxConcurrentTurns || limited < responses.length - LIMITS.maxConcurrentTurns
      ? { status: 200, letThrough: true, note: `${called} reached the provider, ${limited} refused with 429` }
      : { status: 429, letThrough: false, note: undefined };
  });

  // GraphQL bounds, with the device's token, checked before any resolver runs (nothing is created). A refusal must
  // name the bound: a document refused for another reason (the schema) would prove nothing.
  const graphql = async (body: unknown): Promise<{ status: number; text: string }> => {
    const response = await fetch(`${host.url}graphql`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${context.deviceTokenA}` },
      body: JSON.stringify(body),
    });
    return { status: response.status, text: await response.text() };
  };
  // GraphQL over HTTP answers a refused document with its errors (and no data), as 200 or 400.
  const refusedFor = (answer: { status: number; text: string }, reason: string) => {
    const body = JSON.parse(answer.text) as { data?: unknown; errors?: { message: string }[] };
    const named = body.errors?.some((error) => error.message.includes(reason)) && (body.data === undefined || body.data === null);
    return named ? refused(answer.status, [200, 400]) : { status: answer.status, letThrough: true, note: `not refused for ${reason}` };
  };
  // `depth` levels below the operation's root field.
  const nested = (depth: number): string => `query { ${'a { '.repeat(depth)}b${' }'.repeat(depth)} }`;
  const aliased = (count: number): string => `query { ${Array.from({ length: count }, (_, index) => `a${index}: __typename`).join(' ')} }`;
  for (const depth of [LIMITS.graphqlDepth + 1, LIMITS.graphqlDepth * 100]) {
    await log.run(KIND, `a GraphQL document ${depth} levels deep (at most ${LIMITS.graphqlDepth})`, async () => refusedFor(await graphql({ query: nested(depth) }), 'nested too deeply'));
  }
  await log.run(KIND, `${LIMITS.graphqlFields + 1} aliased fields (at most ${LIMITS.graphqlFields})`, async () => refusedFor(await graphql({ query: aliased(LIMITS.graphqlFields + 1) }), 'too many fields'));
  await log.run(KIND, 'a fragment bomb', async () => {
    const fragments = Array.from({ length: 20 }, (_, index) => `fragment F${index} on Query { ${index === 19 ? '__typename' : `...F${index + 1} ...F${index + 1}`} }`).join(' ');
    return refusedFor(await graphql({ query: `query { ...F0 } ${fragments}` }), 'too many fields');
  });
  await log.run(KIND, 'two GraphQL operations in one document (batching)', async () => refusedFor(await graphql({ query: 'query A { __typename } query B { __typename }' }), 'several operations'));
  await log.run(KIND, 'a JSON array of GraphQL requests (batching)', async () => {
    const answer = await graphql([{ query: '{ __typename }' }, { query: '{ __typename }' }]);
    const body = JSON.parse(answer.text) as unknown;
    return Array.isArray(body) ? { status: answer.status, letThrough: true, note: 'answered as a batch' } : refused(answer.status, [200, 400]);
  });
  await log.run(KIND, `exactly ${LIMITS.graphqlDepth} levels deep is accepted`, async () => {
    // Extension.extension nests as deep as asked: the innermost field sits at the depth limit.
    const levels = LIMITS.graphqlDepth - 1;
    const query = `query { ObservationList(_count: 1) { ${'extension { '.repeat(levels)}url${' }'.repeat(levels)} } }`;
    const response = await fetch(`${host.url}graphql`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${tokenA}`, 'X-Project-ID': projectA.projectId },
      body: JSON.stringify({ query }),
    });
    const body = (await response.json()) as { data?: unknown; errors?: unknown[] };
    return accepted(response.status, response.status === 200 && !!body.data && !body.errors, `the limit itself was refused: ${JSON.stringify(body.errors ?? null).slice(0, 200)}`);
  });
  await log.run(KIND, `exactly ${LIMITS.graphqlFields} aliased fields are accepted`, async () => {
    const answer = await graphql({ query: aliased(LIMITS.graphqlFields) });
    const body = JSON.parse(answer.text) as { data?: Record<string, unknown>; errors?: unknown[] };
    // Every one of the fields answered, not only a 200.
    const answered = Object.keys(body.data ?? {}).length === LIMITS.graphqlFields && !body.errors;
    return accepted(answer.status, answer.status === 200 && answered, `the limit itself was refused: ${answer.text.slice(0, 200)}`);
  });
}
