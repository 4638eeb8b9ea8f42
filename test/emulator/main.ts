#!/usr/bin/env node
// Runs the emulator as its own process (benchmarks, the chaos suite): `node test/emulator/main.ts --port 0`.
// Prints {"url": "..."} as one JSON line once it listens, so a parent process can read where to connect,
// and runs until SIGTERM or SIGINT.
import { parseArgs } from 'node:util';
import { parseBehaviour } from './behaviour.ts';
import { startLlmEmulator } from './server.ts';

const USAGE = [
  'Usage: node test/emulator/main.ts [--port N] [--host H] [--behaviour JSON] [--models a,b] [--record-limit N]',
  '',
  'The LLM emulator as a process: OpenAI, Azure OpenAI, Anthropic and Ollama wire formats on loopback.',
  'Prints {"url": "http://H:N"} on one line once it listens; runs until SIGTERM or SIGINT.',
  '',
  '  --port N            the port (default 0: any free port)',
  '  --host H            the address to listen on (default 127.0.0.1)',
  '  --behaviour JSON    the default behaviour of every request, e.g. {"latencyMs":20} (test/emulator/README.md)',
  '  --models a,b        the model names its model lists answer',
  '  --record-limit N    how many requests it keeps for inspection',
  '',
].join('\n');

const values = readArguments();

if (values.help) {
  process.stdout.write(USAGE);
  process.exit(0);
}

const emulator = await startLlmEmulator({
  port: readCount(values.port, '--port'),
  host: values.host,
  behaviour: values.behaviour === undefined ? undefined : parseBehaviour(JSON.parse(values.behaviour)),
  models: values.models?.split(',').map((name) => name.trim()),
  recordLimit: values['record-limit'] === undefined ? undefined : readCount(values['record-limit'], '--record-limit'),
});
process.stdout.write(`${JSON.stringify({ url: emulator.url })}\n`);

for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.once(signal, () => {
    emulator.close().then(
      () => process.exit(0),
      (error: unknown) => {
        process.stderr.write(`LLM emulator failed to close: ${String(error)}\n`);
        process.exit(1);
      },
    );
  });
}

function readCount(text: string, flag: string): number {
  const value = Number(text);
  if (!Number.isSafeInteger(value) || value < 0) {
    process.stderr.write(`${flag} must be an integer >= 0, got "${text}"\n`);
    process.exit(2);
  }
  return value;
}

function readArguments() {
  try {
    return parseArgs({
      options: {
        port: { type: 'string', default: '0' },
        host: { type: 'string', default: '127.0.0.1' },
        /** The default behaviour, as JSON. */
        behaviour: { type: 'string' },
        /** Comma-separated model names for the model lists. */
        models: { type: 'string' },
        'record-limit': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    }).values;
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\n\n${USAGE}`);
    process.exit(2);
  }
}
