/**
 * docs/grafana-dashboard.json queries only metrics fhirgate defines, under the names Prometheus gives them (dots as
 * underscores; `_total`, `_bucket`, `_count`, `_sum` and a unit suffix added on the way), and shows each thing an
 * operator watches: turns, latency, tokens, cost, refusals, device token exchanges. A renamed metric fails here.
 */
import { readFile } from 'node:fs/promises';
import { MeterProvider, MetricReader } from '@opentelemetry/sdk-metrics';
import { createTelemetry } from '../plugin/telemetry/telemetry.ts';

class OnDemandReader extends MetricReader {
  protected override async onShutdown(): Promise<void> {}
  protected override async onForceFlush(): Promise<void> {}
}

interface Panel {
  readonly type: string;
  readonly title: string;
  readonly targets?: readonly { readonly expr: string }[];
}

interface Dashboard {
  readonly panels: Panel[];
  readonly templating: { readonly list: readonly { readonly definition?: string }[] };
}

/** The names of every instrument fhirgate makes: each is recorded once, so that a reader sees it. */
async function definedMetricNames(): Promise<Set<string>> {
  const reader = new OnDemandReader();
  const telemetry = createTelemetry('test', { meterProvider: new MeterProvider({ readers: [reader] }) });
  for (const instrument of Object.values(telemetry) as unknown[]) {
    const candidate = instrument as { add?: (value: number) => void; record?: (value: number) => void; addCallback?: (callback: (result: { observe(value: number): void }) => void) => void };
    if (typeof candidate.add === 'function') {
      candidate.add(1);
    } else if (typeof candidate.record === 'function') {
      candidate.record(1);
    } else if (typeof candidate.addCallback === 'function') {
      candidate.addCallback((result) => result.observe(1));
    }
  }
  const { resourceMetrics } = await reader.collect();
  return new Set(resourceMetrics.scopeMetrics.flatMap((scope) => scope.metrics.map((metric) => metric.descriptor.name)));
}

/** The fhirgate metric names a PromQL expression reads, back in OpenTelemetry's spelling. */
function queriedMetricNames(expression: string): string[] {
  // A metric is named before a selector or a range (`name{`, `name[`), in `__name__=~"..."`, or in `label_values(name,`;
  // the other `fhirgate_` words are labels.
  const names = [...expression.matchAll(/(fhirgate_[a-z0-9_]*[a-z0-9])(?=[{[])|__name__=~"(fhirgate_[a-z0-9_]*[a-z0-9])|label_values\((fhirgate_[a-z0-9_]*[a-z0-9])/g)].map(
    (match) => match[1] ?? match[2] ?? match[3]
  );
  return names.map((name) =>
    name
      .replace(/_(total|bucket|count|sum)$/, '')
      .replace(/_(seconds|ratio)$/, '')
      .replaceAll('_', '.')
  );
}

describe('the Grafana dashboard in docs/', () => {
  let panels: Panel[];
  let defined: Set<string>;
  /** A metric defined as `fhirgate.llm.request.duration` is queried as `fhirgate_llm_request_duration`: compared with dots and underscores alike. */
  const spelling = (name: string): string => name.replaceAll('_', '.');

  beforeAll(async () => {
    const dashboard = JSON.parse(await readFile(new URL('../docs/grafana-dashboard.json', import.meta.url), 'utf8')) as Dashboard;
    // The project variable's query reads a metric too: it counts as a panel of its own here.
    panels = [...dashboard.panels, { type: 'variable', title: 'the project variable', targets: dashboard.templating.list.flatMap((variable) => (variable.definition ? [{ expr: variable.definition }] : [])) }];
    defined = new Set([...(await definedMetricNames())].map(spelling));
  });

  test('every metric a panel queries is one fhirgate defines', () => {
    expect(defined.size).toBeGreaterThan(10);
    const unknown = panels.flatMap((panel) => (panel.targets ?? []).flatMap((target) => queriedMetricNames(target.expr).filter((name) => !defined.has(name)).map((name) => `${panel.title}: ${name}`)));
    expect(unknown).toEqual([]);
  });

  test('it shows turns, latency, tokens, cost, refusals and device token exchanges', () => {
    const queried = new Set(panels.flatMap((panel) => (panel.targets ?? []).flatMap((target) => queriedMetricNames(target.expr))));
    for (const name of [
      'fhirgate.http.server.request.duration',
      'fhirgate.llm.request.duration',
      'fhirgate.llm.time.to.first.token',
      'fhirgate.llm.tokens',
      'fhirgate.llm.cost',
      'fhirgate.governance.refusals',
      'fhirgate.device.token.exchanges',
      'fhirgate.rate.limit.rejections',
    ]) {
      expect({ name, queried: queried.has(name) }).toEqual({ name, queried: true });
    }
    expect(panels.filter((panel) => panel.type !== 'row').every((panel) => (panel.targets ?? []).length > 0)).toBe(true);
  });
});
