/**
 * The budget counters' Redis commands (budget-counters.ts): two Lua scripts, each one round trip, and a call that
 * never waits past its deadline. Keys of one project share a hash tag (`{<project>}`), so a script's keys are in
 * one slot of a Redis Cluster too.
 */
import { createHash } from 'node:crypto';
import type { HostRedis } from '../host.ts';

/**
 * How long a batch's id is remembered. A batch is sent again only after its call missed the deadline; if Redis
 * applied it after all, it was answering, and the resend follows within seconds. (One small key per batch for this
 * long: at most one per turn, about 15,000 keys at 1,000 turns a minute, fewer when turns come together.)
 */
export const ADDITION_ID_TTL_MS = 15 * 60 * 1000;

/** A Lua script and its SHA-1, so that it is sent once, not with every call. */
export interface RedisScript {
  readonly lua: string;
  readonly sha: string;
}

export function script(lua: string): RedisScript {
  return { lua, sha: createHash('sha1').update(lua).digest('hex') };
}

/**
 * Adds a batch of replies' usage (one project, one day and month) once per batch id: a batch resent after a call that
 * missed its deadline but was applied is not counted twice. KEYS: the period hashes, then the id key. ARGV: the id's
 * lifetime (ms), each hash's expiry (epoch ms), then per user: the user's field suffix, tokens, cost. Answers, per
 * hash, the project's tokens and cost, then each user's tokens and cost, in the order given.
 */
export const ADD_SCRIPT = script(`
local hashes = #KEYS - 1
local first = 2 + hashes
local fresh = redis.call('SET', KEYS[#KEYS], '1', 'NX', 'PX', ARGV[1])
local tokens, cost = 0, 0
for e = first, #ARGV, 3 do
  tokens = tokens + tonumber(ARGV[e + 1])
  cost = cost + tonumber(ARGV[e + 2])
end
local answer = {}
for i = 1, hashes do
  if fresh then
    redis.call('HINCRBY', KEYS[i], 'tokens', tokens)
    redis.call('HINCRBY', KEYS[i], 'cost', cost)
    for e = first, #ARGV, 3 do
      redis.call('HINCRBY', KEYS[i], 'tokens:' .. ARGV[e], ARGV[e + 1])
      redis.call('HINCRBY', KEYS[i], 'cost:' .. ARGV[e], ARGV[e + 2])
    end
    redis.call('PEXPIREAT', KEYS[i], ARGV[1 + i])
  end
  local fields = { 'tokens', 'cost' }
  for e = first, #ARGV, 3 do
    fields[#fields + 1] = 'tokens:' .. ARGV[e]
    fields[#fields + 1] = 'cost:' .. ARGV[e]
  end
  local values = redis.call('HMGET', KEYS[i], unpack(fields))
  for j = 1, #values do answer[#answer + 1] = tonumber(values[j]) or 0 end
end
return answer
`);

/** KEYS: the period hashes; ARGV[1]: the user's field suffix. Answers each hash's four totals, as ADD_SCRIPT. */
export const READ_SCRIPT = script(`
local answer = {}
for i = 1, #KEYS do
  local values = redis.call('HMGET', KEYS[i], 'tokens', 'cost', 'tokens:' .. ARGV[1], 'cost:' .. ARGV[1])
  for j = 1, 4 do answer[#answer + 1] = tonumber(values[j]) or 0 end
end
return answer
`);

/** The scripts this process has sent to each client's Redis: later calls name them by SHA-1. */
const sentScripts = new WeakMap<HostRedis, Set<string>>();

/**
 * Runs a script within the deadline: its text the first time this process runs it on `redis` (which also caches it
 * there), then by its SHA-1, sending the text again only when Redis has lost it (a restarted Redis answers
 * NOSCRIPT). A host that logs every Redis error reply, as Medplum's server does, so sees no NOSCRIPT for a Redis
 * that was merely new.
 */
export async function runScript(redis: HostRedis, deadlineMs: number, lua: RedisScript, keys: readonly string[], args: readonly (string | number)[]): Promise<unknown[]> {
  let sent = sentScripts.get(redis);
  if (!sent) {
    sent = new Set();
    sentScripts.set(redis, sent);
  }
  if (!sent.has(lua.sha)) {
    const answer = await callWithDeadline(redis, deadlineMs, 'EVAL', lua.lua, keys.length, ...keys, ...args);
    sent.add(lua.sha);
    return answer;
  }
  try {
    return await callWithDeadline(redis, deadlineMs, 'EVALSHA', lua.sha, keys.length, ...keys, ...args);
  } catch (error) {
    if (!(error instanceof Error && error.message.startsWith('NOSCRIPT'))) {
      throw error;
    }
    return callWithDeadline(redis, deadlineMs, 'EVAL', lua.lua, keys.length, ...keys, ...args);
  }
}

/**
 * One Redis call that rejects after `deadlineMs`, and at once while the client is not connected. The deadline is
 * checked after the event loop has read its sockets (setImmediate): a process that was busy, or not scheduled, for
 * longer than the deadline finds Redis's answer waiting, and takes it, instead of blaming Redis for its own delay.
 */
export function callWithDeadline(redis: HostRedis, deadlineMs: number, command: string, ...args: (string | number)[]): Promise<unknown[]> {
  if (redis.status !== 'ready') {
    return Promise.reject(new Error(`Redis is not connected (${redis.status})`));
  }
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => setImmediate(() => reject(new Error(`Redis did not answer within ${deadlineMs} ms`))), deadlineMs);
  });
  return Promise.race([redis.call(command, ...args), deadline])
    .then((answer) => (Array.isArray(answer) ? answer : []))
    .finally(() => clearTimeout(timer));
}
