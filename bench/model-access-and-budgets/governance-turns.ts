/**
 * The governance steps alone, in one process (bench/model-access-and-budgets.ts pins it to the contender's core):
 * what model access and the budgets add to each chat turn, on a real SQLite store (the project, its memberships and
 * the AccessPolicies that grant models, read as the chat route reads them) and the real Redis the budget counters
 * share.
 *
 * Each turn does what every turn does anyway (the model resolved from the project's catalog), then, in the governed
 * variants, the two pipeline steps (`checkModelAccess`, `checkBudgets`) and the settlement of the reply's usage
 * (`TurnBudget.settle`: sent to Redis with the project's other replies of the turn of the event loop, not awaited).
 * Measured per turn, variants interleaved per repetition: the process's CPU time with turns 32 at a time from 200
 * users, 2,000 a second, as a busy instance runs them (the Redis client's work included, Redis's own not); the time
 * a turn spends in the two steps before its provider call, one turn at a time; and the first check of a user new to
 * the instance, which reads the counters from Redis before it compares.
 *
 *   node bench/model-access-and-budgets/governance-turns.ts <turns> <repetitions>     (REDIS_URL: the Redis to share counters in)
 * Prints one JSON object (GovernanceTurnsResult).
 */
import { performance } from 'node:perf_hooks';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AccessPolicy, Project, ProjectMembership } from '@medplum/fhirtypes';
import { Redis } from 'ioredis';
import type { CallerContext, HostLogger } from '../../plugin/host.ts';
import { checkBudgets, checkModelAccess, createGovernance, type Governance } from '../../plugin/governance/governance.ts';
import { governanceOptionsSchema } from '../../plugin/governance/governance-options.ts';
import { MODEL_GRANT_EXTENSION } from '../../plugin/governance/model-access.ts';
import { createModelRegistry, type ModelCatalog } from '../../plugin/llm/model-registry.ts';
import type { ChatModel } from '../../plugin/llm/chat-model.ts';
import { loadFhirDefinitions } from '../../plugin/hosts/standalone/fhir-definitions.ts';
import { openStandaloneStore } from '../../plugin/hosts/standalone/open-store.ts';
import { ProjectRepository } from '../../plugin/hosts/standalone/project-repository.ts';
import { readProjectFixture, seedProject } from '../../plugin/hosts/standalone/seed.ts';
import { createTelemetry } from '../../plugin/telemetry/telemetry.ts';
import { percentile, median } from '../lib/statistics.ts';

/** One variant's figures: medians over the repetitions. */
export interface VariantResult {
  readonly name: string;
  /** Process CPU time per turn, microseconds. */
  readonly cpuMicrosPerTurn: number;
  /** Time a turn spends in the two steps before its provider call, microseconds. */
  readonly checkP50Micros: number;
  readonly checkP99Micros: number;
}

/** What this process prints. */
export interface GovernanceTurnsResult {
  readonly turns: number;
  readonly repetitions: number;
  readonly users: number;
  readonly concurrency: number;
  readonly turnsPerSecond: number;
  readonly redis: boolean;
  /** A user's first check on the instance (the counters read from Redis first), microseconds, median of the repetitions' p50. */
  readonly coldCheckP50Micros: number;
  /** Times a Redis call missed its deadline during the run (each time the counters then counted in memory for about a second). */
  readonly redisMisses: number;
  readonly variants: readonly VariantResult[];
}

const turns = Number(process.argv[2] ?? 10_000);
const repetitions = Number(process.argv[3] ?? 5);
const USERS = 200;
const CONCURRENCY = 32;
// Turns a second, as a busy instance runs them (each turn also writes to its store and waits for its provider).
// Faster, the one Redis of the run would be what is measured, not the steps.
const TURNS_PER_SECOND = 2000;
const MODEL = 'openai/gpt-4o-mini';
const USAGE = { promptTokens: 850, completionTokens: 230 };

const dataDir = mkdtempSync(join(tmpdir(), 'fhirgate-bench-governance-'));
loadFhirDefinitions();
const store = openStandaloneStore(dataDir);
const redis = process.env.REDIS_URL ? new Redis(process.env.REDIS_URL, { maxRetriesPerRequest: 1 }) : undefined;
await redis?.ping();

