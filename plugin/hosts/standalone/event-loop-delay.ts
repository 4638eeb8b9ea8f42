/**
 * How late the host's event loop runs, as `/metrics` gauges: one slow synchronous step (a search that reads a
 * whole table, a large JSON parse) holds every other request of the instance for as long as it runs, which the
 * request durations of the slow request alone do not show. Node samples the loop with a timer
 * (`perf_hooks.monitorEventLoopDelay`); each gauge is how much later than scheduled that timer ran, over the
 * interval since the previous collection (the histogram starts again after every scrape, as OpenTelemetry's
 * runtime instrumentation does), in seconds.
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';
import type { Meter } from '@opentelemetry/api';

/** The sampling timer's interval: Node's default, and the part of each sample that is not delay. */
const RESOLUTION_MS = 10;
const NANOSECONDS_PER_SECOND = 1e9;

/** Registers `fhirgate.host.event_loop.delay.{p50,p99,max}` on `meter` and starts sampling (Node's sampler keeps no process alive). */
export function registerEventLoopDelay(meter: Meter): void {
  const histogram = monitorEventLoopDelay({ resolution: RESOLUTION_MS });
  histogram.enable();
  const description = 'How much later than scheduled the event loop ran since the previous collection';
  const gauges = {
    p50: meter.createObservableGauge('fhirgate.host.event_loop.delay.p50', { unit: 's', description: `${description}: median` }),
    p99: meter.createObservableGauge('fhirgate.host.event_loop.delay.p99', { unit: 's', description: `${description}: 99th percentile` }),
    max: meter.createObservableGauge('fhirgate.host.event_loop.delay.max', { unit: 's', description: `${description}: largest` }),
  };
  meter.addBatchObservableCallback(
    (observer) => {
      // Each sample is the whole interval between two runs of the timer: the resolution is taken off.
      const delay = (nanoseconds: number): number => (histogram.count === 0 ? 0 : Math.max(0, nanoseconds / NANOSECONDS_PER_SECOND - RESOLUTION_MS / 1000));
      observer.observe(gauges.p50, delay(histogram.percentile(50)));
      observer.observe(gauges.p99, delay(histogram.percentile(99)));
      observer.observe(gauges.max, delay(histogram.max));
      histogram.reset();
    },
    [gauges.p50, gauges.p99, gauges.max]
  );
}
