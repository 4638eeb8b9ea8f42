/**
 * One chat turn (JSON, then streamed) through a standalone host in a process traced as a Medplum server traces
 * its own: a context manager, a tracer provider, and Express's and HTTP's OpenTelemetry instrumentations with the
 * options Medplum 5.1.29 gives them (src/otel/instrumentation.ts), and W3C trace context. Prints the finished spans as one JSON line.
 *
 * A process of its own because instrumentations patch modules as Node's `require` loads them, which Jest's module
 * registry bypasses. The instrumentation packages are loaded from this project, or from the folder named by
 * FHIRGATE_TEST_INSTRUMENTATIONS_FROM (a folder whose node_modules has them).
 */
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { context, propagation, trace } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';

/** A finished span, as the test reads it. */
export interface PrintedSpan {
  readonly name: string;
  readonly scope: string;
  readonly traceId: string;
  readonly spanId: string;
  readonly parentSpanId?: string;
  readonly attributes: Record<string, unknown>;
}

interface InstrumentationModules {
  readonly express: { ExpressInstrumentation: new (config: unknown) => unknown; ExpressLayerType: { ROUTER: string } };
  readonly http: { HttpInstrumentation: new (config: unknown) => unknown };
}

/** Where the instrumentations are loaded from. */
export function instrumentationRequire(): NodeJS.Require {
  const from = process.env.FHIRGATE_TEST_INSTRUMENTATIONS_FROM;
  return createRequire(from ? join(from, 'package.json') : import.meta.url);
}

async function main(): Promise<void> {
  const spans = new InMemorySpanExporter();
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] }));
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());

  const load = instrumentationRequire();
  const modules: InstrumentationModules = {
    express: load('@opentelemetry/instrumentation-express') as InstrumentationModules['express'],
    http: load('@opentelemetry/instrumentation-http') as InstrumentationModules['http'],
  };
  // Medplum's options (enabled when made, as NodeSDK's registration does).
  new modules.http.HttpInstrumentation({ ignoreIncomingRequestHook: (request: { url?: string }) => request.url === '/healthcheck', requireParentforOutgoingSpans: true });
  new modules.express.ExpressInstrumentation({
    ignoreLayers: ['expressInit', 'query', 'urlencodedParser', 'textParser', 'setupResponseInterceptors', 'standardHeaders', 'corsMiddleware', 'compression'].map((name) => `middleware - ${name}`),
    ignoreLayersType: [modules.express.ExpressLayerType.ROUTER],
  });
  // Loaded through `require` after the instrumentations, so they are patched; the host's imports get the same modules.
  const require = createRequire(import.meta.url);
  require('node:http');
  require('express');

  const { startLlmEmulator } = await import('../emulator/index.ts');
  const { startTestHost } = await import('./test-host.ts');
  const emulator = await startLlmEmulator({ models: ['echo'] });
  const host = await startTestHost({
    pluginFor: () => ({
      llm: { providers: { emulator: { kind: 'openai-compatible', baseUrl: `${emulator.url}/v1`, apiKey: 'sk-instrumented', models: ['echo'], retries: { maxRetries: 0 } } }, defaultModel: 'emulator/echo' },
    }),
  });
  try {
    const project = host.project;
    if (!project) {
      throw new Error('The host loaded no project.');
    }
    const token = await host.accessTokenFor(project.ids['practitioner-membership']);
    for (const stream of [false, true]) {
      const response = await fetch(`${host.url}v1/chat/completions`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${token}`, 'X-Project-ID': project.projectId },
        body: JSON.stringify({ model: 'emulator/echo', messages: [{ role: 'user', content: 'How are you?' }], stream }),
      });
      await response.text();
      if (response.status !== 200) {
        throw new Error(`The turn was answered ${response.status}.`);
      }
    }
  } finally {
    await host.close();
    await emulator.close();
  }
  const printed: PrintedSpan[] = spans.getFinishedSpans().map((span) => ({
    name: span.name,
    scope: span.instrumentationScope.name,
    traceId: span.spanContext().traceId,
    spanId: span.spanContext().spanId,
    parentSpanId: span.parentSpanContext?.spanId,
    attributes: { ...span.attributes },
  }));
  process.stdout.write(`${JSON.stringify(printed)}\n`);
}

if (import.meta.main) {
  await main();
}
