/**
 * What the host gives away without being asked properly: a search page of any size (`_count` is bounded at 1,000,
 * as on Medplum), the store and the reply journal readable by other local users (they hold signing keys, client
 * secrets and PHI: owner-only files and folders), and `/metrics` (it names projects and models) to anyone.
 */
import { mkdtemp, readdir, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Device } from '@medplum/fhirtypes';
import { ReplyJournal } from '../plugin/chat/reply-journal.ts';
import { openStandaloneStore, STORE_FILE_NAME } from '../plugin/hosts/standalone/open-store.ts';
import type { SecurityContext } from './context.ts';
import type { AttackOutcome } from './suite.ts';

const KIND = 'exposure';
/** Medplum's largest search page (`DEFAULT_MAX_SEARCH_COUNT`). */
export const MAX_SEARCH_COUNT = 1000;

export async function exposureAttacks(context: SecurityContext): Promise<void> {
  await searchPageAttacks(context);
  await fileModeAttacks(context);
  await metricsAttacks(context);
}

async function searchPageAttacks(context: SecurityContext): Promise<void> {
  const { log, host, projectA, tokenA } = context;
  // More Devices than one page may hold, all readable by A's practitioner (her policy reads every Device).
  const system = await host.standalone.host.getSystemRepo(projectA.projectId);
  for (let created = 0; created <= MAX_SEARCH_COUNT; created += 100) {
    await Promise.all(Array.from({ length: 100 }, (_, index) => system.createResource<Device>({ resourceType: 'Device', status: 'inactive', deviceName: [{ name: `page-filler-${created + index}`, type: 'user-friendly-name' }] })));
  }
  const pageOf = async (response: Response, key: (body: Record<string, unknown>) => unknown[] | undefined): Promise<AttackOutcome> => {
    const body = (await response.json()) as Record<string, unknown>;
    const size = key(body)?.length ?? 0;
    return { status: response.status, letThrough: size > MAX_SEARCH_COUNT, note: `${size} resources in one page` };
  };
  for (const count of ['100000', String(MAX_SEARCH_COUNT + 1)]) {
    await log.run(KIND, `GET /fhir/R4/Device?_count=${count} (at most ${MAX_SEARCH_COUNT} a page)`, async () => {
      const response = await fetch(`${host.url}fhir/R4/Device?_count=${count}`, { headers: { Authorization: `Bearer ${tokenA}` } });
      return pageOf(response, (body) => body.entry as unknown[] | undefined);
    });
  }
  await log.run(KIND, `DeviceList(_count: 100000) on /graphql (at most ${MAX_SEARCH_COUNT} a page)`, async () => {
    const response = await fetch(`${host.url}graphql`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${tokenA}`, 'X-Project-ID': projectA.projectId },
      body: JSON.stringify({ query: '{ DeviceList(_count: 100000) { id } }' }),
    });
    return pageOf(response, (body) => (body.data as { DeviceList?: unknown[] } | undefined)?.DeviceList);
  });
}

async function fileModeAttacks(context: SecurityContext): Promise<void> {
  const { log, host } = context;
  const readableByOthers = async (paths: string[]): Promise<AttackOutcome> => {
    const open: string[] = [];
    for (const path of paths) {
      const mode = (await stat(path)).mode & 0o777;
      if (mode & 0o077) open.push(`${path.split('/').slice(-2).join('/')} ${mode.toString(8)}`);
    }
    return { status: 0, letThrough: open.length > 0, note: open.length ? open.join(', ') : `${paths.length} files and folders owner-only` };
  };
  await log.run(KIND, "the running host's SQLite store and its WAL files", async () => {
    const names = (await readdir(host.dataDir)).filter((name) => name.startsWith(STORE_FILE_NAME));
    return readableByOthers(names.map((name) => join(host.dataDir, name)));
  });
  const scratch = await mkdtemp(join(tmpdir(), 'fhirgate-security-files-'));
  try {
    await log.run(KIND, 'a store opened in a data folder that does not exist yet', async () => {
      const dataDir = join(scratch, 'new', 'data');
      const store = openStandaloneStore(dataDir);
      store.close();
      return readableByOthers([join(scratch, 'new'), dataDir, ...(await readdir(dataDir)).map((name) => join(dataDir, name))]);
    });
    await log.run(KIND, 'a reply journal opened in a folder that does not exist yet', async () => {
      const root = join(scratch, 'journal');
      const journal = ReplyJournal.open(root);
      try {
        const paths = [root];
        for (const name of await readdir(root)) {
          paths.push(join(root, name), ...(await readdir(join(root, name))).map((file) => join(root, name, file)));
        }
        return await readableByOthers(paths);
      } finally {
        journal.close();
      }
    });
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
}

async function metricsAttacks(context: SecurityContext): Promise<void> {
  const { log, host, projectA } = context;
  const attempts: [string, Record<string, string>][] = [
    ['GET /metrics without credentials', {}],
    ['GET /metrics with a wrong bearer token', { Authorization: 'Bearer wrong-metrics-token-0123456789' }],
    ['GET /metrics with a user access token', { Authorization: `Bearer ${context.tokenA}` }],
  ];
  for (const [name, headers] of attempts) {
    await log.run(KIND, name, async () => {
      const response = await fetch(`${host.url}metrics`, { headers });
      const text = await response.text();
      const disclosed = text.includes('fhirgate_') || text.includes(projectA.projectId);
      return { status: response.status, letThrough: response.status === 200 || disclosed, note: disclosed ? 'the metrics were served' : undefined };
    });
  }
}
