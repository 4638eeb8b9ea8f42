/**
 * After a chaos run: what the store holds against what each client saw and what the emulator sent.
 * - Every prompt has exactly one reply, in a terminal state; no reply without its prompt (lost records: 0).
 * - At most one prompt per request (duplicates: 0).
 * - What a client saw matches the record (mismatches: 0): an answer or a finished stream is a `completed` reply
 *   with the same text and id; an in-band error is a `not-done` or `stopped` reply with the text streamed; an
 *   error status before any byte is a `not-done` reply with no text, or nothing stored for a 503, 409 or 429; a client that
 *   left, or whose connection broke, has nothing stored or a reply whose text begins with what it received; a
 *   client that left mid-stream while the host was stalled never has a `completed` reply unless it got all of it.
 * - Completed replies record the completion tokens the emulator sent.
 */
import { DatabaseSync } from 'node:sqlite';
import type { Communication } from '@medplum/fhirtypes';
import type { ReceivedRequest } from '../test/emulator/index.ts';
import { EXTENSION } from '../plugin/chat/fhir-vocabulary.ts';
import { decodeContent } from '../plugin/hosts/standalone/store/content-codec.ts';
import { LOST_INSTANCE_REASON } from '../plugin/chat/reply-records.ts';
import type { ClientSeen } from './client.ts';

const TERMINAL = new Set(['completed', 'stopped', 'not-done']);

export interface Reconciliation {
  readonly prompts: number;
  readonly replies: number;
  readonly repliesByStatus: Record<string, number>;
  /** Prompts without a reply in a terminal state, and replies without their prompt. */
  readonly lost: number;
  readonly duplicates: number;
  readonly mismatches: readonly string[];
}

/** Reads the Communications of `projectId` from the store file and checks them against the clients and the emulator. */
export function reconcile(storeFile: string, projectId: string, seen: readonly ClientSeen[], received: readonly ReceivedRequest[]): Reconciliation {
  const communications = readCommunications(storeFile, projectId);
  const prompts = communications.filter((communication) => codeOf(communication) === 'ai-prompt');
  const replies = communications.filter((communication) => codeOf(communication) === 'ai-response');
  const replyByPrompt = new Map<string, Communication[]>();
  for (const reply of replies) {
    const promptId = reply.inResponseTo?.[0]?.reference?.split('/')[1] ?? '';
    replyByPrompt.set(promptId, [...(replyByPrompt.get(promptId) ?? []), reply]);
  }
  const promptIds = new Set(prompts.map((prompt) => prompt.id));
  let lost = replies.filter((reply) => !promptIds.has(reply.inResponseTo?.[0]?.reference?.split('/')[1] ?? '')).length;
  let duplicates = 0;
  for (const prompt of prompts) {
    const found = (replyByPrompt.get(prompt.id ?? '') ?? []).filter((reply) => TERMINAL.has(reply.status));
    if (found.length === 0) lost++;
    if (found.length > 1) duplicates += found.length - 1;
  }

  const promptsByMarker = new Map<string, Communication[]>();
  for (const prompt of prompts) {
    const marker = /\[chaos-\d+\]/.exec(textOf(prompt))?.[0] ?? '';
    promptsByMarker.set(marker, [...(promptsByMarker.get(marker) ?? []), prompt]);
  }
  const tokensByMarker = new Map<string, number>();
  for (const request of received) {
    const marker = /\[chaos-\d+\]/.exec(request.messages.at(-1)?.content ?? '')?.[0];
    if (marker && request.outcome === 'completed') tokensByMarker.set(marker, request.tokensSent);
  }

  const mismatches: string[] = [];
  for (const client of seen) {
    const mine = promptsByMarker.get(client.marker) ?? [];
    if (mine.length > 1) duplicates += mine.length - 1;
    const reply = mine[0] ? replyByPrompt.get(mine[0].id ?? '')?.[0] : undefined;
    const problem = checkClient(client, mine.length > 0, reply, tokensByMarker.get(client.marker));
    if (problem) mismatches.push(`${client.marker} (${client.fault}, ${client.stream ? 'stream' : 'json'}, ${client.end}): ${problem}`);
  }
  const repliesByStatus: Record<string, number> = {};
  for (const reply of replies) repliesByStatus[reply.status] = (repliesByStatus[reply.status] ?? 0) + 1;
  return { prompts: prompts.length, replies: replies.length, repliesByStatus, lost, duplicates, mismatches };
}

function checkClient(client: ClientSeen, stored: boolean, reply: Communication | undefined, emulatorTokens: number | undefined): string | undefined {
  const text = reply ? textOf(reply) : '';
  switch (client.end) {
    case 'answered':
    case 'streamed': {
      if (!reply) return 'the client got an answer, but no reply is stored';
      if (reply.status !== 'completed') return `reply is ${reply.status}, the client got a complete answer`;
      if (text !== client.text) return 'reply text differs from the answer';
      if (client.communicationId !== reply.id) return 'communication_id differs from the reply id';
      const tokens = reply.extension?.find((extension) => extension.url === EXTENSION.usage)?.extension?.find((part) => part.url === 'completion-tokens')?.valueInteger;
      if (emulatorTokens !== undefined && tokens !== emulatorTokens) return `recorded ${tokens} completion tokens, the emulator sent ${emulatorTokens}`;
      return undefined;
    }
    case 'in-band-error':
      if (!reply) return 'the stream started, but no reply is stored';
      if (reply.status !== 'not-done' && reply.status !== 'stopped') return `reply is ${reply.status} after an in-band error`;
      return text === client.text ? undefined : 'reply text differs from what was streamed';
    case 'http-error':
      // Refusals before the turn: the store down or shutting down (503), a running duplicate (409), a limit (429).
      if (client.status === 503 || client.status === 409 || client.status === 429) return stored ? `a ${client.status} stored a prompt` : undefined;
      if (!reply) return `a ${client.status} left no reply`;
      return reply.status === 'not-done' && text === '' ? undefined : `a ${client.status} stored a ${reply.status} reply with text`;
    case 'left':
    case 'broken':
      if (!stored) return undefined;
      if (!reply) return 'the prompt has no reply';
      // An instance lost for good shared its reply text at most a moment behind what its client got.
      if (reply.statusReason?.text === LOST_INSTANCE_REASON) {
        return client.text.startsWith(text) || text.startsWith(client.text) ? undefined : 'reply text and what the client received differ';
      }
      if (client.fault === 'client-leaves-during-stall' && reply.status === 'completed' && text !== client.text) {
        return 'reply is completed, though the client left before the end of it';
      }
      return text.startsWith(client.text) ? undefined : 'reply text does not begin with what the client received';
  }
}

function readCommunications(storeFile: string, projectId: string): Communication[] {
  const database = new DatabaseSync(storeFile, { readOnly: true });
  try {
    const rows = database
      .prepare("SELECT content FROM resources WHERE resource_type = 'Communication' AND deleted = 0 AND project = ?")
      .all(projectId.toLowerCase());
    return rows.map((row) => JSON.parse(decodeContent(row.content)) as Communication);
  } finally {
    database.close();
  }
}

/** A record's text as a reader finds it: its payload strings in order (a long text is several items). */
function textOf(communication: Communication): string {
  return (communication.payload ?? []).map((item) => item.contentString ?? '').join('');
}

function codeOf(communication: Communication): string | undefined {
  return communication.category?.[0]?.coding?.[0]?.code;
}
