/**
 * Bytes per chat turn in the standalone store, in seconds: a host on a fresh data folder and the LLM emulator
 * (20-token replies), one conversation continued for `--turns` short turns (the soak's prompt), then as many turns
 * with 2 KB of text. After each run the WAL is checkpointed and the growth of the main file, the WAL and the reply
 * journal is divided by the turns, with the growth of each table and index (SQLite's `dbstat`).
 *
 *   node bench/bytes-per-turn/measure.ts [--turns 200] [--json] [--keep]
 *   node bench/bytes-per-turn/measure.ts --out <file.json> [--smoke]     (scenario 13 of `npm run bench`)
 */
import { existsSync, mkdtempSync, readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { STORE_FILE_NAME } from '../../plugin/hosts/standalone/open-store.ts';
import { measureStoreFiles, measureStoreObjects, type StoreFileSizes } from '../../plugin/hosts/standalone/store/store-size.ts';
import { startChatHost, CHAT_MODEL } from '../../test/support/chat-host.ts';
import type { ScenarioSection } from '../lib/section.ts';

const { values } = parseArgs({
  options: { turns: { type: 'string' }, json: { type: 'boolean', default: false }, keep: { type: 'boolean', default: false }, out: { type: 'string' }, smoke: { type: 'boolean', default: false } },
});
const turns = Number(values.turns ?? (values.smoke ? 20 : 200));
/** Issue 38's goal for a short turn's store growth. */
const SHORT_TURN_TARGET_BYTES = 5 * 1024;
/**
 * 2 KB of real prose for each long turn, a different passage each time: the project's LICENSE, whose English
 * compresses about as a clinical note does (a repeated sentence would compress far better than any real text).
 */
const PROSE = readFileSync(new URL('../../LICENSE', import.meta.url), 'utf8').replace(/\s+/g, ' ');
const longText = (index: number): string => PROSE.slice((index * 397) % (PROSE.length - 2048)).slice(0, 2048);

/** One run's growth per turn, in bytes. */
interface PerTurn {
  readonly name: string;
  readonly usedBytes: number;
  readonly mainBytes: number;
  readonly walBytes: number;
  readonly journalBytes: number;
  /** Growth of each table and index (pages), per turn. */
  readonly parts: Record<string, number>;
}

const dataDir = mkdtempSync(join(tmpdir(), 'fhirgate-bytes-per-turn-'));
const journalDir = join(dataDir, 'journal');
const chat = await startChatHost({ host: { dataDir }, plugin: { replyJournalDir: journalDir } });
const { host, emulator } = chat;
const results: PerTurn[] = [];
try {
  emulator.setBehaviour({ latencyMs: 0, replyTokens: 20 });
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
    if (response.status !== 200) {
      throw new Error(`turn answered ${response.status}: ${JSON.stringify(body).slice(0, 300)}`);
    }
    conversationId ??= body.conversation_id;
  };
  // The conversation's root is written by its first turn, before measuring: the soak's turns continue conversations.
  await turn('Soak user 0, turn 0: what should I check next?');
  const runs = [
    ['short', (index: number) => `Soak user 0, turn ${index}: what should I check next?`],
    ['2 KB', longText],
  ] as const;
  for (const [name, text] of runs) {
    const before = { ...measureStoreFiles(storeFile), journalBytes: folderBytes(journalDir) };
    const partsBefore = new Map(measureStoreObjects(storeFile).map((part) => [part.name, part.bytes] as const));
    for (let index = 1; index <= turns; index++) {
      await turn(text(index));
    }
    const after = { ...measureStoreFiles(storeFile), journalBytes: folderBytes(journalDir) };
    const per = (key: keyof StoreFileSizes | 'journalBytes'): number => Math.round((after[key] - before[key]) / turns);
    const parts: Record<string, number> = {};
    for (const part of measureStoreObjects(storeFile)) {
      const grown = Math.round((part.bytes - (partsBefore.get(part.name) ?? 0)) / turns);
      if (grown !== 0) {
        parts[part.name] = grown;
      }
    }
    results.push({ name, usedBytes: per('usedBytes'), mainBytes: per('mainBytes'), walBytes: per('walBytes'), journalBytes: per('journalBytes'), parts });
  }
} finally {
  await host.close({ keepData: values.keep });
  await emulator.close();
}
if (values.out) {
  writeFileSync(values.out, JSON.stringify(sectionOf(results)));
} else if (values.json) {
  process.stdout.write(`${JSON.stringify({ turns, results })}\n`);
} else {
  for (const result of results) {
    process.stdout.write(
      `${result.name.padEnd(6)} turn: store ${result.usedBytes} B (file ${result.mainBytes} B), WAL after checkpoint ${result.walBytes} B, journal ${result.journalBytes} B\n`
    );
    for (const [part, bytes] of Object.entries(result.parts).sort((left, right) => right[1] - left[1])) {
      process.stdout.write(`    ${part.padEnd(30)} ${String(bytes).padStart(6)} B\n`);
    }
  }
}
if (values.keep) {
  process.stderr.write(`data folder kept: ${dataDir}\n`);
}

/** The report's section: bytes per turn of each kind, what takes them, and the goal for a short turn. */
function sectionOf(measured: readonly PerTurn[]): ScenarioSection {
  const kib = (bytes: number): string => `${(bytes / 1024).toFixed(1)} KB`;
  const short = measured.find((result) => result.name === 'short');
  const partNames = [...new Set(measured.flatMap((result) => Object.keys(result.parts)))].sort(
    (left, right) => (short?.parts[right] ?? 0) - (short?.parts[left] ?? 0)
  );
  return {
    title: '13. Bytes per turn',
    method:
      `The standalone host on a fresh data folder, the emulator answering 20 tokens; one conversation continued for ${turns} short turns (the soak's prompt), ` +
      `then ${turns} turns of 2 KB of text. After each run the WAL is checkpointed; the growth of the store's pages in use, the WAL and the reply journal is divided by the turns, ` +
      `with each table's and index's growth from SQLite's dbstat.`,
    table: {
      columns: ['turn', 'store (pages in use)', 'store file', 'WAL after checkpoint', 'reply journal'],
      rows: measured.map((result) => [result.name, kib(result.usedBytes), kib(result.mainBytes), kib(result.walBytes), kib(result.journalBytes)]),
    },
    tables: [
      {
        title: 'Where the bytes of a turn go (per table and index)',
        columns: ['table or index', ...measured.map((result) => `${result.name} turn`)],
        rows: partNames.map((name) => [name, ...measured.map((result) => `${result.parts[name] ?? 0} B`)]),
      },
    ],
    targets: short
      ? [{ description: 'store bytes per short turn ≤ 5 KB', measured: kib(short.usedBytes), target: '≤ 5.0 KB', met: short.usedBytes <= SHORT_TURN_TARGET_BYTES }]
      : [],
    notes: [
      'A short turn writes two Communications (prompt and reply) and their search-index rows; docs/architecture.md ("Bytes per turn") says what takes the space and what was cut.',
      'The reply journal is rewritten past 8 MiB, so it does not grow with the store.',
    ],
  };
}

function folderBytes(folder: string): number {
  if (!existsSync(folder)) {
    return 0;
  }
  let total = 0;
  for (const entry of readdirSync(folder, { withFileTypes: true, recursive: true })) {
    if (entry.isFile()) {
      total += statSync(join(entry.parentPath, entry.name)).size;
    }
  }
  return total;
}
