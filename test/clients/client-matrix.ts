/**
 * What the client matrix's files share (one file per client library, each its own jest suite): one host on the
 * emulator per file, a project of its own per test with a signed-in user whose token comes from a function that
 * signs a new one each time it is asked (as a client refreshing its token would), MedplumClient to read the records
 * back, and what every client is asked to do: a tool round trip, structured output, a conversation.
 */
import { MedplumClient } from '@medplum/core';
import type { Communication } from '@medplum/fhirtypes';
import { EXTENSION } from '../../plugin/chat/fhir-vocabulary.ts';
import type { SeededProject } from '../../plugin/hosts/standalone/seed.ts';
import type { LlmEmulator } from '../emulator/index.ts';
import { CHAT_MODEL, OTHER_PROVIDERS, startChatHost, type ChatHost } from '../support/chat-host.ts';
import type { TestHost } from '../support/test-host.ts';

export { CHAT_MODEL, OTHER_PROVIDERS };

/** The matrix's host: one per test file. */
export interface ClientMatrix {
  readonly emulator: LlmEmulator;
  readonly host: TestHost;
  /** A fresh project and its signed-in user, for one test. */
  signIn(): Promise<MatrixSession>;
  close(): Promise<void>;
}

/** What a client is configured with, and where its records are read back. */
export interface MatrixSession {
  readonly project: SeededProject;
  /** fhirgate's OpenAI-compatible base URL, `http://.../v1`. */
  readonly baseURL: string;
  /** `X-Project-ID`, every client's default header. */
  readonly headers: { readonly 'X-Project-ID': string };
  /** The user's token, refreshed: a newly signed access token each call. */
  readonly apiKey: () => Promise<string>;
  /** Every token `apiKey` handed out, in order: one per request the client made. */
  readonly issuedTokens: readonly string[];
  /** A client application of the project, to read what was stored. */
  readonly medplum: MedplumClient;
  /** The project's conversations, oldest first, each as its turns (see {@link describeTurn}). */
  conversations(): Promise<string[][]>;
}

/** Starts the emulator and a host on it: the `openai` provider (model {@link CHAT_MODEL}), and the `withProviders` named. */
export async function startClientMatrix(withProviders: readonly (keyof typeof OTHER_PROVIDERS)[] = []): Promise<ClientMatrix> {
  const chatHost: ChatHost = await startChatHost({ withProviders });
  const { emulator, host } = chatHost;
  return {
    emulator,
    host,
    close: () => chatHost.close(),
    signIn: async () => {
      const project = await host.seedProject();
      const membership = project.ids['practitioner-membership'];
      const issuedTokens: string[] = [];
      const medplum = new MedplumClient({ baseUrl: host.url, fetch });
      await medplum.startClientLogin(project.client?.id ?? '', project.client?.secret ?? '');
      return {
        project,
        baseURL: `${host.url}v1`,
        headers: { 'X-Project-ID': project.projectId },
        apiKey: async () => {
          const token = await host.accessTokenFor(membership);
          issuedTokens.push(token);
          return token;
        },
        issuedTokens,
        medplum,
        conversations: () => readConversations(medplum),
      };
    },
  };
}

/** The host of a client's file, and the session of the test that runs (both set by {@link useClientMatrix}'s hooks). */
export interface ClientMatrixContext {
  readonly emulator: LlmEmulator;
  readonly session: MatrixSession;
}

/**
 * Registers the hooks every client's file has: one host for the file (with the `withProviders` named), and for each
 * test the emulator's records cleared and a fresh project signed in. Call it first in the file's `describe`.
 */
export function useClientMatrix(withProviders: readonly (keyof typeof OTHER_PROVIDERS)[] = []): ClientMatrixContext {
  let matrix: ClientMatrix | undefined;
  let session: MatrixSession | undefined;
  beforeAll(async () => {
    matrix = await startClientMatrix(withProviders);
  });
  afterAll(() => matrix?.close());
  beforeEach(async () => {
    matrix?.emulator.reset();
    session = await matrix?.signIn();
  });
  return {
    get emulator(): LlmEmulator {
      return definite(matrix).emulator;
    },
    get session(): MatrixSession {
      return definite(session);
    },
  };
}

function definite<T>(value: T | undefined): T {
  if (value === undefined) {
    throw new Error('The client matrix is used outside a test.');
  }
  return value;
}

