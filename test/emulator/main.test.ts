import { afterEach, expect, test } from '@jest/globals';
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { createInterface } from 'node:readline';

const mainPath = fileURLToPath(new URL('./main.ts', import.meta.url));
let child: ChildProcess | undefined;

afterEach(() => {
  if (child && child.exitCode === null) {
    child.kill('SIGKILL');
  }
  child = undefined;
});

// process.execPath is the Node that runs Jest (Node 24 from node_modules/.bin), which runs .ts natively.
test('the CLI prints its URL as one JSON line, serves requests and exits on SIGTERM', async () => {
  const started = spawn(process.execPath, [mainPath, '--port', '0', '--behaviour', '{"reply":"from the CLI"}'], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  child = started;
  const lines = createInterface({ input: started.stdout });
  const [firstLine] = (await once(lines, 'line')) as [string];
  const { url } = JSON.parse(firstLine) as { url: string };

  expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
  const response = await fetch(`${url}/api/chat`, {
    method: 'POST',
    body: JSON.stringify({ model: 'llama3.2', messages: [{ role: 'user', content: 'hi' }], stream: false }),
  });
  expect(await response.json()).toMatchObject({ message: { content: 'from the CLI' }, done: true });

  const exited = once(started, 'exit');
  started.kill('SIGTERM');
  expect(await exited).toEqual([0, null]);
});

test('--help prints the usage and exits 0; an unknown option names itself with the usage and exits 2', async () => {
  const run = async (argument: string): Promise<{ code: number | null; stdout: string; stderr: string }> => {
    const started = spawn(process.execPath, [mainPath, argument], { stdio: ['ignore', 'pipe', 'pipe'] });
    child = started;
    let stdout = '';
    let stderr = '';
    started.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    started.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const [code] = (await once(started, 'exit')) as [number | null];
    return { code, stdout, stderr };
  };
  const help = await run('--help');
  expect(help.code).toBe(0);
  expect(help.stdout).toContain('--record-limit N');
  const unknown = await run('--bogus');
  expect(unknown.code).toBe(2);
  expect(unknown.stderr).toContain("Unknown option '--bogus'");
  expect(unknown.stderr).toContain('Usage:');
});
