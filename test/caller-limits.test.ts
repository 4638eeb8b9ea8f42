/**
 * The chat limits are per caller (`chatLimits.maxConcurrentStreams`, `maxConcurrentTurns`): a caller at the limit is
 * refused with a 429 that says so, while a colleague of the same project is answered, and the caller's place comes
 * back once the turn holding it has ended.
 */
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import type { SeededProject } from '../plugin/hosts/standalone/seed.ts';
import { startLlmEmulator, type LlmEmulator } from './emulator/index.ts';
import { colleagueOf } from './support/colleague.ts';
import { startTestHost, type TestHost } from './support/test-host.ts';
import { waitFor } from './support/wait-for.ts';

const behaviour = (content: string, knobs: Record<string, unknown>): string => `${content} [emulator-behaviour ${JSON.stringify(knobs)}]`;

describe('the chat limits, per caller', () => {
  let emulator: LlmEmulator;
  let host: TestHost;
  let project: SeededProject;
  let carter: Record<string, string>;
  let colleague: Record<string, string>;

  beforeAll(async () => {
    emulator = await startLlmEmulator();
    host = await startTestHost({
      pluginFor: () => ({
        llm: {
          providers: { openai: { kind: 'openai', apiKey: 'sk-test', baseUrl: `${emulator.url}/v1`, models: ['gpt-4o-mini'], retries: { maxRetries: 0 } } },
          defaultModel: 'openai/gpt-4o-mini',
        },
        chatLimits: { maxConcurrentStreams: 1, maxConcurrentTurns: 1 },
        // A turn whose client left is cancelled at once: its place comes back without waiting for the provider's usage.
        governance: { usageWaitMs: 0 },
      }),
    });
    project = host.project as SeededProject;
    carter = { Authorization: `Bearer ${await host.accessTokenFor(project.ids['practitioner-membership'])}`, 'X-Project-ID': project.projectId };
    const other = await colleagueOf(host, project, project.ids['patient-in-care-team-1']);
    colleague = { Authorization: `Bearer ${other.token}`, 'X-Project-ID': project.projectId };
  });

  afterAll(async () => {
    await host.close();
    await emulator.close();
  });

  const turn = (headers: Record<string, string>, stream: boolean, content: string, signal?: AbortSignal): Promise<Response> =>
    fetch(`${host.url}v1/chat/completions`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', ...headers },
      body: JSON.stringify({ model: 'openai/gpt-4o-mini', stream, messages: [{ role: 'user', content }] }),
      signal,
    });

  for (const stream of [true, false]) {
    const what = stream ? 'open streams' : 'requests running';
    test(`${stream ? 'streams' : 'JSON turns'}: the caller at the limit gets a 429 naming it, a colleague is answered, and the place comes back when the turn ends`, async () => {
      const leaving = new AbortController();
      // Dr. Carter's first turn takes her place and holds it: its provider never answers.
      const held = turn(carter, stream, behaviour('Summarise the week.', { hang: true }), leaving.signal).catch(() => undefined);
      await waitFor(async () => (emulator.received.length > 0 ? true : undefined));

      const refused = await turn(carter, stream, 'And the week before?');
      expect(refused.status).toBe(429);
      expect(((await refused.json()) as { error: { code: string; message: string } }).error).toMatchObject({
        code: 'rate_limited',
        message: `Too many ${what}: at most 1 at once per caller. Retry when one has finished.`,
      });

      const other = await turn(colleague, stream, 'Anything new?');
      expect(other.status).toBe(200);
      await other.text();

      // She leaves her first turn: it ends, and her place is hers again.
      leaving.abort();
      await held;
      const again = await waitFor(async () => {
        const answer = await turn(carter, stream, 'Now?');
        await answer.text();
        return answer.status === 429 ? undefined : answer.status;
      });
      expect(again).toBe(200);
      emulator.reset();
    });
  }
});
