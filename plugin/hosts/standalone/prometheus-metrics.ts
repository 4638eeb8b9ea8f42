/**
 * `/metrics` of the standalone host: an OpenTelemetry SDK meter provider, registered as the process's global
 * one, read by the Prometheus exporter in Prometheus's text format. The plugin's instruments go through
 * `@opentelemetry/api` only, so a Medplum server exports them with whatever SDK it configures instead.
 * The metrics name projects, models and devices, so they are served only to a scraper with the configured bearer
 * token (Prometheus: `authorization: { credentials_file: ... }` in the scrape config).
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { metrics } from '@opentelemetry/api';
import { PrometheusExporter } from '@opentelemetry/exporter-prometheus';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { MeterProvider } from '@opentelemetry/sdk-metrics';
import type { RequestHandler } from 'express';
import { readBearerToken } from '../../http/bearer-token.ts';
import { FHIRGATE_VERSION } from '../../version.ts';
import { registerEventLoopDelay } from './event-loop-delay.ts';

/** Shortest bearer token `/metrics` accepts as configuration. */
export const MIN_METRICS_TOKEN_LENGTH = 16;

let registered: RequestHandler | undefined;

/**
 * Registers the process's meter provider (once: OpenTelemetry's global can be set only once per process), with the
 * host's own gauges (event-loop-delay.ts), and returns the `/metrics` handler. Call it before creating the plugin, whose instruments are made at creation.
 */
export function registerPrometheusMetrics(): RequestHandler {
  if (!registered) {
    const exporter = new PrometheusExporter({ preventServerStart: true });
    const provider = new MeterProvider({
      readers: [exporter],
      resource: resourceFromAttributes({ 'service.name': 'fhirgate', 'service.version': FHIRGATE_VERSION }),
    });
    metrics.setGlobalMeterProvider(provider);
    registerEventLoopDelay(provider.getMeter('fhirgate-host', FHIRGATE_VERSION));
    registered = (request, response) => exporter.getMetricsRequestHandler(request, response);
  }
  return registered;
}

/**
 * `GET /metrics` for a scraper that sends `Authorization: Bearer <bearerToken>`; anyone else gets 401 with
 * `WWW-Authenticate: Bearer`, and nothing of the metrics.
 */
export function createMetricsRoute(metricsHandler: RequestHandler, bearerToken: string): RequestHandler {
  if (bearerToken.length < MIN_METRICS_TOKEN_LENGTH) {
    throw new Error(`The /metrics bearer token must be at least ${MIN_METRICS_TOKEN_LENGTH} characters long.`);
  }
  const expected = digest(bearerToken);
  return (request, response, next) => {
    const given = readBearerToken(request.headers);
    // Compared as digests of equal length, in constant time.
    if (!given || !timingSafeEqual(digest(given), expected)) {
      response.status(401).set('WWW-Authenticate', 'Bearer realm="metrics"').type('text/plain').send('Unauthorized: /metrics needs its bearer token.\n');
      return;
    }
    metricsHandler(request, response, next);
  };
}

function digest(token: string): Buffer {
  return createHash('sha256').update(token).digest();
}
