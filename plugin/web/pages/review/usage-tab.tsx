/**
 * The review console's usage and budgets: this month so far, or the period chosen, from the replies the signed-in user may read
 * (`GET /v1/usage`: a project administrator's and a reviewer's are the project's, a clinician's their own), as a
 * chart of tokens per day and model and tables per user, per model and per day (the days with replies), with the budgets' limits and what remains
 * (`GET /v1/governance`). The chart loads only when this tab opens.
 */
import { Alert, Button, Group, Loader, Stack, Table, Text, Title } from '@mantine/core';
import { lazy, Suspense, useState, type FormEvent, type JSX } from 'react';
import { PeriodInputs } from './period-inputs.tsx';
import type { Period } from './review-searches.ts';
import { useGovernance, type GovernanceBudget } from './governance-data.ts';
import { useDisplayNames, useUsageReport } from './usage-data.ts';
import { formatDollars, formatTokens, spendOf, totalsBy, type UsageReport, type UsageTotals } from './usage-report.ts';

const UsageChart = lazy(() => import('./usage-chart.tsx'));

export function UsageTab(): JSX.Element {
  const [period, setPeriod] = useState<Period>({});
  const [shown, setShown] = useState<Period>({});
  function show(event: FormEvent): void {
    event.preventDefault();
    setShown(period);
  }
  return (
    <Stack gap="lg">
      <form onSubmit={show} aria-label="Usage period">
        <Group align="flex-end">
          <PeriodInputs value={period} onChange={setPeriod} />
          <Button type="submit">Show</Button>
        </Group>
      </form>
      <UsageOfPeriod period={shown} />
    </Stack>
  );
}

function UsageOfPeriod({ period }: { readonly period: Period }): JSX.Element {
  const { report, error } = useUsageReport(period);
  const { governance } = useGovernance();
  const users = report ? totalsBy(report.data, 'user') : [];
  const names = useDisplayNames(users.map((group) => group.key));
  if (error) {
    return <Alert color="red" title="The usage could not be read">{error}</Alert>;
  }
  if (!report) {
    return <Loader role="status" aria-label="Reading the usage" />;
  }
  const budgets = governance?.budgets ?? [];
  return (
    <Stack gap="lg">
      <Text>
        {report.scope === 'project' ? 'Every reply of the project' : 'The replies you may read'}, {report.start} to {report.end}:{' '}
        <strong>{formatTokens(report.total.total_tokens)} tokens</strong> in {report.total.replies} replies, {formatDollars(report.total.cost_usd)}.
      </Text>
      <Suspense fallback={<Loader role="status" aria-label="Drawing the chart" />}>{report.data.length > 0 ? <UsageChart report={report} /> : <Text>No replies in this period.</Text>}</Suspense>
      <section aria-labelledby="usage-by-user">
        <Title order={2} size="h4" id="usage-by-user" mb="xs">
          By user
        </Title>
        <UsageTable
          label="Usage by user"
          first="User"
          rows={users.map((group) => ({ key: group.key, name: names.get(group.key) ?? group.key, totals: group.totals }))}
          extra={userBudgetColumns(budgets, report)}
        />
      </section>
      <section aria-labelledby="usage-by-model">
        <Title order={2} size="h4" id="usage-by-model" mb="xs">
          By model
        </Title>
        <UsageTable label="Usage by model" first="Model" rows={totalsBy(report.data, 'model').map((group) => ({ key: group.key, name: group.key, totals: group.totals }))} />
      </section>
      <section aria-labelledby="usage-by-day">
        <Title order={2} size="h4" id="usage-by-day" mb="xs">
          By day
        </Title>
        <UsageTable label="Usage by day" first="Day" rows={totalsBy(report.data, 'day').map((group) => ({ key: group.key, name: group.key, totals: group.totals }))} />
      </section>
      <section aria-labelledby="usage-budgets">
        <Title order={2} size="h4" id="usage-budgets" mb="xs">
          Budgets
        </Title>
        <BudgetTable budgets={budgets} />
      </section>
    </Stack>
  );
}

interface Row {
  readonly key: string;
  readonly name: string;
  readonly totals: UsageTotals;
}

/** Extra columns: a header and a cell per row. */
interface ExtraColumn {
  readonly header: string;
  readonly cell: (key: string) => string;
}

