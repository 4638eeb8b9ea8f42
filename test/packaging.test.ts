/**
 * The package as a user gets it: `npm pack` (its prepack builds dist/), the tarball installed with
 * `npm install --omit=dev` into a fresh project, the exports imported there by package name, and the commands
 * run from that project's node_modules/.bin: the standalone host answers /healthcheck and a chat turn on the
 * offline demo model, with a token from `fhirgate-token`, and stops cleanly on SIGTERM.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdir, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { builtinModules } from 'node:module';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { packFhirgate, runNpm } from './support/packed-package.ts';
import { waitFor } from './support/wait-for.ts';

const run = promisify(execFile);
const DEMO_PROJECT = 'a1f0c0de-0000-4000-8000-000000000001';
const ISSUER = 'http://fhirgate.package.test/';

/** The environment of the installed commands: the Node running this test first on PATH, for their `#!/usr/bin/env node`. */
function commandEnvironment(dataDir: string): NodeJS.ProcessEnv {
  const { REDIS_URL: _redis, FHIRGATE_DEVICE_AUTH: _deviceAuth, ...inherited } = process.env;
  return {
    ...inherited,
    PATH: `${dirname(process.execPath)}${delimiter}${process.env.PATH ?? ''}`,
    PORT: '0',
    HOST: '127.0.0.1',
    FHIRGATE_BASE_URL: ISSUER,
    FHIRGATE_DATA_DIR: dataDir,
    LOG_LEVEL: 'info',
    AI_PROVIDER: '',
  };
}

/** Every file under a folder, relative to it. */
async function listFiles(folder: string): Promise<string[]> {
  const entries = await readdir(folder, { recursive: true, withFileTypes: true });
  return entries.filter((entry) => entry.isFile()).map((entry) => join(entry.parentPath, entry.name).slice(folder.length + 1));
}

/** Waits for a spawned command's output to match; fails with the output if the command exits first. */
async function waitForOutput(child: ChildProcess, pattern: RegExp, stream: 'stdout' | 'stderr'): Promise<RegExpExecArray> {
  let output = '';
  child[stream]?.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  try {
    return await waitFor(async () => {
      if (child.exitCode !== null) {
        throw new Error(`exited with ${child.exitCode}`);
      }
      return pattern.exec(output) ?? undefined;
    }, 60_000);
  } catch (error) {
    throw new Error(`${String(error)}; its ${stream}: ${output}`);
  }
}

async function stop(child: ChildProcess): Promise<number | null> {
  const exited = child.exitCode === null && child.signalCode === null ? once(child, 'exit') : Promise.resolve([child.exitCode]);
  child.kill('SIGTERM');
  const [code] = (await exited) as [number | null];
  return code;
}

