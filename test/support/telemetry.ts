/**
 * OpenTelemetry SDKs in memory, for tests that check what fhirgate measures and traces: a meter provider read
 * on demand and a tracer provider whose finished spans are kept.
 */
import type { Attributes } from '@opentelemetry/api';
import { MeterProvider, MetricReader, type DataPoint, type Histogram } from '@opentelemetry/sdk-metrics';
import { InMemorySpanExporter, SimpleSpanProcessor, BasicTracerProvider, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { createTelemetry, type Telemetry } from '../../plugin/telemetry/telemetry.ts';

class OnDemandReader extends MetricReader {
  protected override async onShutdown(): Promise<void> {}
  protected override async onForceFlush(): Promise<void> {}
}

/** One recorded point: its attributes and its value (a sum, or a histogram's count and sum). */
export interface RecordedPoint {
  readonly attributes: Attributes;
  readonly value: number | Histogram;
}

/** In-memory telemetry and what it recorded. */
export interface TestTelemetry {
  readonly telemetry: Telemetry;
  readonly meterProvider: MeterProvider;
  readonly tracerProvider: BasicTracerProvider;
  /** The points of one metric, by its name. */
  points(metricName: string): Promise<RecordedPoint[]>;
  /** Finished spans, oldest first. */
  spans(): ReadableSpan[];
}

/** Makes a Telemetry backed by in-memory SDKs (nothing global is registered). */
export function createTestTelemetry(): TestTelemetry {
  const reader = new OnDemandReader();
  const meterProvider = new MeterProvider({ readers: [reader] });
  const exporter = new InMemorySpanExporter();
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  return {
    telemetry: createTelemetry('test', { meterProvider, tracerProvider }),
    meterProvider,
    tracerProvider,
    points: async (metricName) => {
      const { resourceMetrics } = await reader.collect();
      const metric = resourceMetrics.scopeMetrics.flatMap((scope) => scope.metrics).find((candidate) => candidate.descriptor.name === metricName);
      const dataPoints = (metric?.dataPoints ?? []) as DataPoint<number | Histogram>[];
      return dataPoints.map((point) => ({ attributes: point.attributes, value: point.value }));
    },
    spans: () => exporter.getFinishedSpans(),
  };
}