function UsageTable({ label, first, rows, extra = [] }: { readonly label: string; readonly first: string; readonly rows: readonly Row[]; readonly extra?: readonly ExtraColumn[] }): JSX.Element {
  return (
    <Table striped aria-label={label}>
      <Table.Thead>
        <Table.Tr>
          <Table.Th>{first}</Table.Th>
          <Table.Th>Replies</Table.Th>
          <Table.Th>Tokens in</Table.Th>
          <Table.Th>Tokens out</Table.Th>
          <Table.Th>Tokens in all</Table.Th>
          <Table.Th>Cost</Table.Th>
          {extra.map((column) => (
            <Table.Th key={column.header}>{column.header}</Table.Th>
          ))}
        </Table.Tr>
      </Table.Thead>
      <Table.Tbody>
        {rows.map((row) => (
          <Table.Tr key={row.key}>
            <Table.Td>{row.name}</Table.Td>
            <Table.Td>{row.totals.replies}</Table.Td>
            <Table.Td>{formatTokens(row.totals.prompt_tokens)}</Table.Td>
            <Table.Td>{formatTokens(row.totals.completion_tokens)}</Table.Td>
            <Table.Td>
              {formatTokens(row.totals.total_tokens)}
              {row.totals.estimated_tokens > 0 ? ` (${formatTokens(row.totals.estimated_tokens)} estimated)` : ''}
            </Table.Td>
            <Table.Td>{formatDollars(row.totals.cost_usd)}</Table.Td>
            {extra.map((column) => (
              <Table.Td key={column.header}>{column.cell(row.key)}</Table.Td>
            ))}
          </Table.Tr>
        ))}
      </Table.Tbody>
    </Table>
  );
}

/** What each user has left of the user budgets, from their usage today and this month. */
function userBudgetColumns(budgets: readonly GovernanceBudget[], report: UsageReport): ExtraColumn[] {
  const today = new Date().toISOString().slice(0, 10);
  const thisMonth = report.end.slice(0, 7) === today.slice(0, 7) && report.start <= `${today.slice(0, 7)}-01`;
  return budgets
    .filter((budget) => budget.scope === 'user' && (budget.period === 'day' || thisMonth))
    .map((budget) => ({
      header: `Left ${budget.period === 'day' ? 'today' : 'this month'} (${budget.measure})`,
      cell: (user: string) => {
        const spend = spendOf(report.data, user, today)[budget.period];
        const left = Math.max(0, budget.limit - (budget.measure === 'tokens' ? spend.tokens : spend.cost));
        return budget.measure === 'tokens' ? formatTokens(left) : formatDollars(left);
      },
    }));
}

const BUDGET_OWNER = { project: 'The project', user: 'Each user' } as const;

function BudgetTable({ budgets }: { readonly budgets: readonly GovernanceBudget[] }): JSX.Element {
  if (budgets.length === 0) {
    return <Text>The project sets no budget: replies are counted, nothing is refused for cost.</Text>;
  }
  const amount = (budget: GovernanceBudget, value: number): string => (budget.measure === 'tokens' ? `${formatTokens(value)} tokens` : formatDollars(value));
  return (
    <Table striped aria-label="Budgets">
      <Table.Thead>
        <Table.Tr>
          <Table.Th>Budget</Table.Th>
          <Table.Th>Limit</Table.Th>
          <Table.Th>Spent</Table.Th>
          <Table.Th>Left</Table.Th>
          <Table.Th>Resets</Table.Th>
        </Table.Tr>
      </Table.Thead>
      <Table.Tbody>
        {budgets.map((budget) => (
          <Table.Tr key={budget.setting}>
            <Table.Td>
              <Group gap={4}>
                {BUDGET_OWNER[budget.scope]}, per {budget.period}
                <Text span size="xs" c="gray.7">
                  ({budget.setting})
                </Text>
              </Group>
            </Table.Td>
            <Table.Td>{amount(budget, budget.limit)}</Table.Td>
            <Table.Td>
              {budget.scope === 'user' ? 'Yours: ' : ''}
              {amount(budget, budget.spent)}
            </Table.Td>
            <Table.Td>
              {budget.scope === 'user' ? 'Yours: ' : ''}
              {amount(budget, budget.remaining)}
            </Table.Td>
            <Table.Td>{new Date(budget.resets_at).toISOString().replace('T', ' ').slice(0, 16)} UTC</Table.Td>
          </Table.Tr>
        ))}
      </Table.Tbody>
      {budgets.some((budget) => budget.scope === 'user') ? (
        <Table.Caption style={{ color: 'var(--mantine-color-gray-7)' }}>A user budget counts each user apart: what each user has left is in the table by user.</Table.Caption>
      ) : null}
    </Table>
  );
}