describe('the packed and installed package', () => {
  let workDir: string;
  let consumerDir: string;
  let tarballEntries: string[];
  const children: ChildProcess[] = [];

  beforeAll(async () => {
    workDir = await mkdtemp(join(tmpdir(), 'fhirgate-package-'));
    consumerDir = join(workDir, 'consumer');
    const tarball = await packFhirgate(workDir);
    const { stdout } = await run('tar', ['-tzf', tarball], { maxBuffer: 16 * 1024 * 1024 });
    tarballEntries = stdout.split('\n').filter(Boolean).map((entry) => entry.replace(/^package\//, ''));

    await mkdir(consumerDir);
    await writeFile(join(consumerDir, 'package.json'), JSON.stringify({ name: 'fhirgate-consumer', private: true, type: 'module' }));
    await runNpm(['install', '--omit=dev', '--no-audit', '--no-fund', tarball], consumerDir);
  }, 150_000);

  afterAll(async () => {
    await Promise.all(children.filter((child) => child.exitCode === null).map(stop));
    await rm(workDir, { recursive: true, force: true });
  });

  test('the tarball holds the build with its declarations, and no tests, sources, secrets or data', () => {
    expect(tarballEntries).toEqual(
      expect.arrayContaining([
        'package.json',
        'README.md',
        'LICENSE',
        'CHANGELOG.md',
        'dist/plugin/index.js',
        'dist/plugin/index.d.ts',
        'dist/plugin/hosts/medplum-server.d.ts',
        'dist/plugin/hosts/standalone/index.d.ts',
        'dist/plugin/hosts/standalone/main.js',
        'dist/test/emulator/main.js',
        'dist/fixtures/demo-project.json',
        'docs/mounting.md',
      ])
    );
    const unwanted = tarballEntries.filter(
      (entry) =>
        /\.test\.|(^|\/)(data|secrets|node_modules|coverage)\//.test(entry) ||
        /\.(sqlite|sqlite-\w+|env|pem|key|log)$/.test(entry) ||
        (entry.endsWith('.ts') && !entry.endsWith('.d.ts'))
    );
    expect(unwanted).toEqual([]);
  });

  test('the installed JavaScript imports only Node built-ins and the declared dependencies', async () => {
    const packageDir = join(consumerDir, 'node_modules', 'fhirgate');
    const manifest = JSON.parse(await readFile(join(packageDir, 'package.json'), 'utf8')) as {
      dependencies: Record<string, string>;
      peerDependencies: Record<string, string>;
    };
    const declared = { ...manifest.dependencies, ...manifest.peerDependencies };
    const files = (await listFiles(join(packageDir, 'dist'))).filter((file) => file.endsWith('.js'));
    const undeclared = new Set<string>();
    for (const file of files) {
      const source = await readFile(join(packageDir, 'dist', file), 'utf8');
      // Static imports and re-exports (at the start of a line, as tsc writes them) and dynamic imports; a string that
      // merely holds the word (a Lua script's `'from'` field) is not an import.
      const imports = /^\s*import\s*['"]([^'"]+)['"]|^\s*(?:import|export)\b[^'";]*?\bfrom\s*['"]([^'"]+)['"]|\bimport\s*\(\s*['"]([^'"]+)['"]/gm;
      for (const match of source.matchAll(imports)) {
        const specifier = match[1] ?? match[2] ?? match[3] ?? '';
        if (specifier.startsWith('.') || specifier.startsWith('node:') || builtinModules.includes(specifier)) {
          continue;
        }
        const name = specifier.split('/').slice(0, specifier.startsWith('@') ? 2 : 1).join('/');
        if (!(name in declared)) {
          undeclared.add(`${name} (${file})`);
        }
      }
    }
    expect([...undeclared]).toEqual([]);
  });

  test('the exports load by package name, with import and with require', async () => {
    await writeFile(
      join(consumerDir, 'load-exports.js'),
      [
        "import { createRequire } from 'node:module';",
        "import * as plugin from 'fhirgate';",
        "import * as medplumServer from 'fhirgate/hosts/medplum-server';",
        "import * as standalone from 'fhirgate/hosts/standalone';",
        "const required = createRequire(import.meta.url)('fhirgate');",
        'const kinds = (module, names) => Object.fromEntries(names.map((name) => [name, typeof module[name]]));',
        'console.log(JSON.stringify({',
        "  plugin: kinds(plugin, ['createFhirgatePlugin', 'readProviderConfigFromEnvironment', 'AppError']),",
        "  medplumServer: kinds(medplumServer, ['createMedplumServerHost', 'mountFhirgate', 'readProviderConfigFromEnvironment']),",
        "  standalone: kinds(standalone, ['createStandaloneHost', 'openStandaloneStore', 'seedProject', 'readProjectFixture', 'createJsonLogger']),",
        "  required: kinds(required, ['createFhirgatePlugin']),",
        "  version: createRequire(import.meta.url)('fhirgate/package.json').version,",
        '}));',
      ].join('\n')
    );
    const { stdout } = await run(process.execPath, ['load-exports.js'], { cwd: consumerDir });
    const loaded = JSON.parse(stdout) as Record<string, Record<string, string> | string>;
    for (const group of ['plugin', 'medplumServer', 'standalone', 'required'] as const) {
      expect(Object.values(loaded[group])).toEqual(Object.values(loaded[group]).map(() => 'function'));
    }
    expect(loaded.version).toMatch(/^\d+\.\d+\.\d+/);
  });

  test('TypeScript finds the declarations of every export', async () => {
    await writeFile(
      join(consumerDir, 'use-types.ts'),
      [
        "import { createFhirgatePlugin, type FhirgateOptionsInput } from 'fhirgate';",
        "import { createMedplumServerHost, mountFhirgate } from 'fhirgate/hosts/medplum-server';",
        "import { createStandaloneHost, type StandaloneHostOptions } from 'fhirgate/hosts/standalone';",
        'const options: FhirgateOptionsInput = {};',
        "const baseUrl: StandaloneHostOptions['baseUrl'] = 'http://localhost:8103/';",
        'export const used = [createFhirgatePlugin, mountFhirgate, createMedplumServerHost, createStandaloneHost, options, baseUrl];',
      ].join('\n')
    );
    await writeFile(
      join(consumerDir, 'tsconfig.json'),
      JSON.stringify({ compilerOptions: { module: 'nodenext', strict: true, noEmit: true, skipLibCheck: true, types: [] }, files: ['use-types.ts'] })
    );
    const tsc = join(process.cwd(), 'node_modules', 'typescript', 'bin', 'tsc');
    const compile = run(process.execPath, [tsc, '-p', consumerDir]);
    await expect(compile).resolves.toBeDefined();
  });

  test('`fhirgate` serves /healthcheck and the demo model, with a `fhirgate-token` token, and exits 0 on SIGTERM', async () => {
    const dataDir = join(workDir, 'data');
    const environment = commandEnvironment(dataDir);
    const host = spawn(join(consumerDir, 'node_modules', '.bin', 'fhirgate'), [], { cwd: consumerDir, env: environment, stdio: ['ignore', 'ignore', 'pipe'] });
    children.push(host);
    const [, url] = await waitForOutput(host, /"msg":"fhirgate standalone host started","url":"([^"]+)"/, 'stderr');

    // The command starts Node with the flags `npm start` gives it (main.ts's first line), the heap's bounds.
    const startScript = (JSON.parse(await readFile('package.json', 'utf8')) as { scripts: { start: string } }).scripts.start;
    const startFlags = startScript.split(/\s+/).filter((word) => word.startsWith('--'));
    expect(startFlags).toEqual(expect.arrayContaining(['--max-semi-space-size=8', '--heap-growing-percent=50']));
    const commandLine = (await readFile(`/proc/${host.pid}/cmdline`, 'utf8')).split('\0');
    expect(commandLine).toEqual(expect.arrayContaining(startFlags));

    const health = await fetch(`${url}healthcheck`);
    expect(health.status).toBe(200);
    expect(await health.json()).toMatchObject({ ok: true });

    const { stdout: token } = await run(join(consumerDir, 'node_modules', '.bin', 'fhirgate-token'), [], { cwd: consumerDir, env: environment });
    const chat = await fetch(`${url}v1/chat/completions`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${token.trim()}`, 'X-Project-ID': DEMO_PROJECT, 'Content-Type': 'application/json' },
      body: JSON.stringify({ messages: [{ role: 'user', content: 'hello from the package' }] }),
    });
    expect(chat.status).toBe(200);
    expect(await chat.json()).toMatchObject({ model: 'demo/echo', choices: [{ message: { content: 'Echo: hello from the package' } }] });

    expect(await stop(host)).toBe(0);
  }, 90_000);

  test('`fhirgate provision --help` prints its usage, and its ready-made policies are in the package', async () => {
    const environment = commandEnvironment(join(workDir, 'unused'));
    const { stdout } = await run(join(consumerDir, 'node_modules', '.bin', 'fhirgate'), ['provision', '--help'], { cwd: consumerDir, env: environment });
    expect(stdout).toMatch(/^Usage: fhirgate provision --base-url/);
    const { readReadyMadePolicies } = (await import(join(consumerDir, 'node_modules', 'fhirgate', 'dist', 'plugin', 'provision', 'ready-made-policies.js'))) as {
      readReadyMadePolicies: () => Promise<Record<string, { resourceType: string }>>;
    };
    expect(Object.values(await readReadyMadePolicies()).map((policy) => policy.resourceType)).toEqual(['AccessPolicy', 'AccessPolicy', 'AccessPolicy']);
  });

  test('`fhirgate-emulator` prints its URL and exits 0 on SIGTERM', async () => {
    const emulator = spawn(join(consumerDir, 'node_modules', '.bin', 'fhirgate-emulator'), ['--port', '0'], {
      cwd: consumerDir,
      env: commandEnvironment(join(workDir, 'unused')),
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    children.push(emulator);
    const [, url] = await waitForOutput(emulator, /\{"url":"([^"]+)"\}/, 'stdout');
    expect((await fetch(`${url}/v1/models`)).status).toBe(200);
    expect(await stop(emulator)).toBe(0);
  });
});