try {
  const catalog = createModelRegistry(
    { providers: { openai: { kind: 'openai', apiKey: 'sk-bench', models: ['gpt-4o-mini', 'gpt-4o'], timeoutMs: 1000, connectTimeoutMs: 1000, retries: { maxRetries: 0, baseDelayMs: 1, maxDelayMs: 1 } } }, defaultModel: MODEL, maxTokens: 256, fallbacks: {} } as never,
    (provider): ChatModel => ({ provider, complete: () => Promise.reject(new Error('not called')), stream: () => ({ [Symbol.asyncIterator]: () => ({ next: () => Promise.reject(new Error('not called')) }) }) }),
  );
  const governedSettings = [
    { name: 'AI_MODEL_ACCESS', valueString: 'access-policy' },
    ...['PROJECT', 'USER'].flatMap((scope) =>
      ['DAY', 'MONTH'].flatMap((period) => [
        { name: `AI_BUDGET_${scope}_${period}_TOKENS`, valueInteger: 2_000_000_000 },
        { name: `AI_BUDGET_${scope}_${period}_COST`, valueDecimal: 1e6 },
      ]),
    ),
  ];
  const governed = await seedCallers('governed', governedSettings);
  const plain = await seedCallers('plain', []);
  // Counts the times a Redis call missed its deadline (then the counters count in memory until a probe answers).
  let redisMisses = 0;
  const countingLogger: HostLogger = {
    debug: () => undefined,
    info: () => undefined,
    warn: () => {
      redisMisses++;
    },
    error: () => undefined,
  };
  const governanceOn = (shared: boolean): Governance =>
    createGovernance(
      { redis: shared ? redis : undefined, logger: countingLogger, getSystemRepo: async (projectId) => new ProjectRepository(store, { projectId, author: { reference: 'system' } }) },
      governanceOptionsSchema.parse({ prices: { [MODEL]: { input: 0.15, output: 0.6 } } }),
      `fhirgate:bench:${Date.now()}:`,
      createTelemetry('bench'),
      'urn:fhirgate:communication-category',
    );
  const variants: { readonly name: string; readonly governance?: Governance; readonly callers: readonly CallerContext[] }[] = [
    { name: 'without the governance steps (floor)', callers: governed },
    { name: 'steps on, project without rules (usage counted in Redis)', governance: governanceOn(true), callers: plain },
    { name: 'steps on: access by AccessPolicy, 8 budgets, counters in Redis', governance: governanceOn(true), callers: governed },
    { name: 'steps on: access by AccessPolicy, 8 budgets, counters in memory', governance: governanceOn(false), callers: governed },
  ];
  const samples = new Map<string, { cpu: number[]; p50: number[]; p99: number[] }>(variants.map((variant) => [variant.name, { cpu: [], p50: [], p99: [] }]));
  const cold: number[] = [];
  // Seeded before anything is measured: SQLite's writes hold the event loop, and a Redis answer waiting behind them
  // would miss its deadline and send the counters to memory.
  const newcomers: CallerContext[][] = [];
  for (let repetition = 0; repetition < repetitions; repetition++) {
    const callers = await seedCallers(`newcomers-${repetition}`, governedSettings);
    newcomers.push(callers.map((caller, index) => ({ ...caller, profile: { reference: `Practitioner/newcomer-${repetition}-${index}` } })));
  }
  // A short warm-up of each variant (the JIT, the first reads of the policies and counters), then the repetitions.
  for (const variant of variants) {
    await runTurns(catalog, variant.governance, variant.callers, Math.min(2000, turns), CONCURRENCY);
  }
  for (let repetition = 0; repetition < repetitions; repetition++) {
    for (const variant of variants) {
      const kept = samples.get(variant.name);
      kept?.cpu.push((await runTurns(catalog, variant.governance, variant.callers, turns, CONCURRENCY)).cpuMicrosPerTurn);
      // One turn at a time: the time a turn spends in the steps, with nothing else running meanwhile.
      const alone = await runTurns(catalog, variant.governance, variant.callers, Math.ceil(turns / 4), 1);
      kept?.p50.push(percentile(alone.checkMicros, 50));
      kept?.p99.push(percentile(alone.checkMicros, 99));
    }
    // A user's first turn on an instance (or after budgetMaxAgeMs idle) reads the counters before the check.
    cold.push(percentile((await runTurns(catalog, variants[2].governance, newcomers[repetition], USERS, 1)).checkMicros, 50));
  }
  for (const variant of variants) {
    variant.governance?.close();
  }
  const result: GovernanceTurnsResult = {
    turns,
    repetitions,
    users: USERS,
    concurrency: CONCURRENCY,
    turnsPerSecond: TURNS_PER_SECOND,
    redis: redis !== undefined,
    coldCheckP50Micros: median(cold),
    redisMisses,
    variants: variants.map((variant) => {
      const kept = samples.get(variant.name) ?? { cpu: [], p50: [], p99: [] };
      return { name: variant.name, cpuMicrosPerTurn: median(kept.cpu), checkP50Micros: median(kept.p50), checkP99Micros: median(kept.p99) };
    }),
  };
  process.stdout.write(`${JSON.stringify(result)}\n`);
} finally {
  await redis?.quit();
  store.close();
  rmSync(dataDir, { recursive: true, force: true });
}

