/** Runs one LoadJob in a fresh load-generator process (pinned to the generator's core) and returns its result. */
import type { LoadJob, LoadResult } from './load-job.ts';
import { startNodeProcess } from '../lib/processes.ts';
import { text } from 'node:stream/consumers';

export async function runLoad<Result extends LoadResult>(job: LoadJob & { readonly kind: Result['kind'] }, core: number | undefined): Promise<Result> {
  // A larger heap: a thousand concurrent streams hold their bodies until they end.
  const child = startNodeProcess(['--max-old-space-size=2048', 'bench/load/load-worker.ts'], { core, stdio: ['pipe', 'pipe', 'pipe'] });
  const { stdin, stdout: output, stderr: errors } = child;
  if (!stdin || !output || !errors) throw new Error('the load generator\'s stdio is not piped');
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  stdin.end(JSON.stringify(job));
  const [stdout, stderr, code] = await Promise.all([text(output), text(errors), exited]);
  if (code !== 0) throw new Error(`load generator failed (${code}): ${stderr.slice(-2000)}`);
  const parsed = JSON.parse(stdout) as LoadResult;
  if (parsed.kind !== job.kind) throw new Error(`load generator answered ${parsed.kind} to a ${job.kind} job`);
  return parsed as Result;
}
