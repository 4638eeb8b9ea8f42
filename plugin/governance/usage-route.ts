/**
 * `GET /v1/usage?start=YYYY-MM-DD&end=YYYY-MM-DD&group_by=user,model,day`: the usage report (usage-report.ts) of
 * the replies the caller may read. A project administrator (Medplum's `ProjectMembership.admin`) reads every reply
 * of the project, so their report is the project's; anyone else's counts the replies their own AccessPolicy lets
 * them read (a reviewer who reads every Communication: the project's; a clinician who reads their own: their own),
 * searched with their own repository, so the server's access rules decide and nothing new is revealed.
 */
import type { Request, Response } from 'express';
import { authenticateCaller } from '../chat/authenticate-caller.ts';
import type { ChatServices } from '../chat/chat-completion.ts';
import { AppError } from '../errors.ts';
import { buildUsageReport, type UsageDimension, type UsageQuery } from './usage-report.ts';

// A report reads every reply of its period: a year at most per request.
const MAX_DAYS = 366;
const PARAMETERS = new Set(['start', 'end', 'group_by']);
const DIMENSIONS: readonly UsageDimension[] = ['user', 'model', 'day'];
const DAY = /^\d{4}-\d{2}-\d{2}$/;

/** Answers the usage report of the caller's project. */
export async function handleUsageReport(services: Pick<ChatServices, 'host' | 'categorySystem'>, request: Request, response: Response): Promise<void> {
  const caller = await authenticateCaller(services.host, request);
  const query = parseUsageQuery(request.query, services.categorySystem, new Date());
  const systemRepo = await services.host.getSystemRepo(caller.project.id);
  const everything = caller.membership.admin === true;
  const report = await buildUsageReport(everything ? systemRepo : caller.repo, systemRepo, query);
  response.json({
    object: 'usage_report',
    project_id: caller.project.id,
    scope: everything ? 'project' : 'readable',
    start: query.start,
    end: query.end,
    group_by: query.groupBy,
    data: report.rows,
    total: report.total,
  });
}

/**
 * The report's period and grouping: `start` (default: the first day of this month, UTC), `end` (default: today),
 * `group_by` (default: `user,model,day`; empty for the totals only). Anything else is a 400 naming it.
 */
export function parseUsageQuery(parameters: Request['query'], categorySystem: string, now: Date): UsageQuery {
  for (const name of Object.keys(parameters)) {
    if (!PARAMETERS.has(name)) {
      throw invalid(name, `Unknown parameter '${name.slice(0, 60)}': the usage report takes start, end and group_by.`);
    }
  }
  const today = now.toISOString().slice(0, 10);
  const start = dayParameter(parameters, 'start') ?? `${today.slice(0, 7)}-01`;
  const end = dayParameter(parameters, 'end') ?? today;
  const days = (Date.parse(end) - Date.parse(start)) / 86_400_000 + 1;
  if (days < 1) {
    throw invalid('end', 'end must not be before start.');
  }
  if (days > MAX_DAYS) {
    throw invalid('end', `A usage report covers at most ${MAX_DAYS} days; ask for several.`);
  }
  const groupBy = stringParameter(parameters, 'group_by') ?? DIMENSIONS.join(',');
  const dimensions = groupBy
    .split(',')
    .map((part) => part.trim())
    .filter((part) => part !== '');
  const unknown = dimensions.find((dimension) => !DIMENSIONS.includes(dimension as UsageDimension));
  if (unknown !== undefined) {
    throw invalid('group_by', `group_by takes user, model and day, comma separated; '${unknown.slice(0, 60)}' is none of them.`);
  }
  return { start, end, groupBy: [...new Set(dimensions as UsageDimension[])], categorySystem };
}

function dayParameter(parameters: Request['query'], name: string): string | undefined {
  const value = stringParameter(parameters, name);
  if (value === undefined) {
    return undefined;
  }
  if (!DAY.test(value) || Number.isNaN(Date.parse(value)) || new Date(value).toISOString().slice(0, 10) !== value) {
    throw invalid(name, `${name} must be a day, YYYY-MM-DD (UTC).`);
  }
  return value;
}

function stringParameter(parameters: Request['query'], name: string): string | undefined {
  const value = parameters[name];
  if (value === undefined) {
    return undefined;
  }
  if (typeof value !== 'string') {
    throw invalid(name, `${name} must be given once.`);
  }
  return value;
}

function invalid(param: string, message: string): AppError {
  return new AppError('invalid_request', message, { details: { param } });
}
