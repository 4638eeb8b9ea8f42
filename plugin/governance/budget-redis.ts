/**
 * The budget counters' Redis commands (budget-counters.ts, budget-holds.ts): Lua scripts, each one round trip, and
 * a call that never waits past its deadline. Keys of one project share a hash tag (`{<project>}`), so a script's
 * keys are in one slot of a Redis Cluster too (READ_SCRIPT names the holdings hashes of the instances it finds in
 * the project's holders set: they carry the same tag, so they are in that slot).
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
 * lifetime (ms), each hash's expiry (epoch ms), the earliest `sent` of the batch's replies (epoch ms), then per user:
 * the user's field suffix, tokens, cost. A hash this creates (Redis lost it, or its period just began) records that
 * `sent` as `from`, until it is seeded (SEED_SCRIPT): what it counts from then on. Answers, per hash, the project's
 * tokens and cost, then each user's tokens and cost, in the order given; then per hash 1 when it waits to be seeded.
 */
export const ADD_SCRIPT = script(`
local hashes = #KEYS - 1
local earliest = tonumber(ARGV[2 + hashes])
local first = 3 + hashes
local fresh = redis.call('SET', KEYS[#KEYS], '1', 'NX', 'PX', ARGV[1])
local tokens, cost = 0, 0
for e = first, #ARGV, 3 do
  tokens = tokens + tonumber(ARGV[e + 1])
  cost = cost + tonumber(ARGV[e + 2])
end
local answer = {}
for i = 1, hashes do
  if fresh then
    if redis.call('EXISTS', KEYS[i]) == 0 then
      redis.call('HSET', KEYS[i], 'from', earliest)
    elseif redis.call('HEXISTS', KEYS[i], 'seeded') == 0 then
      local from = tonumber(redis.call('HGET', KEYS[i], 'from'))
      if from and from > earliest then redis.call('HSET', KEYS[i], 'from', earliest) end
    end
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
for i = 1, hashes do
  local waiting = redis.call('HEXISTS', KEYS[i], 'seeded') == 0 and redis.call('HEXISTS', KEYS[i], 'from') == 1
  answer[#answer + 1] = waiting and 1 or 0
end
return answer
`);

/**
 * Reads one user's view. KEYS: the day's and the month's hash, the project's holders (a sorted set of the instances
 * holding budget for turns still running, scored by when their holdings expire). ARGV: the user's field suffix, this
 * instance's id, now (epoch ms), the prefix of an instance's holdings hash (the project's key, `held:`). Answers each
 * hash's four totals (the project's tokens and cost, the user's), then the four totals the other instances hold (an
 * instance that stopped renewing its holdings is dropped), then per hash what seeding it needs: -1 none, 0 it is
 * missing, else the `from` it counts from.
 */
export const READ_SCRIPT = script(`
local answer = {}
for i = 1, 2 do
  local values = redis.call('HMGET', KEYS[i], 'tokens', 'cost', 'tokens:' .. ARGV[1], 'cost:' .. ARGV[1])
  for j = 1, 4 do answer[#answer + 1] = tonumber(values[j]) or 0 end
end
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', ARGV[3])
local held = { 0, 0, 0, 0 }
for _, instance in ipairs(redis.call('ZRANGE', KEYS[3], 0, -1)) do
  if instance ~= ARGV[2] then
    local values = redis.call('HMGET', ARGV[4] .. instance, 'tokens', 'cost', 'tokens:' .. ARGV[1], 'cost:' .. ARGV[1])
    for j = 1, 4 do held[j] = held[j] + (tonumber(values[j]) or 0) end
  end
end
for j = 1, 4 do answer[#answer + 1] = held[j] end
for i = 1, 2 do
  if redis.call('EXISTS', KEYS[i]) == 0 then
    answer[#answer + 1] = 0
  elseif redis.call('HEXISTS', KEYS[i], 'seeded') == 1 then
    answer[#answer + 1] = -1
  else
    answer[#answer + 1] = tonumber(redis.call('HGET', KEYS[i], 'from')) or -1
  end
end
return answer
`);

/**
 * Seeds a period's hash with the usage recorded before `cutoff` (SEED_SCRIPT runs once per hash: the first instance's
 * wins). KEYS: the hash. ARGV: the cutoff (epoch ms), the hash's expiry, then field and amount pairs. Answers `{-1}`
 * when the hash is seeded (now or before); or, when the hash counts additions from before the cutoff (they would
 * count twice), `{from}`: seed again up to it.
 */
export const SEED_SCRIPT = script(`
if redis.call('HEXISTS', KEYS[1], 'seeded') == 1 then return { -1 } end
local from = tonumber(redis.call('HGET', KEYS[1], 'from'))
if from and from < tonumber(ARGV[1]) then return { from } end
for i = 3, #ARGV, 2 do redis.call('HINCRBY', KEYS[1], ARGV[i], ARGV[i + 1]) end
redis.call('HSET', KEYS[1], 'seeded', '1')
redis.call('HDEL', KEYS[1], 'from')
redis.call('PEXPIREAT', KEYS[1], ARGV[2])
return { -1 }
`);

/**
 * Replaces one instance's holdings in a project (what it holds for its turns still running: `tokens`, `cost`,
 * `tokens:<user>`, `cost:<user>`). KEYS: the instance's holdings hash, the project's holders. ARGV: the instance's
 * id, when the holdings expire unless replaced again (epoch ms), how long the holders set is kept past that, then
 * field and amount pairs (none: it holds nothing).
 */
export const HOLD_SCRIPT = script(`
redis.call('DEL', KEYS[1])
if #ARGV <= 3 then
  redis.call('ZREM', KEYS[2], ARGV[1])
  return { 0 }
end
for i = 4, #ARGV, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
redis.call('PEXPIREAT', KEYS[1], ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
redis.call('PEXPIREAT', KEYS[2], tonumber(ARGV[2]) + tonumber(ARGV[3]))
return { 1 }
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
