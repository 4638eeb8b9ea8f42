/**
 * The budget counters' Redis commands (budget-counters.ts): two Lua scripts, each one round trip, and a call that
 * never waits past its deadline. Keys of one project share a hash tag (`{<project>}`), so a script's keys are in
 * one slot of a Redis Cluster too.
 */
import type { HostRedis } from '../host.ts';

/** How long an addition's id is remembered: far longer than any outage it is resent after. */
export const ADDITION_ID_TTL_MS = 24 * 3600 * 1000;

/**
 * KEYS: the period hashes, then the addition's id key. ARGV: the user's field suffix, the id's lifetime (ms), then
 * per hash its tokens, cost and expiry (epoch ms). Adds once per id (an addition resent after a call that missed
 * its deadline but was applied is not counted twice) and answers each hash's four totals: the project's tokens
 * and cost, the user's tokens and cost.
 */
export const ADD_SCRIPT = `
local hashes = #KEYS - 1
local fresh = redis.call('SET', KEYS[#KEYS], '1', 'NX', 'PX', ARGV[2])
local answer = {}
for i = 1, hashes do
  local base = 3 + (i - 1) * 3
  if fresh then
    local tokens, cost = tonumber(ARGV[base]), tonumber(ARGV[base + 1])
    redis.call('HINCRBY', KEYS[i], 'tokens', tokens)
    redis.call('HINCRBY', KEYS[i], 'cost', cost)
    redis.call('HINCRBY', KEYS[i], 'tokens:' .. ARGV[1], tokens)
    redis.call('HINCRBY', KEYS[i], 'cost:' .. ARGV[1], cost)
    redis.call('PEXPIREAT', KEYS[i], ARGV[base + 2])
  end
  local values = redis.call('HMGET', KEYS[i], 'tokens', 'cost', 'tokens:' .. ARGV[1], 'cost:' .. ARGV[1])
  for j = 1, 4 do answer[#answer + 1] = tonumber(values[j]) or 0 end
end
return answer
`;

/** KEYS: the period hashes; ARGV[1]: the user's field suffix. Answers each hash's four totals, as ADD_SCRIPT. */
export const READ_SCRIPT = `
local answer = {}
for i = 1, #KEYS do
  local values = redis.call('HMGET', KEYS[i], 'tokens', 'cost', 'tokens:' .. ARGV[1], 'cost:' .. ARGV[1])
  for j = 1, 4 do answer[#answer + 1] = tonumber(values[j]) or 0 end
end
return answer
`;

/** One Redis call that rejects after `deadlineMs`, and at once while the client is not connected. */
export function callWithDeadline(redis: HostRedis, deadlineMs: number, command: string, ...args: (string | number)[]): Promise<unknown[]> {
  if (redis.status !== 'ready') {
    return Promise.reject(new Error(`Redis is not connected (${redis.status})`));
  }
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`Redis did not answer within ${deadlineMs} ms`)), deadlineMs);
  });
  return Promise.race([redis.call(command, ...args), deadline])
    .then((answer) => (Array.isArray(answer) ? answer : []))
    .finally(() => clearTimeout(timer));
}
