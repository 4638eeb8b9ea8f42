#!/usr/bin/env node
/**
 * Benchmark 10, governance (model access and budgets):
 *   node bench/model-access-and-budgets.ts --out <file.json> [--smoke]
 * What model access and the budgets add to a chat turn: the governance steps run in a process of their own, pinned
 * to the contender's core (bench/model-access-and-budgets/governance-turns.ts), against a real SQLite store and a real Redis
 * (a redis-server of the run's own when one is installed, else REDIS_URL), beside the same turns without the steps.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { text } from 'node:stream/consumers';
import { hasRedisServer, startOwnRedis, type OwnRedis } from '../test/support/own-redis.ts';
import { planCoreLayout, startNodeProcess } from './lib/processes.ts';
import type { ScenarioSection } from './lib/section.ts';
import { formatNumber } from './lib/statistics.ts';
import type { GovernanceTurnsResult } from './model-access-and-budgets/governance-turns.ts';

const { values } = parseArgs({ options: { out: { type: 'string' }, smoke: { type: 'boolean', default: false } } });
if (!values.out) {
  throw new Error('usage: node bench/model-access-and-budgets.ts --out <file.json> [--smoke]');
}
const outFile = resolve(values.out);
process.chdir(resolve(dirname(fileURLToPath(import.meta.url)), '..'));

// The target of the issue: the checks cost under 0.1 ms per turn.
const TARGET_MICROS = 100;
const plan = values.smoke ? { turns: 1000, repetitions: 1 } : { turns: 10_000, repetitions: 3 };
const cores = planCoreLayout();

// A redis-server of the run's own, so nobody else's traffic on a shared Redis is measured; REDIS_URL otherwise.
let ownRedis: OwnRedis | undefined;
const redisUrl = hasRedisServer() ? (ownRedis = await startOwnRedis()).url : process.env.REDIS_URL;
let result: GovernanceTurnsResult;
try {
  result = await measure(redisUrl);
} finally {
  await ownRedis?.stop();
}
const section = buildSection(result);
mkdirSync(dirname(outFile), { recursive: true });
writeFileSync(outFile, `${JSON.stringify(section, null, 2)}\n`);
process.stdout.write(`${section.title}: written to ${outFile}\n`);

async function measure(url: string | undefined): Promise<GovernanceTurnsResult> {
  const { REDIS_URL: _unused, ...environment } = process.env;
  const env = url ? { ...environment, REDIS_URL: url } : environment;
  const child = startNodeProcess(['bench/model-access-and-budgets/governance-turns.ts', String(plan.turns), String(plan.repetitions)], { core: cores.contenderCore, env });
  const exited = new Promise<number | null>((resolveExit) => child.once('exit', resolveExit));
  const [stdout, stderr, code] = await Promise.all([text(child.stdout ?? process.stdin), text(child.stderr ?? process.stdin), exited]);
  if (code !== 0) {
    throw new Error(`governance-turns failed (${code}): ${stderr.slice(-2000)}`);
  }
  return JSON.parse(stdout) as GovernanceTurnsResult;
}

function buildSection(measured: GovernanceTurnsResult): ScenarioSection {
  const [floor, , governed] = measured.variants;
  const micros = (value: number): string => `${formatNumber(value, 1)} µs`;
  const added = governed.cpuMicrosPerTurn - floor.cpuMicrosPerTurn;
  return {
    title: '10. Governance: model access and budgets',
    method:
      `The two governance steps of a chat turn (\`checkModelAccess\`, \`checkBudgets\`) and the settlement of its usage (sent to Redis with the project's other replies of the same turn of the event loop, not awaited), ` +
      `in a process of their own (${cores.contenderCore === undefined ? 'not pinned' : `pinned to core ${cores.contenderCore}`}) on a real SQLite store ` +
      `(the project, memberships and AccessPolicies granting models) and ${measured.redis ? 'a real Redis sharing the budget counters' : 'no Redis (redis-server not installed, REDIS_URL unset): counters in memory'}. ` +
      `Each turn resolves its model from the catalog (as every turn does); the governed variants then run the steps. ${measured.turns} turns per repetition ` +
      `from ${measured.users} users, ${measured.concurrency} at a time, ${measured.turnsPerSecond} a second (a busy instance), for the CPU time of the process per turn (the Redis client's work included, Redis's own not); ` +
      `then a quarter as many one at a time, for the time a turn spends in the steps before its provider call. ${measured.repetitions} repetitions, variants interleaved; medians.`,
    table: {
      columns: ['variant', 'CPU per turn', 'added over the floor', 'time in the steps p50', 'p99'],
      rows: measured.variants.map((variant) => [
        variant.name,
        micros(variant.cpuMicrosPerTurn),
        variant === floor ? '—' : micros(variant.cpuMicrosPerTurn - floor.cpuMicrosPerTurn),
        variant === floor ? '—' : micros(variant.checkP50Micros),
        variant === floor ? '—' : micros(variant.checkP99Micros),
      ]),
    },
    targets: [
      { description: 'governance (access by AccessPolicy, 8 budgets, Redis): CPU added per turn', measured: micros(added), target: `≤ ${TARGET_MICROS} µs`, met: added <= TARGET_MICROS },
      { description: 'governance: time a turn spends in the checks, p99', measured: micros(governed.checkP99Micros), target: `≤ ${TARGET_MICROS} µs`, met: governed.checkP99Micros <= TARGET_MICROS },
    ],
    notes: [
      `A user's first turn on an instance (or after \`budgetMaxAgeMs\`, 5 s, without one) reads the user's counters from Redis before the check: ${micros(measured.coldCheckP50Micros)} (p50 of ${measured.users} newcomers per repetition).`,
      measured.redisMisses === 0
        ? 'Every Redis call of the run was answered within its deadline (250 ms).'
        : `${measured.redisMisses} time(s) a Redis call missed its 250 ms deadline (a busy machine: Redis shares the cores); the counters then counted in memory until a probe got an answer, so part of the Redis variant's turns ran at the memory variant's cost.`,
    ],
  };
}
