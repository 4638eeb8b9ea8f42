/**
 * The floor of a gateway that keeps fhirgate's audit trail and sends the conversation's history: the SDK relay
 * (sdk-relay.ts) plus what the store must do for every continued turn, done as the standalone host does it. The
 * conversation's newest page of history is read (one search, as a continued turn of fhirgate's makes: the
 * conversations rotate as fhirgate's measured requests do) and sent with the request; the two records every turn
 * must store are written exactly as the standalone host stores them (the same elements: the request body, the
 * history window, the usage (a stream's too), the exchange's digest, the server-owned meta with the project's and the
 * patient's compartments).
 * The prompt's Communication is written (Medplum's validation, the search index, a durable commit: SQLite WAL,
 * group commit, the log synced before the write is acknowledged) before the upstream is called, and the reply's
 * after the reply, before the client gets its end (the JSON body, or a stream's last chunk and `[DONE]`), as
 * fhirgate does. No authentication, AccessPolicy, check of who wrote the history, journal or telemetry: what it
 * costs above the SDK relay is the least that the history and both durable records cost on this machine, so a
 * goal this contender misses is out of reach for fhirgate too.
 *
 * `node bench/contenders/sdk-relay-store.ts --upstream http://127.0.0.1:N --data-dir DIR [--conversations N]` prints
 * `{"url":...}` and runs until SIGTERM.
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { json } from 'node:stream/consumers';
import { parseArgs } from 'node:util';
import type { Communication, Reference } from '@medplum/fhirtypes';
import { OpenAI } from 'openai';
import { buildPrompt, buildReply, type ConversationParties } from '../../plugin/chat/communication-builders.ts';
import { messagesOf } from '../../plugin/chat/recorded-messages.ts';
import { replyDigest } from '../../plugin/chat/thread-digest.ts';
import { openStandaloneStore } from '../../plugin/hosts/standalone/open-store.ts';
import { serveRelay } from './relay-server.ts';

const { values } = parseArgs({
  options: { upstream: { type: 'string' }, port: { type: 'string', default: '0' }, 'data-dir': { type: 'string' }, conversations: { type: 'string', default: '1' } },
});
if (!values.upstream || !values['data-dir']) throw new Error('--upstream and --data-dir are required');
const client = new OpenAI({ apiKey: 'bench', baseURL: `${values.upstream}/v1`, maxRetries: 0, logLevel: 'off' });
const store = openStandaloneStore(values['data-dir']);
// The parties of fhirgate's bench turns: a practitioner, the project's AI agent, the demo patient.
const parties: ConversationParties = {
  categorySystem: 'urn:fhirgate:category',
  caller: { reference: 'Practitioner/a1f0c0de-0000-4000-8000-000000000101' },
  agent: { reference: `Device/${randomUUID()}`, display: 'fhirgate AI agent' },
  subject: { reference: 'Patient/a1f0c0de-0000-4000-8000-000000000301' },
};
/** The conversations the turns rotate through (`--conversations`: as many as fhirgate's measured requests, bench/run.ts). */
const rootIds = Array.from({ length: Number(values.conversations) }, () => randomUUID());
let turns = 0;
/** fhirgate's default history limit (plugin/options.ts): the page a continued turn reads. */
const HISTORY_MESSAGES = 50;
const PROJECT = 'a1f0c0de-0000-4000-8000-000000000001';
/**
 * The server-owned meta the host's repository gives each record (project-repository.ts): the project, the author,
 * the project's and the patient's compartments. Validated and indexed with the record, as in the host.
 */
function serverMeta(author: Reference): Communication['meta'] {
  return { project: PROJECT, author, compartment: [{ reference: `Project/${PROJECT}` }, { reference: parties.subject?.reference }] };
}

