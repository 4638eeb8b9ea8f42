/**
 * Measures the SQLite store: fills a temporary file with N chat-turn Communications (default 100000) spread over
 * conversations, one of which has 1000 turns, then prints the write rates and the latency of the searches the
 * plugin runs. Not a test; run with the project's Node:
 *
 *   node_modules/.bin/node plugin/hosts/standalone/store/measure-search.ts [N]
 */
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseSearchRequest } from '@medplum/core';
import type { Communication } from '@medplum/fhirtypes';
import { SqliteRepository } from './sqlite-repository.ts';

const TARGET_SIZE = 1000;
const OTHER_CONVERSATION_SIZE = 50;
const BATCH_SIZE = 500;
const SINGLE_WRITES = 500;
const SEARCH_RUNS = 200;
const PROJECTS = ['project-a', 'project-b', 'project-c'];
const FILLER_TEXT = 'lorem ipsum dolor sit amet '.repeat(8);

interface Conversation {
  readonly id: string;
  readonly project: string;
  readonly patient: string;
  turns: number;
}

function makeTurn(conversation: Conversation, sequence: number): Communication {
  conversation.turns++;
  const isPrompt = conversation.turns % 2 === 1;
  const sent = new Date(Date.UTC(2025, 0, 1) + sequence * 1000).toISOString();
  return {
    resourceType: 'Communication',
    meta: {
      project: conversation.project,
      author: { reference: 'Practitioner/author' },
      compartment: [{ reference: `Project/${conversation.project}` }, { reference: `Patient/${conversation.patient}` }],
    },
    status: 'completed',
    identifier: [{ system: 'https://fhirgate.dev/turn', value: `${conversation.id}-${conversation.turns}` }],
    category: [{ coding: [{ system: 'https://fhirgate.dev/category', code: isPrompt ? 'prompt' : 'reply' }] }],
    partOf: [{ reference: `Communication/${conversation.id}` }],
    subject: { reference: `Patient/${conversation.patient}` },
    sender: { reference: isPrompt ? `Patient/${conversation.patient}` : 'Device/llm' },
    recipient: [{ reference: isPrompt ? 'Device/llm' : `Patient/${conversation.patient}` }],
    sent,
    payload: [{ contentString: `Turn ${conversation.turns} of ${conversation.id}: ${FILLER_TEXT}` }],
  };
}

function planConversations(total: number): Conversation[] {
  const conversations: Conversation[] = [{ id: 'target', project: PROJECTS[0], patient: 'patient-target', turns: 0 }];
  const others = Math.max(1, Math.ceil((total - TARGET_SIZE) / OTHER_CONVERSATION_SIZE));
  for (let index = 0; index < others; index++) {
    conversations.push({
      id: `conversation-${index}`,
      project: PROJECTS[index % PROJECTS.length],
      patient: `patient-${index % 997}`,
      turns: 0,
    });
  }
  return conversations;
}

/** Conversation of the n-th turn: the target's 1000 turns are spread evenly through the fill, the rest round-robin. */
function conversationOf(conversations: Conversation[], sequence: number, total: number): Conversation {
  const stride = Math.max(1, Math.floor(total / TARGET_SIZE));
  if (sequence % stride === 0 && conversations[0].turns < TARGET_SIZE) {
    return conversations[0];
  }
  return conversations[1 + (sequence % (conversations.length - 1))];
}

function mebibytes(file: string): string {
  return (statSync(file).size / 1024 / 1024).toFixed(0);
}

async function timeSearch(repository: SqliteRepository, query: string): Promise<string> {
  const request = parseSearchRequest(query);
  let found = 0;
  for (let run = 0; run < 5; run++) {
    found = (await repository.search(request)).entry?.length ?? 0;
  }
  const samples: number[] = [];
  for (let run = 0; run < SEARCH_RUNS; run++) {
    const start = process.hrtime.bigint();
    await repository.search(request);
    samples.push(Number(process.hrtime.bigint() - start) / 1e6);
  }
  samples.sort((left, right) => left - right);
  const median = samples[Math.floor(samples.length / 2)];
  const p95 = samples[Math.floor(samples.length * 0.95)];
  return `${query}\n    ${found} entries; median ${median.toFixed(2)} ms, p95 ${p95.toFixed(2)} ms`;
}

async function main(): Promise<void> {
  const total = Number.parseInt(process.argv[2] ?? '100000', 10);
  const directory = mkdtempSync(join(tmpdir(), 'fhirgate-measure-'));
  const path = join(directory, 'store.sqlite');
  const repository = SqliteRepository.open(path);
  try {
    const conversations = planConversations(total);
    let written = 0;
    const fillStart = performance.now();
    while (written < total) {
      const batch = Math.min(BATCH_SIZE, total - written);
      await repository.withTransaction(
        async (transaction) => {
          for (let index = 0; index < batch; index++) {
            const sequence = written + index;
            await transaction.createResource(makeTurn(conversationOf(conversations, sequence, total), sequence));
          }
        },
        { resourceTypes: ['Communication'] }
      );
      written += batch;
    }
    const fillSeconds = (performance.now() - fillStart) / 1000;
    console.log(`store: ${path}`);
    console.log(
      `filled ${total} Communications in ${fillSeconds.toFixed(1)} s: ${(total / fillSeconds).toFixed(0)} writes/s ` +
        `(${BATCH_SIZE} per transaction, synchronous=FULL)`
    );

    const singleStart = performance.now();
    for (let index = 0; index < SINGLE_WRITES; index++) {
      await repository.createResource(makeTurn(conversations[1 + (index % (conversations.length - 1))], total + index));
    }
    const singleSeconds = (performance.now() - singleStart) / 1000;
    const singleRate = (SINGLE_WRITES / singleSeconds).toFixed(0);
    console.log(`${SINGLE_WRITES} single writes (one transaction each, synchronous=FULL): ${singleRate} writes/s`);
    console.log(`file size: ${mebibytes(path)} MiB (+ WAL ${mebibytes(`${path}-wal`)} MiB)`);
    console.log(`target conversation: ${conversations[0].turns} turns; ${conversations.length - 1} other conversations`);

    console.log('search latency:');
    for (const query of [
      'Communication?part-of=Communication/target&_sort=sent',
      // A chat turn's history page (plugin/chat/conversation.ts): its newest 50, side requests left out.
      'Communication?part-of=Communication/target&category:not=side-request&_sort=-sent&_count=50',
      'Communication?part-of=Communication/target&_sort=-sent&_project=project-a',
      'Communication?part-of=Communication/target&_sort=sent&_count=1000',
      'Communication?part-of=Communication/target&_total=accurate&_count=0',
      'Communication?part-of=Communication/target&category=prompt&_sort=-sent&_count=10',
      'Communication?part-of=Communication/conversation-7&_sort=sent',
      'Communication?identifier=https://fhirgate.dev/turn|target-500',
      'Communication?_project=project-b&_sort=-_lastUpdated&_count=20',
    ]) {
      console.log(`  ${await timeSearch(repository, query)}`);
    }
  } finally {
    repository.close();
    rmSync(directory, { recursive: true, force: true });
  }
}

await main();
