/**
 * The usage report of a project: replies, tokens and cost per user, model and UTC day, computed from the stored
 * replies themselves (the `ai-response` Communications the project's AI agent wrote, with the usage extension each
 * one records), so it always agrees with the audit trail, record for record. Redis holds only the budgets' fast
 * counters; this report never reads them.
 *
 * The replies of the period are searched with the project's system repository, in pages of 1,000 ordered by
 * `sent` (the next page starts at the last `sent` seen, skipping the replies of that instant already counted), so
 * the report's cost is one search per 1,000 replies and its memory one page, whatever the period holds. Usage
 * fhirgate estimated (a reply that did not complete, usage-estimate.ts) is summed with the rest and counted apart.
 * Budget counters that have nothing to go on start from the same sums (budget-seed.ts).
 */
import type { WithId } from '@medplum/core';
import type { FhirRepository } from '@medplum/fhir-router';
import type { Communication, Device, Extension, Reference } from '@medplum/fhirtypes';
import { agentAuthored } from '../chat/agent-device.ts';
import { AGENT_DEVICE_IDENTIFIER, CATEGORY, EXTENSION } from '../chat/fhir-vocabulary.ts';
import { NANO_PER_DOLLAR, nanoDollarsOf } from './model-prices.ts';

/** What a report's rows are grouped by. */
export type UsageDimension = 'user' | 'model' | 'day';

/** The dimensions, in the order rows are sorted and keys printed. */
export const USAGE_DIMENSIONS: readonly UsageDimension[] = ['day', 'user', 'model'];

/** What a report covers. */
export interface UsageQuery {
  /** First day, `YYYY-MM-DD` (UTC), included. */
  readonly start: string;
  /** Last day, `YYYY-MM-DD` (UTC), included. */
  readonly end: string;
  readonly groupBy: readonly UsageDimension[];
  /** The `system` of the category codes (the plugin's `categorySystem`). */
  readonly categorySystem: string;
}

/** The sums of one group. */
export interface UsageTotals {
  replies: number;
  /** Replies that record no usage (the provider failed before any output): counted with 0 tokens. */
  replies_without_usage: number;
  /**
   * Replies whose usage fhirgate estimated because the provider reported none (stopped, or failed after some
   * output): their tokens are in the sums, and in `estimated_tokens`.
   */
  replies_estimated: number;
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  /** The part of `total_tokens` that is estimated. */
  estimated_tokens: number;
  /** Nano-dollars while summing; US dollars in the report. */
  cost_usd: number;
}

/** One row: the group's values (those grouped by) and its sums. */
export type UsageRow = Partial<Record<UsageDimension, string>> & UsageTotals;

/** The report. */
export interface UsageReport {
  readonly rows: readonly UsageRow[];
  readonly total: UsageTotals;
}

const PAGE_SIZE = 1000;

/**
 * Computes the report from the stored replies of the period that `reader` may read: the project's system
 * repository for all of them, or a caller's own repository (their AccessPolicy narrows the searches on the
 * server, so the report counts exactly the replies they may read). `systemRepo` finds the project's AI agent and
 * checks who wrote each reply read, as for any reader.
 */
export async function buildUsageReport(reader: FhirRepository, systemRepo: FhirRepository, query: UsageQuery): Promise<UsageReport> {
  const groups = new Map<string, UsageRow>();
  const total = emptyTotals();
  await forEachRecordedReply({ reader, systemRepo }, query.categorySystem, `${query.start}T00:00:00.000Z`, `${nextDay(query.end)}T00:00:00.000Z`, (reply) => {
    const key = query.groupBy.map((dimension) => reply[dimension]).join('\n');
    let row = groups.get(key);
    if (row === undefined) {
      row = { ...Object.fromEntries(query.groupBy.map((dimension) => [dimension, reply[dimension]])), ...emptyTotals() };
      groups.set(key, row);
    }
    addUsage(row, reply.usage);
    addUsage(total, reply.usage);
  });
  const rows = [...groups.values()].sort(compareRows).map(inDollars);
  return { rows, total: inDollars(total) };
}

/** What the report reads of one stored reply. */
export interface RecordedReply extends Record<UsageDimension, string> {
  readonly id: string;
  readonly status: Communication['status'];
  /** When it was sent (epoch ms). */
  readonly sentAt: number;
  readonly usage: RecordedUsageOf | undefined;
}

/** The usage a reply records: tokens, cost (nano-dollars), and whether fhirgate estimated them. */
export interface RecordedUsageOf {
  readonly prompt: number;
  readonly completion: number;
  readonly cost: number;
  readonly estimated: boolean;
}

/** Where replies are read: `reader` searches them (all, or what an AccessPolicy lets a caller read); `systemRepo` finds the agent. */
export interface ReplyReaders {
  readonly reader: FhirRepository;
  readonly systemRepo: FhirRepository;
}

/**
 * Visits the genuine replies of the project (those its AI agent wrote) sent from `from` (included) to `to` (not),
 * both ISO 8601 instants, in order of `sent`: one search per 1,000 replies, one page in memory. A repository alone
 * reads and checks with the same rights (the project's system repository: every reply).
 */
