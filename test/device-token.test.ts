/**
 * The device token exchange end to end: real HTTP to a standalone host, the spec's exact request and response,
 * every refusal, the AuditEvents read back with MedplumClient, the rate limit in memory and on Redis, the limits on
 * failed attempts (callers on distinct loopback addresses), the bounded record of refusals, and weak keys refused
 * at start.
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MedplumClient } from '@medplum/core';
import type { AuditEvent, Device } from '@medplum/fhirtypes';
import { decodeJwt, decodeProtectedHeader, jwtVerify } from 'jose';
import type { Redis } from 'ioredis';
import { startTestHost, type TestHost } from './support/test-host.ts';
import { connectTestRedis, describeWithRedis } from './support/redis.ts';
import { postJsonFrom } from './support/from-address.ts';
import { waitFor } from './support/wait-for.ts';
import type { SeededProject } from '../plugin/hosts/standalone/seed.ts';
import type { DeviceAuthInput } from '../plugin/devices/device-auth-config.ts';

const SYSTEM = 'urn:example:devices';
const JWT_SECRET = 'test-device-signing-secret-0123456789abcdef';
const MONITOR_KEY = 'Monitor-Key-1111-aaaa-Qz7';

function deviceAuth(project: SeededProject, overrides: Partial<DeviceAuthInput> = {}): DeviceAuthInput {
  return {
    valid_keys: {
      'monitor-1': `env:FHIRGATE_TEST_MONITOR_KEY`,
      'monitor-2': ['old-key-2222-monitor-2-Rt5w', 'new-key-2222-monitor-2-Yp8k'],
      'pump-off': 'pump-key-3333-pump-off-Hs2q',
      'scale-new': 'scale-key-4444-scale-new-Jb6m',
    },
    jwt_secret: JWT_SECRET,
    token_expiry_minutes: 60,
    identifier_system: SYSTEM,
    project_id: project.projectId,
    ...overrides,
  };
}

// Keys may come from the environment (`env:NAME`), as the spec expects of secrets.
beforeAll(() => {
  process.env.FHIRGATE_TEST_MONITOR_KEY = MONITOR_KEY;
});

afterAll(() => {
  delete process.env.FHIRGATE_TEST_MONITOR_KEY;
});

async function exchange(host: TestHost, body: unknown, raw?: string): Promise<{ status: number; body: any; headers: Headers }> {
  const response = await fetch(`${host.url}account/api/token/device/`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: raw ?? JSON.stringify(body),
  });
  return { status: response.status, body: await response.json(), headers: response.headers };
}

describe('POST /account/api/token/device/', () => {
  let host: TestHost;
  let medplum: MedplumClient;
  let devices: Record<string, Device>;

  beforeAll(async () => {
    host = await startTestHost({
      pluginFor: (project) => ({
        device_auth: deviceAuth(project),
        // A chat provider that is never reached: device tokens are refused before any call.
        llm: { providers: { openai: { kind: 'openai', apiKey: 'sk-unused', baseUrl: 'http://127.0.0.1:9/v1', models: ['gpt-4o-mini'] } }, defaultModel: 'openai/gpt-4o-mini' },
      }),
    });
    const project = host.project as SeededProject;
    const repo = await host.standalone.host.getSystemRepo(project.projectId);
    const create = (id: string, status: Device['status'], identifiers = [{ system: SYSTEM, value: id }]) =>
      repo.createResource<Device>({ resourceType: 'Device', status, identifier: identifiers });
    devices = {
      'monitor-1': await create('monitor-1', 'active', [{ system: 'urn:example:serial', value: 'SN-1' }, { system: SYSTEM, value: 'monitor-1' }]),
      'monitor-2': await create('monitor-2', 'active'),
      'pump-off': await create('pump-off', 'inactive'),
    };
    medplum = new MedplumClient({ baseUrl: host.url, fetch });
    await medplum.startClientLogin(project.client?.id ?? '', project.client?.secret ?? '');
  });

  afterAll(async () => {
    await host.close();
  });

  async function auditEvents(): Promise<AuditEvent[]> {
    return medplum.searchResources('AuditEvent', { _count: '1000', _sort: '-_lastUpdated' }, { cache: 'no-cache' });
  }

  test("the spec's request gets a 200 with an HS256 token carrying the spec's claims, and the issuance is audited", async () => {
    const before = Math.floor(Date.now() / 1000);
    const { status, body, headers } = await exchange(host, { device_id: 'monitor-1', api_key: MONITOR_KEY });

    expect(status).toBe(200);
    expect(Object.keys(body).sort()).toEqual(['access', 'expires_in']);
    expect(body.expires_in).toBe(3600);
    expect(body.access.split('.')).toHaveLength(3);
    expect(headers.get('cache-control')).toBe('no-store');
    expect(decodeProtectedHeader(body.access)).toEqual({ alg: 'HS256', typ: 'device+jwt' });
    const { payload } = await jwtVerify(body.access, new TextEncoder().encode(JWT_SECRET), { algorithms: ['HS256'] });
    expect(payload).toMatchObject({ sub: 'monitor-1', entity_id: devices['monitor-1'].id, is_device: true, aud: 'urn:fhirgate:device' });
    expect(payload.exp).toBeGreaterThanOrEqual(before + 3600);
    expect(payload.exp).toBeLessThanOrEqual(Math.floor(Date.now() / 1000) + 3600);
    expect(typeof payload.jti).toBe('string');

    const issued = (await auditEvents()).find((event) => event.entity?.[0]?.detail?.[0]?.valueString === payload.jti);
    expect(issued).toMatchObject({
      type: { code: '110114' },
      subtype: [{ code: '110122' }],
      outcome: '0',
      agent: [{ who: { reference: `Device/${devices['monitor-1'].id}` }, requestor: true, network: { type: '2' } }],
      entity: [{ what: { reference: `Device/${devices['monitor-1'].id}` } }],
    });
    expect(issued?.agent?.[0]?.network?.address).toMatch(/127\.0\.0\.1/);
    expect(JSON.stringify(issued)).not.toContain(MONITOR_KEY);
    expect(JSON.stringify(issued)).not.toContain(body.access);
  });

  test('an unknown device and a wrong key get the same 403 body; both are audited with their reason, never the key', async () => {
    const wrongKey = await exchange(host, { device_id: 'monitor-1', api_key: 'monitor-key-1111-AAAA-qZ7' });
    const unknown = await exchange(host, { device_id: 'intruder-9', api_key: MONITOR_KEY });

    expect(wrongKey.status).toBe(403);
    expect(unknown.status).toBe(403);
    expect(wrongKey.body).toEqual(unknown.body);
    expect(wrongKey.body.error).toMatchObject({ message: expect.any(String), type: 'permission_error', code: 'forbidden' });

    const events = await auditEvents();
    const reasons = events.filter((event) => event.outcome === '4').map((event) => event.entity?.[0]?.detail?.[0]?.valueString);
    expect(reasons).toEqual(expect.arrayContaining(['wrong_key', 'unknown_device']));
    const refusedUnknown = events.find((event) => event.entity?.[0]?.detail?.[0]?.valueString === 'unknown_device');
    expect(refusedUnknown?.agent?.[0]?.who).toMatchObject({ identifier: { system: SYSTEM, value: 'intruder-9' } });
    expect(JSON.stringify(events)).not.toContain('monitor-key-1111-AAAA-qZ7');
    expect(JSON.stringify(events)).not.toContain(MONITOR_KEY);
  });

  test.each([
    ['a key in another case', 'MONITOR-KEY-1111-AAAA-QZ7'],
    ['a shorter key', 'Monitor'],
    ['a much longer key', `${MONITOR_KEY}${'x'.repeat(3000)}`],
    ['a one-character key', 'M'],
  ])('%s is a 403, never a 500', async (_name, apiKey) => {
    const { status, body } = await exchange(host, { device_id: 'monitor-1', api_key: apiKey });
    expect(status).toBe(403);
    expect(body.error.code).toBe('forbidden');
  });

  test('both keys of a device in rotation work, and an inactive Device gets 403 with a valid key', async () => {
    expect((await exchange(host, { device_id: 'monitor-2', api_key: 'old-key-2222-monitor-2-Rt5w' })).status).toBe(200);
    expect((await exchange(host, { device_id: 'monitor-2', api_key: 'new-key-2222-monitor-2-Yp8k' })).status).toBe(200);

    // From an address of its own: the refusals above from 127.0.0.1 are past the few recorded one by one.
    const inactive = await postJsonFrom(`${host.url}account/api/token/device/`, '127.0.0.6', { device_id: 'pump-off', api_key: 'pump-key-3333-pump-off-Hs2q' });
    expect(inactive.status).toBe(403);
    expect((inactive.body as { error: { message: string } }).error.message).toContain('not active');
    const event = (await auditEvents()).find((candidate) => candidate.entity?.[0]?.detail?.[0]?.valueString === 'inactive_device');
    expect(event?.agent?.[0]?.who?.reference).toBe(`Device/${devices['pump-off'].id}`);
  });

  test('a device with a valid key but no Device resource is refused when auto-registration is off', async () => {
    const { status, body } = await exchange(host, { device_id: 'scale-new', api_key: 'scale-key-4444-scale-new-Jb6m' });
    expect(status).toBe(403);
    expect(body.error.code).toBe('forbidden');
  });

  const NOT_AN_OBJECT = 'The request body must be a JSON object with device_id and api_key.';
  test.each([
    ['no body fields', {}, undefined, { message: 'device_id is required and must be a non-empty string.', param: 'device_id' }],
    ['no api_key', { device_id: 'monitor-1' }, undefined, { message: 'api_key is required and must be a non-empty string.', param: 'api_key' }],
    ['a numeric device_id', { device_id: 42, api_key: MONITOR_KEY }, undefined, { message: 'device_id is required and must be a non-empty string.', param: 'device_id' }],
    ['an empty api_key', { device_id: 'monitor-1', api_key: '' }, undefined, { message: 'api_key is required and must be a non-empty string.', param: 'api_key' }],
    ['a JSON array', [{ device_id: 'monitor-1', api_key: MONITOR_KEY }], undefined, { message: NOT_AN_OBJECT, param: null }],
    ['malformed JSON', undefined, '{"device_id": "monitor-1", "api_key": ', { message: expect.any(String) }],
  ])('%s is a 400 with the error body, naming what is wrong', async (_name, body, raw, expected) => {
    const response = await exchange(host, body, raw);
    expect(response.status).toBe(400);
    expect(response.body.error).toMatchObject({ type: 'invalid_request_error', code: 'invalid_request', ...expected });
  });

  test('a device with a valid key but no Device gets the answer an unknown device gets, and its refusal is on record with its reason', async () => {
    const unmapped = await postJsonFrom(`${host.url}account/api/token/device/`, '127.0.0.7', { device_id: 'scale-new', api_key: 'scale-key-4444-scale-new-Jb6m' });
    expect(unmapped.status).toBe(403);
    expect((unmapped.body as { error: { message: string } }).error.message).toBe('Invalid device credentials.');
    const reasons = (await auditEvents()).map((event) => event.entity?.[0]?.detail?.[0]?.valueString);
    expect(reasons).toContain('unmapped_device');
  });

  test('a device token is refused on the chat routes (401), and on the FHIR API', async () => {
    const { body } = await exchange(host, { device_id: 'monitor-1', api_key: MONITOR_KEY });
    const headers = { Authorization: `Bearer ${body.access}`, 'X-Project-ID': host.project?.projectId ?? '', 'Content-Type': 'application/json' };

    const models = await fetch(`${host.url}v1/models`, { headers });
    expect(models.status).toBe(401);
    const chat = await fetch(`${host.url}v1/chat/completions`, { method: 'POST', headers, body: JSON.stringify({ messages: [{ role: 'user', content: 'hi' }] }) });
    expect(chat.status).toBe(401);
    expect(((await chat.json()) as { error: { code: string } }).error.code).toBe('unauthenticated');
    const fhir = await fetch(`${host.url}fhir/R4/Device`, { headers });
    expect(fhir.status).toBe(401);
  });
});

describe('device auto-registration', () => {
  test('the first valid exchange of a device without a Device registers an active one, once', async () => {
    const host = await startTestHost({
      pluginFor: (project) => ({ device_auth: { ...deviceAuth(project), auto_register: true, manufacturer: 'Acme Medical' } }),
    });
    try {
      const first = await exchange(host, { device_id: 'scale-new', api_key: 'scale-key-4444-scale-new-Jb6m' });
      const second = await exchange(host, { device_id: 'scale-new', api_key: 'scale-key-4444-scale-new-Jb6m' });
      expect(first.status).toBe(200);
      expect(second.status).toBe(200);
      expect(decodeJwt(first.body.access).entity_id).toBe(decodeJwt(second.body.access).entity_id);

      const repo = await host.standalone.host.getSystemRepo(host.project?.projectId ?? '');
      const registered = await repo.searchResources<Device>({ resourceType: 'Device', filters: [{ code: 'identifier', operator: 'eq', value: `${SYSTEM}|scale-new` }] });
      expect(registered).toHaveLength(1);
      expect(registered[0]).toMatchObject({ id: decodeJwt(first.body.access).entity_id, status: 'active', identifier: [{ system: SYSTEM, value: 'scale-new' }] });
      expect(registered[0].deviceName?.[0]?.name).toBe('Acme Medical');
    } finally {
      await host.close();
    }
  });
});

describe('device rate limit in memory', () => {
  test('over the per-device limit is a 429 with Retry-After; another device is not affected', async () => {
    const host = await startTestHost({ pluginFor: (project) => ({ device_auth: { ...deviceAuth(project), rate_limit_per_second: 3 } }) });
    try {
      const statuses = await Promise.all(Array.from({ length: 5 }, () => exchange(host, { device_id: 'monitor-2', api_key: 'old-key-2222-monitor-2-Rt5w' })));
      const limited = statuses.filter((response) => response.status === 429);
      expect(limited).toHaveLength(2);
      expect(Number(limited[0].headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      expect(limited[0].body.error).toMatchObject({ type: 'rate_limit_error', code: 'rate_limited' });
      // Each refusal is on record with its reason.
      const events = await host.store.searchResources<AuditEvent>({ resourceType: 'AuditEvent', count: 100 });
      expect(events.filter((event) => event.entity?.[0]?.detail?.[0]?.valueString === 'rate_limited')).toHaveLength(2);
      expect((await exchange(host, { device_id: 'pump-off', api_key: 'pump-key-3333-pump-off-Hs2q' })).status).toBe(403);
    } finally {
      await host.close();
    }
  });
});

describe('failed attempts', () => {
  const TOKEN_ROUTE = 'account/api/token/device/';
  const from = (host: TestHost, address: string, deviceId: string, apiKey: string) => postJsonFrom(`${host.url}${TOKEN_ROUTE}`, address, { device_id: deviceId, api_key: apiKey });
  // Each host registers a device's Device at its first valid exchange.
  const options = (overrides: Partial<DeviceAuthInput>) => (project: SeededProject) => ({ device_auth: { ...deviceAuth(project), auto_register: true, ...overrides } });

  test("a stranger's wrong keys for a device id do not spend the device's budget: the device keeps getting tokens", async () => {
    const host = await startTestHost({ pluginFor: options({ rate_limit_per_second: 3 }) });
    try {
      // 40 wrong keys at once from one address, and the device's own 3 exchanges in the same second from another.
      const stranger = Promise.all(Array.from({ length: 40 }, (_, index) => from(host, '127.0.0.2', 'monitor-2', `guess-${index}-${randomUUID()}`)));
      const device = Promise.all(Array.from({ length: 3 }, () => from(host, '127.0.0.3', 'monitor-2', 'old-key-2222-monitor-2-Rt5w')));
      const [guesses, exchanges] = await Promise.all([stranger, device]);

      expect(exchanges.map((response) => response.status)).toEqual([200, 200, 200]);
      expect(guesses.every((response) => response.status === 403 || response.status === 429)).toBe(true);
      // The stranger runs into the failure limits, not the device's budget.
      expect(guesses.filter((response) => response.status === 429).length).toBeGreaterThan(0);
    } finally {
      await host.close();
    }
  });

  test('past the per-source limit a source is locked out (429, Retry-After), another source is not, and the right key still passes', async () => {
    const host = await startTestHost({ pluginFor: options({ failed_attempts_per_source: 3, failed_attempts_per_device: 100, lockout_seconds: 120 }) });
    try {
      const statuses: number[] = [];
      for (let attempt = 0; attempt < 5; attempt++) {
        statuses.push((await from(host, '127.0.0.4', 'monitor-1', `wrong-${attempt}`)).status);
      }
      expect(statuses).toEqual([403, 403, 403, 429, 429]);
      const locked = await from(host, '127.0.0.4', 'intruder-9', 'wrong');
      expect(locked.status).toBe(429);
      expect(Number(locked.headers['retry-after'])).toBeGreaterThan(60);
      expect(locked.body).toEqual({ error: { message: 'Too many failed attempts; try again later.', type: 'rate_limit_error', code: 'rate_limited', param: null } });

      expect((await from(host, '127.0.0.5', 'monitor-1', 'wrong')).status).toBe(403);
      expect((await from(host, '127.0.0.4', 'monitor-1', MONITOR_KEY)).status).toBe(200);
    } finally {
      await host.close();
    }
  });

  test('past the per-device limit, wrong keys for that id are 429 from any source; its key still passes; an unknown id is answered alike', async () => {
    const host = await startTestHost({ pluginFor: options({ failed_attempts_per_source: 100, failed_attempts_per_device: 3 }) });
    try {
      const spread = async (deviceId: string, firstAddress: number): Promise<number[]> => {
        const statuses: number[] = [];
        for (let index = 0; index < 5; index++) {
          statuses.push((await from(host, `127.0.1.${firstAddress + index}`, deviceId, `wrong-${index}`)).status);
        }
        return statuses;
      };
      expect(await spread('monitor-1', 10)).toEqual([403, 403, 403, 429, 429]);
      expect(await spread('ghost-device-7', 20)).toEqual([403, 403, 403, 429, 429]);
      expect((await from(host, '127.0.1.30', 'monitor-1', MONITOR_KEY)).status).toBe(200);
      expect((await from(host, '127.0.1.31', 'monitor-2', 'wrong')).status).toBe(403);
    } finally {
      await host.close();
    }
  });

  test('refusals past the first few of a source are summarised: a bounded number of AuditEvents, every refusal counted', async () => {
    const host = await startTestHost({ pluginFor: options({ failed_attempts_window_seconds: 1 }) });
    try {
      const source = '127.0.2.1';
      const started = Date.now();
      const sent = 300;
      for (let batch = 0; batch < sent / 20; batch++) {
        await Promise.all(Array.from({ length: 20 }, (_, index) => from(host, source, `unknown-${batch}-${index}`, 'any-key')));
      }
      const periods = Math.ceil((Date.now() - started) / 1000) + 1;
      const repo = await host.standalone.host.getSystemRepo(host.project?.projectId ?? '');
      const recorded = async (): Promise<AuditEvent[]> =>
        (await repo.searchResources<AuditEvent>({ resourceType: 'AuditEvent', count: 1000 })).filter((event) => event.agent?.[0]?.network?.address === source);
      const detail = (event: AuditEvent, type: string) => event.entity?.[0]?.detail?.find((item) => item.type === type)?.valueString;
      const counted = (events: AuditEvent[]) => events.reduce((sum, event) => sum + (detail(event, 'reason') === 'summary' ? Number(detail(event, 'count')) : 1), 0);
      // The last period's summary is written once that period is over.
      const events = await waitFor(async () => {
        const found = await recorded();
        return counted(found) === sent ? found : undefined;
      }, 15_000);

      expect(events.length).toBeLessThanOrEqual(6 * periods);
      expect(events.filter((event) => detail(event, 'reason') === 'summary').length).toBeGreaterThan(0);
      const summary = events.find((event) => detail(event, 'reason') === 'summary');
      expect(summary).toMatchObject({ outcome: '4', period: { start: expect.any(String), end: expect.any(String) } });
      expect(JSON.stringify(events)).not.toContain('any-key');
    } finally {
      await host.close();
    }
  }, 30_000);
});

describe('a device key too weak', () => {
  test('refuses to start, with one line naming the device and the rule', async () => {
    const directory = await mkdtemp(join(tmpdir(), 'fhirgate-weak-key-'));
    try {
      const file = join(directory, 'device-auth.json');
      await writeFile(
        file,
        JSON.stringify({ valid_keys: { 'ward-3-monitor': 'env:WEAK_DEVICE_KEY' }, jwt_secret: JWT_SECRET, identifier_system: SYSTEM, project_id: 'a1f0c0de-0000-4000-8000-000000000001' }),
      );
      const child = spawn(process.execPath, ['plugin/hosts/standalone/main.ts'], {
        env: { ...process.env, PORT: '0', FHIRGATE_DATA_DIR: join(directory, 'data'), FHIRGATE_DEVICE_AUTH: file, WEAK_DEVICE_KEY: 'Monitor-Key-1111' },
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      let stderr = '';
      child.stderr.on('data', (chunk: Buffer) => {
        stderr += chunk.toString();
      });
      const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));

      expect(code).toBe(1);
      const refusal = stderr.split('\n').filter((line) => line.startsWith('fhirgate cannot start:'));
      expect(refusal).toHaveLength(1);
      expect(refusal[0]).toContain('device_auth.valid_keys.ward-3-monitor: the key of device ward-3-monitor is too weak');
      expect(refusal[0]).toContain('at least 128 bits');
      expect(stderr).not.toContain('Monitor-Key-1111');
      expect(stderr).not.toContain('    at ');
    } finally {
      await rm(directory, { recursive: true, force: true });
    }
  }, 60_000);
});

describeWithRedis('device rate limit on Redis', () => {
  let redisA: Redis;
  let redisB: Redis;

  beforeAll(async () => {
    redisA = connectTestRedis();
    redisB = connectTestRedis();
    await Promise.all([redisA.ping(), redisB.ping()]);
  });

  afterAll(async () => {
    await Promise.all([redisA.quit(), redisB.quit()]);
  });

  test('two plugin instances sharing one Redis share the limit of a device', async () => {
    const deviceId = `shared-${randomUUID().slice(0, 8)}`;
    // Two instances of one server: the same key prefix (a test host otherwise gets one of its own).
    const redisKeyPrefix = `fhirgate:test:${randomUUID()}:`;
    const options = (project: SeededProject) => ({ redisKeyPrefix, device_auth: { ...deviceAuth(project), valid_keys: { [deviceId]: 'shared-key-5555-instances-Nd3c' }, rate_limit_per_second: 4 } });
    const first = await startTestHost({ pluginFor: options, redis: redisA });
    const second = await startTestHost({ pluginFor: options, redis: redisB });
    try {
      // The right key: only the device's own requests spend its budget. No Device resource, so those within it are 403.
      const body = { device_id: deviceId, api_key: 'shared-key-5555-instances-Nd3c' };
      const responses = await Promise.all([
        exchange(first, body),
        exchange(second, body),
        exchange(first, body),
        exchange(second, body),
        exchange(first, body),
        exchange(second, body),
      ]);
      const statuses = responses.map((response) => response.status).sort();
      expect(statuses.filter((status) => status === 403)).toHaveLength(4);
      expect(statuses.filter((status) => status === 429)).toHaveLength(2);
    } finally {
      await first.close();
      await second.close();
    }
  });
});
