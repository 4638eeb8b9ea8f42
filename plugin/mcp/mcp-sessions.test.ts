import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { Redis } from 'ioredis';
import { startOwnRedis } from '../../test/support/own-redis.ts';
import { connectTestRedis, describeWithRedis, describeWithRedisServer } from '../../test/support/redis.ts';
import { clientInfoOf, McpSessions, type McpSession } from './mcp-sessions.ts';

const SESSION: McpSession = { projectId: 'project-1', profile: 'Practitioner/1', client: { name: 'Editor', version: '2.0' } };
const CALLER = { projectId: SESSION.projectId, profile: SESSION.profile };

describe('MCP sessions without Redis (one process)', () => {
  test('found by its caller only, ended by DELETE, gone once idle longer than its lifetime', async () => {
    const sessions = new McpSessions({ keyPrefix: 'test:', idleSeconds: 1 });
    const id = (await sessions.open(SESSION)) ?? '';
    expect(await sessions.find(id, CALLER)).toEqual({ found: SESSION });
    expect(await sessions.find(id, { ...CALLER, profile: 'Practitioner/2' })).toBe('unknown');
    expect(await sessions.find(`${id}x`, CALLER)).toBe('unknown');
    await sessions.end(id);
    expect(await sessions.find(id, CALLER)).toBe('unknown');
    const idle = (await sessions.open(SESSION)) ?? '';
    await new Promise((resolve) => setTimeout(resolve, 1100));
    expect(await sessions.find(idle, CALLER)).toBe('unknown');
  });
});

describe('clientInfo as a record holds it', () => {
  test('names and versions are strings, control characters go, lengths are bounded', () => {
    expect(clientInfoOf({ clientInfo: { name: 'Claude\nCode', version: '2.1.0' } })).toEqual({ name: 'Claude Code', version: '2.1.0' });
    expect(clientInfoOf({ clientInfo: { name: 'x'.repeat(500), version: '1' } })?.name).toHaveLength(100);
    expect(clientInfoOf({ clientInfo: { name: 42, version: '1' } })).toBeUndefined();
    expect(clientInfoOf({ clientInfo: { name: ' ', version: '1' } })).toBeUndefined();
    expect(clientInfoOf(undefined)).toBeUndefined();
  });
});

describeWithRedis('MCP sessions in Redis', () => {
  let first: Redis;
  let second: Redis;
  const keyPrefix = `fhirgate:test:${randomUUID()}:`;

  beforeAll(async () => {
    first = connectTestRedis();
    second = connectTestRedis();
    await Promise.all([first.ping(), second.ping()]);
  });
  afterAll(async () => {
    await Promise.all([first.quit(), second.quit()]);
  });

  test('opened through one client, found and ended through another; Redis holds a hash of the id, expiring', async () => {
    const one = new McpSessions({ redis: first, keyPrefix });
    const other = new McpSessions({ redis: second, keyPrefix });
    const id = (await one.open(SESSION)) ?? '';
    expect(await other.find(id, CALLER)).toEqual({ found: SESSION });
    expect(await other.find(id, { ...CALLER, projectId: 'project-2' })).toBe('unknown');
    const keys = await first.keys(`${keyPrefix}mcp-session:*`);
    expect(keys).toHaveLength(1);
    expect(keys[0]).not.toContain(id);
    const ttl = await first.ttl(keys[0]);
    expect(ttl).toBeGreaterThan(24 * 60 * 60 - 10);
    await other.end(id);
    expect(await one.find(id, CALLER)).toBe('unknown');
  });
});

describeWithRedisServer('MCP sessions on a Redis that stops answering', () => {
  test('no request is held past the deadline: no session opened, a lookup served unnamed; answering again, sessions again', async () => {
    const redis = await startOwnRedis();
    const client = new Redis(redis.url, { maxRetriesPerRequest: 1 });
    client.on('error', () => undefined);
    try {
      await client.ping();
      const sessions = new McpSessions({ redis: client, keyPrefix: 'test:', deadlineMs: 100 });
      const id = (await sessions.open(SESSION)) ?? '';
      redis.pause();
      const started = performance.now();
      expect(await sessions.open(SESSION)).toBeUndefined();
      expect(await sessions.find(id, CALLER)).toBe('unavailable');
      expect(performance.now() - started).toBeLessThan(1000);
      redis.resume();
      await client.ping();
      expect(await sessions.find(id, CALLER)).toEqual({ found: SESSION });
    } finally {
      client.disconnect();
      await redis.stop();
    }
  });
});
