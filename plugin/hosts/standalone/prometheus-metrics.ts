/**
 * `/metrics` of the standalone host: an OpenTelemetry SDK meter provider, registered as the process's global
 * one, read by the Prometheus exporter in Prometheus's text format. The plugin's instruments go through
 * `@opentelemetry/api` only, so a Medplum server exports them with whatever SDK it configures instead.
 */
import { metrics } from '@opentelemetry/api';
import { PrometheusExporter } from '@opentelemetry/exporter-prometheus';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { MeterProvider } from '@opentelemetry/sdk-metrics';
import type { RequestHandler } from 'express';
import { FHIRGATE_VERSION } from '../../version.ts';

let registered: RequestHandler | undefined;

/**
 * Registers the process's meter provider (once: OpenTelemetry's global can be set only once per process) and
 * returns the `/metrics` handler. Call it before creating the plugin, whose instruments are made at creation.
 */
export function registerPrometheusMetrics(): RequestHandler {
  if (!registered) {
    const exporter = new PrometheusExporter({ preventServerStart: true });
    const provider = new MeterProvider({
      readers: [exporter],
      resource: resourceFromAttributes({ 'service.name': 'fhirgate', 'service.version': FHIRGATE_VERSION }),
    });
    metrics.setGlobalMeterProvider(provider);
    registered = (request, response) => exporter.getMetricsRequestHandler(request, response);
  }
  return registered;
}