/** A first turn and a second that continues it: what every client's conversation test sends and expects. */
export const CONTINUED = {
  first: 'Remember 7.',
  second: 'And 8?',
  /** What the model receives with the second turn: the first as history. */
  history: [
    { role: 'user', content: 'Remember 7.' },
    { role: 'assistant', content: 'Echo: Remember 7.' },
    { role: 'user', content: 'And 8?' },
  ],
  /**
   * The project's records: one conversation of both turns, whether the client named it or sent the first turn again
   * with the second (the history it keeps itself).
   */
  asOneConversation: [['prompt: Remember 7.', 'reply: Echo: Remember 7.', 'prompt: And 8?', 'reply: Echo: And 8?']],
} as const;

/** Two requests that name no conversation: a conversation each on record. */
export const UNRELATED = {
  asTwoConversations: [
    ['prompt: Summarise the last visit.', 'reply: Echo: Summarise the last visit.'],
    ['prompt: Again.', 'reply: Echo: Again.'],
  ],
} as const;

/** A streamed request and the records it leaves. */
export const STREAMED = {
  prompt: 'Stream the answer please',
  answer: 'Echo: Stream the answer please',
  asOneConversation: [['prompt: Stream the answer please', 'reply: Echo: Stream the answer please']],
} as const;

/** The model's function of the matrix: every client declares it in its own way. */
export const WEATHER_TOOL = {
  name: 'get_weather',
  description: 'Current weather in a city',
  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false },
} as const;

/** What the client's implementation of get_weather answers. */
export const weatherIn = (city: string): string => `Sunny in ${city}`;

/** A user message that makes the emulated model call get_weather for Lyon once, then answer with text. */
export const ASK_WEATHER = `Weather in Lyon? [emulator-behaviour ${JSON.stringify({ toolCalls: [[{ name: 'get_weather', arguments: { city: 'Lyon' } }]] })}]`;

/**
 * A tool loop the client runs itself, each step a request with the whole history: the second step as the provider
 * receives it, and the records: one conversation, the second step recognised by the exchange it sends again.
 */
export const CLIENT_TOOL_LOOP = {
  callAndResult: [
    { role: 'assistant', content: '', toolCalls: [{ id: 'call_1_0', name: 'get_weather', arguments: '{"city":"Lyon"}' }] },
    { role: 'tool', content: 'Sunny in Lyon', toolCallId: 'call_1_0' },
  ],
  asOneConversation: [[`prompt: ${ASK_WEATHER}`, 'reply: calls get_weather({"city":"Lyon"})', 'prompt: result call_1_0: Sunny in Lyon', `reply: Echo: ${ASK_WEATHER}`]],
} as const;

/**
 * The same loop in a conversation named first ('Remember 7.'), each step sending the whole call again: what the
 * provider receives at the last step (each message once), and the records. The emulator numbers its calls by
 * request: this one is its second request's.
 */
export const NAMED_TOOL_LOOP = {
  sentAtLastStep: [
    { role: 'user', content: 'Remember 7.' },
    { role: 'assistant', content: 'Echo: Remember 7.' },
    { role: 'user', content: ASK_WEATHER },
    { role: 'assistant', content: '', toolCalls: [{ id: 'call_2_0', name: 'get_weather', arguments: '{"city":"Lyon"}' }] },
    { role: 'tool', content: 'Sunny in Lyon', toolCallId: 'call_2_0' },
  ],
  asOneConversation: [
    ['prompt: Remember 7.', 'reply: Echo: Remember 7.', `prompt: ${ASK_WEATHER}`, 'reply: calls get_weather({"city":"Lyon"})', 'prompt: result call_2_0: Sunny in Lyon', `reply: Echo: ${ASK_WEATHER}`],
  ],
} as const;

/** Sunny in each of the three cities of {@link TWO_ROUND_TOOL_LOOP}. */
const CITIES_BEHAVIOUR = {
  toolCalls: [[{ name: 'get_weather', arguments: { city: 'Lyon' } }], [{ name: 'get_weather', arguments: { city: 'Paris' } }, { name: 'get_weather', arguments: { city: 'Nice' } }]],
};

/**
 * A tool loop of two rounds that a client runs by itself (multi-step): the model calls get_weather for Lyon, then for
 * Paris and Nice at once, then answers. What the provider receives at the last step, and the records: one
 * conversation, each round's calls on one reply and their results on the next prompt.
 */