export async function forEachRecordedReply(
  repos: FhirRepository | ReplyReaders,
  categorySystem: string,
  from: string,
  to: string,
  visit: (reply: RecordedReply) => void
): Promise<void> {
  const { reader, systemRepo } = 'reader' in repos ? repos : { reader: repos, systemRepo: repos };
  const agent = await findAgent(systemRepo);
  if (agent === undefined) {
    return;
  }
  for await (const page of repliesOf(reader, agent, categorySystem, from, to)) {
    const genuine = await agentAuthored(page, agent, async () => systemRepo);
    for (const reply of page) {
      if (genuine.has(reply.id)) {
        visit({ ...dimensionsOf(reply), id: reply.id, status: reply.status, sentAt: reply.sent ? Date.parse(reply.sent) : Number.NaN, usage: recordedUsageOf(reply) });
      }
    }
  }
}

/** The project's AI agent, without creating it: a project that never chatted has none, and no usage. */
async function findAgent(repo: FhirRepository): Promise<Reference<Device> | undefined> {
  const [agent] = await repo.searchResources<Device>({
    resourceType: 'Device',
    filters: [{ code: 'identifier', operator: 'eq', value: `${AGENT_DEVICE_IDENTIFIER.system}|${AGENT_DEVICE_IDENTIFIER.value}` }],
    count: 1,
  });
  return agent ? { reference: `Device/${agent.id}` } : undefined;
}

/** The agent's replies sent from `start` to `end` (not included), page by page, in order of `sent` (then id). */
async function* repliesOf(repo: FhirRepository, agent: Reference<Device>, categorySystem: string, start: string, end: string): AsyncGenerator<WithId<Communication>[]> {
  let from = start;
  // Replies already counted whose `sent` is `from`: the next page starts at `from` and skips them.
  let seenAtFrom = 0;
  for (;;) {
    const page = await repo.searchResources<Communication>({
      resourceType: 'Communication',
      filters: [
        { code: 'category', operator: 'eq', value: `${categorySystem}|${CATEGORY.response.code}` },
        { code: 'sender', operator: 'eq', value: agent.reference as string },
        { code: 'sent', operator: 'ge', value: from },
        { code: 'sent', operator: 'lt', value: end },
      ],
      sortRules: [{ code: 'sent' }, { code: '_id' }],
      count: PAGE_SIZE,
      offset: seenAtFrom,
    });
    if (page.length > 0) {
      yield page;
    }
    if (page.length < PAGE_SIZE) {
      return;
    }
    const last = page[page.length - 1].sent as string;
    const atLast = page.filter((reply) => reply.sent === last).length;
    seenAtFrom = last === from ? seenAtFrom + atLast : atLast;
    from = last;
  }
}

/** The reply's user (the caller it answered), model and UTC day. */
function dimensionsOf(reply: Communication): Record<UsageDimension, string> {
  const recipient = reply.recipient?.[0];
  return {
    user: recipient?.reference ?? recipient?.identifier?.value ?? 'unknown',
    model: reply.extension?.find((extension) => extension.url === EXTENSION.model)?.valueString ?? 'unknown',
    day: reply.sent ? new Date(reply.sent).toISOString().slice(0, 10) : 'unknown',
  };
}

/** The usage a reply records; undefined when it records none. */
export function recordedUsageOf(reply: Communication): RecordedUsageOf | undefined {
  const usage = reply.extension?.find((extension) => extension.url === EXTENSION.usage)?.extension;
  if (usage === undefined) {
    return undefined;
  }
  const part = (url: string): Extension | undefined => usage.find((extension) => extension.url === url);
  const cost = part('cost')?.valueMoney?.value;
  return {
    prompt: part('prompt-tokens')?.valueInteger ?? 0,
    completion: part('completion-tokens')?.valueInteger ?? 0,
    cost: cost === undefined ? 0 : nanoDollarsOf(cost),
    estimated: part('estimated')?.valueBoolean === true,
  };
}

function addUsage(totals: UsageTotals, usage: RecordedUsageOf | undefined): void {
  totals.replies += 1;
  if (usage === undefined) {
    totals.replies_without_usage += 1;
    return;
  }
  totals.prompt_tokens += usage.prompt;
  totals.completion_tokens += usage.completion;
  totals.total_tokens += usage.prompt + usage.completion;
  totals.cost_usd += usage.cost;
  if (usage.estimated) {
    totals.replies_estimated += 1;
    totals.estimated_tokens += usage.prompt + usage.completion;
  }
}

function emptyTotals(): UsageTotals {
  return { replies: 0, replies_without_usage: 0, replies_estimated: 0, prompt_tokens: 0, completion_tokens: 0, total_tokens: 0, estimated_tokens: 0, cost_usd: 0 };
}

/** Nano-dollars summed exactly as whole numbers, shown in dollars at the end. */
function inDollars<T extends UsageTotals>(totals: T): T {
  return { ...totals, cost_usd: totals.cost_usd / NANO_PER_DOLLAR };
}

function compareRows(left: UsageRow, right: UsageRow): number {
  for (const dimension of USAGE_DIMENSIONS) {
    const order = (left[dimension] ?? '').localeCompare(right[dimension] ?? '');
    if (order !== 0) {
      return order;
    }
  }
  return 0;
}

/** The day after `day` (`YYYY-MM-DD`, UTC). */
function nextDay(day: string): string {
  const date = new Date(`${day}T00:00:00.000Z`);
  date.setUTCDate(date.getUTCDate() + 1);
  return date.toISOString().slice(0, 10);
}
