/**
 * `npm run security`: every attack is refused (none let through), no answer is a 5xx, every refusal has the
 * status the attack calls for, and the bounds themselves are accepted. The figures come from the run's JSON. CI
 * (`.ci/run`) runs `npm run security` itself before the tests and names its JSON in FHIRGATE_SECURITY_RESULTS: this
 * test then checks those results instead of running the suite a second time.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

interface SecurityResults {
  tried: number;
  letThrough: number;
  fiveHundreds: number;
  byKind: Record<string, { tried: number }>;
  figures: Record<string, string>;
  results: { kind: string; name: string; status: number; letThrough: boolean; note?: string; expectedServerStatus?: number }[];
}

test('the security suite lets nothing through and answers no attack with a 5xx', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'fhirgate-security-test-'));
  try {
    const file = process.env.FHIRGATE_SECURITY_RESULTS ?? join(dir, 'results.json');
    if (!process.env.FHIRGATE_SECURITY_RESULTS) {
      await run(process.execPath, ['security/run.ts', '--fuzz-runs', '1000', '--json', file], { maxBuffer: 16 * 1024 * 1024 }).catch((error: unknown) => error);
    }
    const results = JSON.parse(await readFile(file, 'utf8')) as SecurityResults;

    // A 5xx is a failure unless it is the answer the attack calls for (a store whose file is gone, a provider's 500).
    expect(results.results.filter((result) => result.letThrough || (result.status >= 500 && result.status !== result.expectedServerStatus))).toEqual([]);
    expect(results.results.filter((result) => result.note?.startsWith('expected'))).toEqual([]);
    expect({ letThrough: results.letThrough, fiveHundreds: results.fiveHundreds }).toEqual({ letThrough: 0, fiveHundreds: 0 });
    expect(Object.keys(results.byKind).sort()).toEqual([
      'budgets',
      'client keys',
      'conversation ownership',
      'data folder',
      'de-identification',
      'device keys',
      'device mutation budget',
      'device networks',
      'device writes',
      'exposure',
      'forged records',
      'fuzzing',
      'graphql schema builds',
      'isolation',
      'patient data egress',
      'request bodies',
      'request fields',
      'resource consumption',
      'retries',
      'secrets in logs',
      'sign-in',
      'tokens',
      'unauthenticated work',
    ]);
    expect(results.byKind.tokens.tried).toBeGreaterThanOrEqual(20);
    // The bounds themselves are not refused.
    const bounds = results.results.filter((item) => item.name.startsWith('exactly'));
    expect(bounds.length).toBeGreaterThanOrEqual(3);
    for (const result of bounds) {
      expect({ name: result.name, status: result.status, note: result.note }).toEqual({ name: result.name, status: 200, note: undefined });
    }
    expect(results.figures['device key timing']).toMatch(/difference -?\d+\.\d+ ms/);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}, 300_000);
