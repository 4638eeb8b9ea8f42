import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ReplyJournal } from './reply-journal.ts';

test('the reply journal (prompts\' parties, reply text) is owner-only: folders 0700, files 0600, whatever the umask', () => {
  const scratch = mkdtempSync(join(tmpdir(), 'fhirgate-journal-modes-'));
  const umask = process.umask(0o000);
  try {
    const root = join(scratch, 'data', 'journal');
    const journal = ReplyJournal.open(root);
    const [own] = readdirSync(root);
    const paths = [join(scratch, 'data'), root, join(root, own), ...readdirSync(join(root, own)).map((name) => join(root, own, name))];
    expect(paths.map((path) => [path.slice(scratch.length), (statSync(path).mode & 0o777).toString(8)])).toEqual([
      ['/data', '700'],
      ['/data/journal', '700'],
      [`/data/journal/${own}`, '700'],
      ...readdirSync(join(root, own)).map((name) => [`/data/journal/${own}/${name}`, '600']),
    ]);
    expect(readdirSync(join(root, own)).sort()).toEqual(['LOCK', 'replies.jsonl']);
    journal.close();
  } finally {
    process.umask(umask);
    rmSync(scratch, { recursive: true, force: true });
  }
});
