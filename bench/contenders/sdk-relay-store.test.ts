/**
 * The floor stores what fhirgate stores: a streamed turn's reply holds its usage as a JSON turn's does, so the
 * provider is asked for it (as fhirgate asks); the client gets the usage chunk only when it asked for it.
 */
import { startLlmEmulator, type LlmEmulator } from '../../test/emulator/index.ts';
import { sseEvents } from '../../test/support/sse-events.ts';
import { plainChatBody } from './contender.ts';
import { startSdkRelayWithStore } from './start-proxies.ts';
import type { Contender } from './contender.ts';

describe('the floor (SDK relay + store), streamed', () => {
  let emulator: LlmEmulator;
  let floor: Contender;
  beforeAll(async () => {
    emulator = await startLlmEmulator({ models: ['bench-model'] });
    floor = await startSdkRelayWithStore(emulator.url, undefined, { conversations: 1 });
  }, 60_000);
  afterAll(async () => {
    await floor?.stop();
    await emulator?.close();
  });

  /** A streamed turn's body as the client reads it. */
  const streamOf = async (body: string): Promise<string> => {
    const response = await fetch(floor.chatUrl, { method: 'POST', headers: floor.headers, body });
    expect(response.status).toBe(200);
    return response.text();
  };
  type Chunk = { choices: { finish_reason?: string | null }[]; usage?: { total_tokens: number } | null };

  test('asks the provider for the usage, as fhirgate does, and keeps its chunk from a client that did not ask', async () => {
    const text = await streamOf(plainChatBody(true));
    expect(emulator.received.at(-1)?.body).toMatchObject({ stream: true, stream_options: { include_usage: true } });
    expect(text.endsWith('data: [DONE]\n\n')).toBe(true);
    const chunks = sseEvents<Chunk>(text).map((event) => event.data);
    expect(chunks.filter((chunk) => chunk.choices.length === 0)).toEqual([]);
    expect(chunks.at(-1)?.choices[0]?.finish_reason).toBe('stop');
  });

  test('a client that asked for the usage gets its chunk last, after the finish reason', async () => {
    const body = { ...(JSON.parse(plainChatBody(true)) as object), stream_options: { include_usage: true } };
    const chunks = sseEvents<Chunk>(await streamOf(JSON.stringify(body))).map((event) => event.data);
    expect(chunks.at(-1)).toMatchObject({ choices: [], usage: { total_tokens: expect.any(Number) } });
    expect(chunks.at(-2)?.choices[0]?.finish_reason).toBe('stop');
  });
});