async function relay(request: IncomingMessage, response: ServerResponse, signal: AbortSignal): Promise<void> {
  const body = (await json(request)) as OpenAI.ChatCompletionCreateParams & Record<string, unknown>;
  const promptId = randomUUID();
  const replyId = randomUUID();
  const rootId = rootIds[turns++ % rootIds.length] as string;
  const text = String(body.messages.at(-1)?.content ?? '');
  // The conversation's newest page, oldest first, as the model's messages: the one search a continued turn makes.
  const page = await store.searchResources<Communication>({
    resourceType: 'Communication',
    filters: [{ code: 'part-of', operator: 'eq', value: `Communication/${rootId}` }],
    sortRules: [{ code: 'sent', descending: true }],
    count: HISTORY_MESSAGES,
  });
  const history = page.reverse().flatMap((communication) => messagesOf(communication).map(({ role, content }) => ({ role, content }) as OpenAI.ChatCompletionMessageParam));
  const messages = [...history, ...body.messages];
  await store.createResource<Communication>(
    {
      ...buildPrompt(parties, { rootId, messages: [{ role: 'user', content: text }], requestBody: body, sent: new Date().toISOString() }),
      id: promptId,
      meta: serverMeta(parties.caller),
    },
    { assignedId: true },
  );
  const recordReply = async (reply: string, usage: OpenAI.CompletionUsage | undefined): Promise<void> => {
    const resource = buildReply(parties, {
      id: replyId,
      rootId,
      promptId,
      text: reply,
      status: 'completed',
      modelId: `bench/${body.model}`,
      usage: usage && { promptTokens: usage.prompt_tokens, completionTokens: usage.completion_tokens },
      finishReason: 'stop',
      // As fhirgate's: the window of history sent and the digest of the exchange.
      history: { count: history.length, oldest: page[0]?.id },
      threadDigest: replyDigest([PROJECT, parties.caller.reference ?? ''], [{ role: 'user', content: text }], { text: reply }),
      sent: new Date().toISOString(),
    });
    await store.createResource<Communication>({ ...resource, id: replyId, meta: serverMeta(parties.agent) }, { assignedId: true });
  };
  if (!body.stream) {
    const completion = await client.chat.completions.create({ ...body, messages, stream: false }, { signal });
    await recordReply(completion.choices[0]?.message.content ?? '', completion.usage);
    response.writeHead(200, { 'content-type': 'application/json' });
    response.end(JSON.stringify(completion));
    return;
  }
  // The usage is asked for, as fhirgate asks its provider (plugin/llm/openai-chat-model.ts): the reply's record holds
  // it, as a JSON reply's does.
  const stream = await client.chat.completions.create({ ...body, messages, stream: true, stream_options: { include_usage: true } }, { signal });
  const forwardUsage = body.stream_options?.include_usage === true;
  response.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  let first = true;
  let reply = '';
  let usage: OpenAI.CompletionUsage | undefined;
  let last: string | undefined;
  for await (const chunk of stream) {
    reply += chunk.choices[0]?.delta?.content ?? '';
    usage = chunk.usage ?? usage;
    if (chunk.choices.length === 0 && chunk.usage) {
      // The usage chunk follows the finish reason's, and waits with it (sent only when the client asked for it).
      if (forwardUsage) last = `${last ?? ''}data: ${JSON.stringify(chunk)}\n\n`;
      continue;
    }
    // The chunk with the finish reason waits for the reply's record, as fhirgate's last chunk does.
    if (chunk.choices[0]?.finish_reason) {
      last = `data: ${JSON.stringify(chunk)}\n\n`;
      continue;
    }
    response.write(`data: ${JSON.stringify(chunk)}\n\n`);
    // As in sdk-relay.ts: one turn of the event loop lets the first event leave now.
    if (first) await new Promise((resolve) => setImmediate(resolve));
    first = false;
  }
  await recordReply(reply, usage);
  response.end(`${last ?? ''}data: [DONE]\n\n`);
}

serveRelay(Number(values.port), relay, () => store.close());
