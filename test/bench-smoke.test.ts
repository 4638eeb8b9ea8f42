/**
 * SMOKE RUN of the benchmark (`node bench/run.ts --smoke`), so `npm run bench` keeps working: every contender
 * starts, answers every scenario without an error, and the report is written. It asserts no timing: the numbers
 * of a smoke run (tiny counts, one repetition, on a busy CI machine) mean nothing. Scenarios 5 and 6 belong to
 * their own scripts and are left out to keep this under two minutes.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { ScenarioSection } from '../bench/lib/section.ts';

const run = promisify(execFile);
const CONTENDERS = ['direct', 'undici proxy', 'SDK relay', 'Portkey', 'fhirgate'];

describe('bench smoke run', () => {
  let outDirectory: string;

  beforeAll(async () => {
    outDirectory = await mkdtemp(join(tmpdir(), 'fhirgate-bench-smoke-'));
  });

  afterAll(async () => {
    await rm(outDirectory, { recursive: true, force: true });
  });

  test('every contender answers every scenario without an error, and the report is written', async () => {
    await run(process.execPath, ['bench/run.ts', '--smoke', '--only', '1,2,3,4', '--out-dir', outDirectory], { timeout: 170_000, maxBuffer: 16 * 1024 * 1024 });

    const sections = JSON.parse(await readFile(join(outDirectory, 'raw', 'sections.json'), 'utf8')) as ScenarioSection[];
    expect(sections.map((section) => section.title.split('.')[0])).toEqual(['1', '2', '3', '4']);
    for (const section of sections) {
      const errorsColumn = section.table.columns.indexOf('errors');
      expect(section.table.rows.map((row) => row[0])).toEqual(CONTENDERS);
      expect(section.table.rows.map((row) => [row[0], row[errorsColumn]])).toEqual(CONTENDERS.map((name) => [name, 0]));
    }

    const report = await readFile(join(outDirectory, 'report.md'), 'utf8');
    for (const section of sections) expect(report).toContain(`## ${section.title}`);
    expect(await readFile(join(outDirectory, 'chart.svg'), 'utf8')).toMatch(/^<svg /);
  }, 180_000);
});
