/**
 * The usage chart: tokens per day, a bar per day stacked by model. Loaded on its own (React.lazy) when the usage
 * tab opens, so the charting library stays out of the app's first load.
 */
import '@mantine/charts/styles.css';
import { BarChart } from '@mantine/charts';
import type { JSX } from 'react';
import { formatTokens, tokensByDay, type UsageReport } from './usage-report.ts';

const COLORS = ['blue.8', 'teal.8', 'grape.8', 'orange.8', 'cyan.8', 'pink.8', 'lime.8', 'indigo.8'];

export default function UsageChart({ report }: { readonly report: UsageReport }): JSX.Element {
  const { days, models } = tokensByDay(report);
  return (
    <figure aria-label="Tokens per day and model" style={{ margin: 0 }}>
      <BarChart
        h={260}
        data={days}
        dataKey="day"
        type="stacked"
        withLegend
        valueFormatter={formatTokens}
        xAxisProps={{ tickFormatter: (day: string) => day.slice(5) }}
        series={models.map((model, index) => ({ name: model, color: COLORS[index % COLORS.length] }))}
      />
      <figcaption style={{ fontSize: 'var(--mantine-font-size-sm)', color: 'var(--mantine-color-gray-7)' }}>
        Tokens per day ({report.start} to {report.end}), by model. The tables below hold the same numbers, by user, by model and by day.
      </figcaption>
    </figure>
  );
}
