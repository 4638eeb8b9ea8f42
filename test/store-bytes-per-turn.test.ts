/**
 * What a chat turn costs the standalone store on disk, counted by the store's own accounting (its pages in use after
 * a checkpoint, and SQLite's `dbstat` by table): a size test, not a timing one. The figures and what takes the space:
 * docs/architecture.md, "Bytes per turn".
 */
import { join } from 'node:path';
import { STORE_FILE_NAME } from '../plugin/hosts/standalone/open-store.ts';
import { measureStoreFiles, measureStoreObjects } from '../plugin/hosts/standalone/store/store-size.ts';
import { CHAT_MODEL, startChatHost, type ChatHost } from './support/chat-host.ts';

const TURNS = 60;
/** 14.4 KB a short turn at schema 2; 8.7 KB at schema 4; 4.9 KB with the JSON compressed, history rows only for superseded versions and parameter codes in index rows (schema 5). */
const MAX_BYTES_PER_SHORT_TURN = 5 * 1024;

let chat: ChatHost;

beforeAll(async () => {
  chat = await startChatHost();
  chat.emulator.setBehaviour({ latencyMs: 0, replyTokens: 20 });
});

afterAll(async () => {
  await chat.close();
});

test('a short turn of a continued conversation adds at most 5 KB to the store, and no second copy of its records', async () => {
  const { host } = chat;
  const project = await host.seedProject();
  const token = await host.accessTokenFor(project.ids['practitioner-membership']);
  const storeFile = join(host.dataDir, STORE_FILE_NAME);
  let conversationId: string | undefined;
  const turn = async (content: string): Promise<void> => {
    const response = await fetch(`${host.url}v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'x-project-id': project.projectId, 'content-type': 'application/json' },
      body: JSON.stringify({ model: CHAT_MODEL, conversation_id: conversationId, messages: [{ role: 'user', content }] }),
    });
    const body = (await response.json()) as { conversation_id?: string };
    expect(response.status).toBe(200);
    conversationId ??= body.conversation_id;
  };
  await turn('Turn 0: what should I check next?');
  const before = measureStoreFiles(storeFile);
  const historyBefore = historyBytes(storeFile);
  for (let index = 1; index <= TURNS; index++) {
    await turn(`Turn ${index}: what should I check next?`);
  }
  const after = measureStoreFiles(storeFile);

  expect(after.walBytes).toBe(0);
  expect((after.usedBytes - before.usedBytes) / TURNS).toBeLessThanOrEqual(MAX_BYTES_PER_SHORT_TURN);
  // A turn's prompt and reply are written once each: their history rows carry no JSON (a few dozen bytes each).
  expect((historyBytes(storeFile) - historyBefore) / TURNS).toBeLessThan(512);
}, 60_000);

function historyBytes(storeFile: string): number {
  return measureStoreObjects(storeFile).find((part) => part.name === 'resource_history')?.recordBytes ?? 0;
}