/** Runs `count` turns, `concurrency` at a time; returns the CPU per turn and each turn's time in the steps. */
async function runTurns(
  catalog: ModelCatalog,
  governance: Governance | undefined,
  callers: readonly CallerContext[],
  count: number,
  concurrency: number,
): Promise<{ cpuMicrosPerTurn: number; checkMicros: number[] }> {
  const checkMicros: number[] = [];
  const turn = async (index: number): Promise<void> => {
    const caller = callers[index % callers.length];
    const requested = catalog.resolve(MODEL);
    if (!governance) {
      checkMicros.push(0);
      return;
    }
    const started = performance.now();
    const target = await checkModelAccess(governance, caller, MODEL, requested);
    const budget = await checkBudgets(governance, caller, { modelId: target.id, promptTokens: 20, maxTokens: 256 });
    budget.reserve();
    checkMicros.push((performance.now() - started) * 1000);
    budget.settle(target.id, USAGE, new Date());
  };
  const cpuBefore = process.cpuUsage();
  const started = performance.now();
  for (let first = 0; first < count; first += concurrency) {
    await Promise.all(Array.from({ length: Math.min(concurrency, count - first) }, (_, offset) => turn(first + offset)));
    // Paced at TURNS_PER_SECOND; the event loop reads Redis's answers meanwhile (every variant waits alike).
    const due = started + ((first + concurrency) / TURNS_PER_SECOND) * 1000;
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, due - performance.now())));
  }
  // Every settlement sent is answered before the count stops (Redis answers in order).
  await redis?.ping();
  const cpu = process.cpuUsage(cpuBefore);
  return { cpuMicrosPerTurn: (cpu.user + cpu.system) / count, checkMicros };
}

/** A project of the demo fixture with `settings`, its practitioner's policy granting the model, and USERS callers. */
async function seedCallers(name: string, settings: NonNullable<Project['setting']>): Promise<CallerContext[]> {
  const seeded = await seedProject(store, await readProjectFixture(), { freshIds: true });
  const project = await store.readResource<Project>('Project', seeded.projectId);
  const withSettings = await store.updateResource<Project>({ ...project, name: `bench ${name}`, setting: settings });
  const policy = await store.readResource<AccessPolicy>('AccessPolicy', seeded.ids['policy-own-conversations']);
  await store.updateResource<AccessPolicy>({ ...policy, extension: [{ url: MODEL_GRANT_EXTENSION, valueString: 'openai/gpt-4o-mini' }] });
  const membership = await store.readResource<ProjectMembership>('ProjectMembership', seeded.ids['practitioner-membership']);
  return Array.from({ length: USERS }, (_, index) => ({
    project: withSettings,
    membership,
    profile: { reference: `Practitioner/bench-user-${index}` },
  })) as unknown as CallerContext[];
}
