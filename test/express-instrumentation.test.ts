/**
 * The trace of a chat turn has the shape docs/observability.md describes when Express's OpenTelemetry
 * instrumentation runs, as it does in a Medplum server: `chat <model>` is a child of fhirgate's request span,
 * whatever Express makes the active span at each middleware's `next`; and the provider's request continues the
 * provider call's span (W3C `traceparent`). Run in a process of its own (test/support/express-instrumented-turn.ts).
 *
 * Needs the instrumentations Medplum 5.1.29 pins: @opentelemetry/instrumentation-express 0.69.0 (earlier ones do
 * not patch Express 5) and @opentelemetry/instrumentation-http 0.221.0. Without them in this project (or in the folder
 * FHIRGATE_TEST_INSTRUMENTATIONS_FROM names), the test is skipped with the reason.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { instrumentationRequire, type PrintedSpan } from './support/express-instrumented-turn.ts';

const NEEDED = { '@opentelemetry/instrumentation-express': '0.69.0', '@opentelemetry/instrumentation-http': '0.221.0' };

/** What is missing of the instrumentations, as `name@version`; empty when they are there. */
function missingInstrumentations(): string[] {
  const load = instrumentationRequire();
  return Object.entries(NEEDED).flatMap(([name, version]) => {
    try {
      return (load(`${name}/package.json`) as { version: string }).version === version ? [] : [`${name}@${version}`];
    } catch {
      return [`${name}@${version}`];
    }
  });
}

const missing = missingInstrumentations();
if (missing.length > 0) {
  console.warn(`Skipped: the trace under Express's instrumentation needs ${missing.join(' and ')} (devDependencies).`);
}

(missing.length > 0 ? describe.skip : describe)("a chat turn's trace under Express's instrumentation, as in a Medplum server", () => {
  let spans: PrintedSpan[];

  beforeAll(async () => {
    const { stdout } = await promisify(execFile)(process.execPath, ['test/support/express-instrumented-turn.ts'], { env: process.env, timeout: 60_000 });
    spans = JSON.parse(stdout.trim().split('\n').at(-1) ?? '[]') as PrintedSpan[];
  }, 70_000);

  test('Express made its spans, and each provider call is a child of its request span, JSON and streamed', () => {
    const byId = new Map(spans.map((span) => [span.spanId, span]));
    // The instrumentation ran: Express's request handler spans are in the same trace as fhirgate's.
    const handlers = spans.filter((span) => span.scope === '@opentelemetry/instrumentation-express' && span.name === 'request handler');
    const requests = spans.filter((span) => span.scope === 'fhirgate' && span.name === 'POST /v1/chat/completions');
    const calls = spans.filter((span) => span.scope === 'fhirgate' && span.name === 'chat echo');
    expect(requests).toHaveLength(2);
    expect(calls).toHaveLength(2);
    expect(new Set(handlers.map((span) => span.traceId))).toEqual(new Set(requests.map((span) => span.traceId)));
    for (const call of calls) {
      const parent = byId.get(call.parentSpanId ?? '');
      expect({ parent: parent?.name, scope: parent?.scope }).toEqual({ parent: 'POST /v1/chat/completions', scope: 'fhirgate' });
      expect(call.traceId).toBe(parent?.traceId);
    }
    expect(calls.map((call) => call.attributes['fhirgate.stream']).sort()).toEqual([false, true]);
  });

  test("the provider's request continues the provider call's span", () => {
    // The emulator listens in the same process: HTTP's instrumentation traces the request it receives.
    const calls = new Set(spans.filter((span) => span.name === 'chat echo').map((span) => span.spanId));
    const received = spans.filter((span) => span.scope === '@opentelemetry/instrumentation-http' && span.parentSpanId !== undefined && calls.has(span.parentSpanId));
    expect(received).toHaveLength(2);
  });
});
