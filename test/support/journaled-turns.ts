/**
 * The turns a reply journal on disk holds unfinished, read as the next start reads them (reply-journal.ts
 * `readUnfinished`): what would be recorded if the process died now.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { readUnfinished, type UnfinishedTurn } from '../../plugin/chat/reply-journal.ts';

/** The unfinished turn with this reply id in the journal folder `root` (every instance's journal under it), if any. */
export function journaledTurn(root: string, replyId: string): UnfinishedTurn | undefined {
  return readdirSync(root)
    .map((folder) => join(root, folder, 'replies.jsonl'))
    .filter((file) => existsSync(file))
    .flatMap((file) => readUnfinished(readFileSync(file, 'utf8')))
    .find((turn) => turn.reply.id === replyId);
}