export const TWO_ROUND_TOOL_LOOP = {
  prompt: `Weather in Lyon, Paris and Nice? [emulator-behaviour ${JSON.stringify(CITIES_BEHAVIOUR)}]`,
  answer: `Echo: Weather in Lyon, Paris and Nice? [emulator-behaviour ${JSON.stringify(CITIES_BEHAVIOUR)}]`,
  sentAtLastStep: [
    { role: 'user', content: `Weather in Lyon, Paris and Nice? [emulator-behaviour ${JSON.stringify(CITIES_BEHAVIOUR)}]` },
    { role: 'assistant', content: '', toolCalls: [{ id: 'call_1_0', name: 'get_weather', arguments: '{"city":"Lyon"}' }] },
    { role: 'tool', content: 'Sunny in Lyon', toolCallId: 'call_1_0' },
    {
      role: 'assistant',
      content: '',
      toolCalls: [
        { id: 'call_2_0', name: 'get_weather', arguments: '{"city":"Paris"}' },
        { id: 'call_2_1', name: 'get_weather', arguments: '{"city":"Nice"}' },
      ],
    },
    { role: 'tool', content: 'Sunny in Paris', toolCallId: 'call_2_0' },
    { role: 'tool', content: 'Sunny in Nice', toolCallId: 'call_2_1' },
  ],
  asOneConversation: [
    [
      `prompt: Weather in Lyon, Paris and Nice? [emulator-behaviour ${JSON.stringify(CITIES_BEHAVIOUR)}]`,
      'reply: calls get_weather({"city":"Lyon"})',
      'prompt: result call_1_0: Sunny in Lyon',
      'reply: calls get_weather({"city":"Paris"}) | calls get_weather({"city":"Nice"})',
      'prompt: result call_2_0: Sunny in Paris | result call_2_1: Sunny in Nice',
      `reply: Echo: Weather in Lyon, Paris and Nice? [emulator-behaviour ${JSON.stringify(CITIES_BEHAVIOUR)}]`,
    ],
  ],
} as const;

/**
 * The structured output every client asks for; the emulator answers the schema's example (below). Its lists are
 * plain arrays, as JSON Schema's types (`@types/json-schema`, which the AI SDK's `jsonSchema` takes) declare them.
 */
export const VITALS_SCHEMA = {
  type: 'object',
  properties: { systolic: { type: 'integer', minimum: 90 }, trend: { type: 'string', enum: ['stable', 'rising'] as string[] } },
  required: ['systolic', 'trend'] as string[],
  additionalProperties: false,
} as const;

/** What the emulated model answers for {@link VITALS_SCHEMA} (its example value: minimum, first enum value). */
export const VITALS_EXAMPLE = { systolic: 90, trend: 'stable' } as const;

/**
 * The project's conversations, oldest first, each as the turns stored under its root in `sent` order, written as a
 * reader would summarise them (see {@link describeTurn}).
 */
export async function readConversations(medplum: MedplumClient): Promise<string[][]> {
  const all = await medplum.searchResources('Communication', { _count: '1000', _sort: 'sent' }, { cache: 'no-cache' });
  const roots = all.filter((record) => codeOf(record) === 'ai-conversation');
  return roots.map((root) => all.filter((record) => record.partOf?.[0]?.reference === `Communication/${root.id}`).map(describeTurn));
}

/**
 * One stored turn as a line: `prompt: <text>` (a tool result as `result <call id>: <text>`), `reply: <text>` (its
 * calls as `calls name(arguments)`), and the status when it is not `completed`.
 */
export function describeTurn(record: Communication): string {
  const kind = codeOf(record) === 'ai-prompt' ? 'prompt' : 'reply';
  const items = (record.payload ?? []).map((item) => {
    const callId = item.extension?.find((extension) => extension.url === EXTENSION.toolResult)?.valueString;
    return callId === undefined ? (item.contentString ?? '') : `result ${callId}: ${item.contentString ?? ''}`;
  });
  const calls = (record.extension ?? [])
    .filter((extension) => extension.url === EXTENSION.toolCall)
    .map((call) => {
      const part = (url: string): string => call.extension?.find((extension) => extension.url === url)?.valueString ?? '';
      return `calls ${part('name')}(${part('arguments')})`;
    });
  const status = record.status === 'completed' ? '' : ` (${record.status})`;
  return `${kind}: ${[...items, ...calls].join(' | ')}${status}`;
}

/** The request body a prompt records, as the client sent it. */
export function recordedRequestOf(prompt: Communication): Record<string, unknown> {
  return JSON.parse(prompt.extension?.find((extension) => extension.url === EXTENSION.chatRequest)?.valueString ?? '{}') as Record<string, unknown>;
}

/** The prompts of the project, oldest first. */
export async function readPrompts(medplum: MedplumClient): Promise<Communication[]> {
  const all = await medplum.searchResources('Communication', { _count: '1000', _sort: 'sent' }, { cache: 'no-cache' });
  return all.filter((record) => codeOf(record) === 'ai-prompt');
}

function codeOf(record: Communication): string | undefined {
  return record.category?.[0]?.coding?.[0]?.code;
}

/** A token no host signed: the 401 every client is shown. */
export const BAD_TOKEN = 'not-a-medplum-access-token';
