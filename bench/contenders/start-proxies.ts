/** The floor contenders: the emulator itself, the undici proxy, the SDK relay (alone and with the store), and Portkey's open-source gateway. */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { keepTail, plainChatBody, type Contender, type ContenderName } from './contender.ts';
import { findFreePort, waitUntilAnswering } from '../lib/free-port.ts';
import { startNodeProcess, stopProcess, waitForOutput } from '../lib/processes.ts';

const PORTKEY_ENTRY = 'node_modules/@portkey-ai/gateway/build/start-server.js';

/** The emulator called directly: the latency floor every other contender is compared with. */
export function directContender(emulatorUrl: string): Contender {
  return {
    name: 'direct',
    chatUrl: `${emulatorUrl}/v1/chat/completions`,
    headers: { 'content-type': 'application/json', authorization: 'Bearer bench' },
    bodies: (stream) => [plainChatBody(stream)],
    stop: async () => {},
  };
}

/** The floor of any Node gateway: a proxy that parses nothing (undici-proxy.ts). */
export function startUndiciProxy(emulatorUrl: string, core: number | undefined): Promise<Contender> {
  return startRelay('undici proxy', 'bench/contenders/undici-proxy.ts', emulatorUrl, core);
}

/**
 * The floor of a gateway that calls the model through the official openai SDK, storing nothing (sdk-relay.ts);
 * `nodeFlags` go to its `node`.
 */
export function startSdkRelay(emulatorUrl: string, core: number | undefined, nodeFlags: readonly string[] = []): Promise<Contender> {
  return startRelay('SDK relay', 'bench/contenders/sdk-relay.ts', emulatorUrl, core, [], nodeFlags);
}

/**
 * The floor of a gateway that reads a conversation's history and stores fhirgate's two records per turn as the
 * standalone host does (sdk-relay-store.ts), its turns rotating through `conversations` as fhirgate's do, on a fresh
 * data directory under `dataRoot` (fhirgate's, so both write to the same disk); `nodeFlags` (e.g. `--cpu-prof`) go
 * to its `node`.
 */
export async function startSdkRelayWithStore(
  emulatorUrl: string,
  core: number | undefined,
  options: { readonly conversations: number; readonly dataRoot?: string; readonly nodeFlags?: readonly string[] }
): Promise<Contender> {
  const dataDir = await mkdtemp(join(options.dataRoot ?? tmpdir(), 'fhirgate-bench-floor-'));
  const relay = await startRelay(
    'SDK relay + store',
    'bench/contenders/sdk-relay-store.ts',
    emulatorUrl,
    core,
    ['--data-dir', dataDir, '--conversations', String(options.conversations)],
    options.nodeFlags
  );
  return {
    ...relay,
    conversations: options.conversations,
    stop: async () => {
      await relay.stop();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

async function startRelay(
  name: ContenderName,
  script: string,
  emulatorUrl: string,
  core: number | undefined,
  extraArgs: readonly string[] = [],
  nodeFlags: readonly string[] = []
): Promise<Contender> {
  const child = startNodeProcess([...nodeFlags, script, '--upstream', emulatorUrl, ...extraArgs], { core });
  keepTail(child.stderr);
  const match = await waitForOutput(child, 'stdout', /\{"url":"([^"]+)"\}/, 30_000);
  return {
    name,
    chatUrl: `${match[1]}/v1/chat/completions`,
    headers: { 'content-type': 'application/json', authorization: 'Bearer bench' },
    pid: child.pid,
    bodies: (stream) => [plainChatBody(stream)],
    stop: () => stopProcess(child),
  };
}

export async function startPortkey(emulatorUrl: string, core: number | undefined): Promise<Contender> {
  // Portkey takes `--port=N` only (no port 0), so the bench asks the OS for a free one first.
  const port = await findFreePort();
  // Portkey's start-up draws a spinner on stdout: nothing to read there.
  const child = startNodeProcess([PORTKEY_ENTRY, `--port=${port}`, '--headless'], { core, stdio: ['ignore', 'ignore', 'pipe'] });
  const stderrTail = keepTail(child.stderr);
  const baseUrl = `http://127.0.0.1:${port}`;
  await waitUntilAnswering(`${baseUrl}/`, 30_000, () => child.exitCode !== null, stderrTail);
  return {
    name: 'Portkey',
    chatUrl: `${baseUrl}/v1/chat/completions`,
    headers: {
      'content-type': 'application/json',
      authorization: 'Bearer bench',
      'x-portkey-provider': 'openai',
      'x-portkey-custom-host': `${emulatorUrl}/v1`,
    },
    pid: child.pid,
    bodies: (stream) => [plainChatBody(stream)],
    stop: () => stopProcess(child),
  };
}

