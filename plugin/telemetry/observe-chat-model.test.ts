import { ROOT_CONTEXT, SpanKind, SpanStatusCode, context, propagation, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import type { Histogram } from '@opentelemetry/sdk-metrics';
import { createTestTelemetry, type TestTelemetry } from '../../test/support/telemetry.ts';
import { AppError } from '../errors.ts';
import type { ChatModel, ChatModelRequest, ChatStreamEvent } from '../llm/chat-model.ts';
import { observeChatModel } from './observe-chat-model.ts';

const LABELS = { projectId: 'project-1', modelName: 'gpt-test' };
const REQUEST: Omit<ChatModelRequest, 'signal'> = { model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }], maxTokens: 10 };
const MODEL_ATTRIBUTES = { 'gen_ai.provider.name': 'openai', 'gen_ai.request.model': 'gpt-test', 'fhirgate.project.id': 'project-1' };

/** An in-memory model: streams the given events, or fails with the given error after them; `seen` gets each request. */
function fakeModel(events: ChatStreamEvent[], failure?: unknown, seen: ChatModelRequest[] = []): ChatModel {
  return {
    provider: 'openai',
    complete: async (request) => {
      seen.push(request);
      if (failure) {
        throw failure;
      }
      return { text: 'Hello there', finishReason: 'stop', usage: { promptTokens: 7, completionTokens: 2 } };
    },
    stream: async function* (request) {
      seen.push(request);
      yield* events;
      if (failure) {
        throw failure;
      }
    },
  };
}

async function drain(events: AsyncIterable<ChatStreamEvent>): Promise<void> {
  for await (const _event of events) {
    // read to the end
  }
}

describe('observeChatModel', () => {
  let recorded: TestTelemetry;

  beforeEach(() => {
    recorded = createTestTelemetry();
  });

  test('a whole reply: one client span with GenAI attributes and usage, a duration, tokens in and out by project and model', async () => {
    const model = observeChatModel(fakeModel([]), recorded.telemetry, LABELS);
    await model.complete({ ...REQUEST, signal: new AbortController().signal });

    const [span] = recorded.spans();
    expect(span.name).toBe('chat gpt-test');
    expect(span.kind).toBe(SpanKind.CLIENT);
    expect(span.attributes).toMatchObject({
      ...MODEL_ATTRIBUTES,
      'gen_ai.operation.name': 'chat',
      'gen_ai.usage.input_tokens': 7,
      'gen_ai.usage.output_tokens': 2,
      'gen_ai.response.finish_reasons': ['stop'],
    });
    expect(await recorded.points('fhirgate.llm.tokens')).toEqual([
      { attributes: { ...MODEL_ATTRIBUTES, 'gen_ai.token.type': 'input' }, value: 7 },
      { attributes: { ...MODEL_ATTRIBUTES, 'gen_ai.token.type': 'output' }, value: 2 },
    ]);
    const [duration] = await recorded.points('fhirgate.llm.request.duration');
    expect(duration.attributes).toEqual(MODEL_ATTRIBUTES);
    expect((duration.value as Histogram).count).toBe(1);
    expect(await recorded.points('fhirgate.llm.time_to_first_token')).toEqual([]);
  });

  test('a stream records its time to first token once, and its usage from the finish event', async () => {
    const model = observeChatModel(
      fakeModel([
        { type: 'text', text: 'Hel' },
        { type: 'text', text: 'lo' },
        { type: 'finish', finishReason: 'length', usage: { promptTokens: 3, completionTokens: 2 } },
      ]),
      recorded.telemetry,
      LABELS
    );
    await drain(model.stream({ ...REQUEST, signal: new AbortController().signal }));

    const [firstToken] = await recorded.points('fhirgate.llm.time_to_first_token');
    expect((firstToken.value as Histogram).count).toBe(1);
    const [span] = recorded.spans();
    expect(span.events.map((event) => event.name)).toEqual(['first_token']);
    expect(span.attributes).toMatchObject({ 'fhirgate.stream': true, 'gen_ai.response.finish_reasons': ['length'], 'gen_ai.usage.output_tokens': 2 });
    expect((await recorded.points('fhirgate.llm.tokens')).map((point) => point.value)).toEqual([3, 2]);
  });

  test('a stream that begins with a call has its first token there, and its call events pass on as they are', async () => {
    const events: ChatStreamEvent[] = [
      { type: 'tool_call', index: 0, id: 'call_1', name: 'read_patient', arguments: '' },
      { type: 'tool_call', index: 0, arguments: '{}' },
      { type: 'finish', finishReason: 'tool_calls', usage: { promptTokens: 5, completionTokens: 1 } },
    ];
    const model = observeChatModel(fakeModel(events), recorded.telemetry, LABELS);
    const seen: ChatStreamEvent[] = [];
    for await (const event of model.stream({ ...REQUEST, signal: new AbortController().signal })) {
      seen.push(event);
    }

    expect(seen).toHaveLength(3);
    seen.forEach((event, index) => expect(event).toBe(events[index]));
    const [firstToken] = await recorded.points('fhirgate.llm.time_to_first_token');
    expect((firstToken.value as Histogram).count).toBe(1);
    const [span] = recorded.spans();
    expect(span.events.map((event) => event.name)).toEqual(['first_token']);
    expect(span.attributes).toMatchObject({ 'gen_ai.response.finish_reasons': ['tool_calls'], 'gen_ai.usage.input_tokens': 5 });
    expect(span.status.code).not.toBe(SpanStatusCode.ERROR);
  });

  test('a provider failure counts as an upstream error of its kind, and the span says so without leaking a cause', async () => {
    const failure = new AppError('upstream_timeout', "The LLM provider 'openai' did not answer in time.", {
      details: { provider: 'openai', reason: 'timeout' },
      cause: new Error('secret-bearing upstream text'),
    });
    const model = observeChatModel(fakeModel([{ type: 'text', text: 'partial' }], failure), recorded.telemetry, LABELS);
    await expect(drain(model.stream({ ...REQUEST, signal: new AbortController().signal }))).rejects.toBe(failure);

    expect(await recorded.points('fhirgate.llm.upstream_errors')).toEqual([
      { attributes: { 'gen_ai.provider.name': 'openai', 'error.type': 'timeout' }, value: 1 },
    ]);
    const [duration] = await recorded.points('fhirgate.llm.request.duration');
    expect(duration.attributes).toEqual({ ...MODEL_ATTRIBUTES, 'error.type': 'timeout' });
    const [span] = recorded.spans();
    expect(span.status).toEqual({ code: SpanStatusCode.ERROR, message: failure.message });
    expect(JSON.stringify(span.attributes)).not.toContain('secret-bearing');
  });

  test('a reader that stops early (its client left) is cancelled, not an upstream error', async () => {
    const model = observeChatModel(
      fakeModel([
        { type: 'text', text: 'one' },
        { type: 'text', text: 'two' },
      ]),
      recorded.telemetry,
      LABELS
    );
    for await (const _event of model.stream({ ...REQUEST, signal: new AbortController().signal })) {
      break;
    }
    expect(await recorded.points('fhirgate.llm.upstream_errors')).toEqual([]);
    const [duration] = await recorded.points('fhirgate.llm.request.duration');
    expect(duration.attributes).toEqual({ ...MODEL_ATTRIBUTES, 'error.type': 'cancelled' });
    expect(recorded.spans()).toHaveLength(1);
  });

  test("the provider call carries its span's trace context, as the host's propagator writes it", async () => {
    propagation.setGlobalPropagator(new W3CTraceContextPropagator());
    try {
      const seen: ChatModelRequest[] = [];
      const model = observeChatModel(fakeModel([{ type: 'text', text: 'a' }, { type: 'finish', finishReason: 'stop', usage: undefined }], undefined, seen), recorded.telemetry, LABELS);
      await model.complete({ ...REQUEST, signal: new AbortController().signal });
      await drain(model.stream({ ...REQUEST, signal: new AbortController().signal }));
      const spans = recorded.spans();
      expect(seen.map((request) => request.traceHeaders?.traceparent)).toEqual(
        spans.map((span) => `00-${span.spanContext().traceId}-${span.spanContext().spanId}-01`)
      );
    } finally {
      propagation.disable();
    }
  });

  test("a call given its request's context is that request's child, whatever span is active (Express's instrumentation makes its own active)", async () => {
    const manager = new AsyncLocalStorageContextManager().enable();
    context.setGlobalContextManager(manager);
    propagation.setGlobalPropagator(new W3CTraceContextPropagator());
    try {
      const requestSpan = recorded.telemetry.tracer.startSpan('POST /v1/chat/completions');
      const handlerSpan = recorded.telemetry.tracer.startSpan('request handler');
      const seen: ChatModelRequest[] = [];
      const model = observeChatModel(
        fakeModel([{ type: 'text', text: 'a' }, { type: 'finish', finishReason: 'stop', usage: undefined }], undefined, seen),
        recorded.telemetry,
        { ...LABELS, parent: trace.setSpan(ROOT_CONTEXT, requestSpan) }
      );
      await context.with(trace.setSpan(ROOT_CONTEXT, handlerSpan), async () => {
        await model.complete({ ...REQUEST, signal: new AbortController().signal });
        await drain(model.stream({ ...REQUEST, signal: new AbortController().signal }));
      });
      const calls = recorded.spans().filter((span) => span.name === 'chat gpt-test');
      expect(calls.map((span) => span.parentSpanContext?.spanId)).toEqual([requestSpan.spanContext().spanId, requestSpan.spanContext().spanId]);
      // The provider's request continues the call's span, in the request's trace.
      expect(seen.map((request) => request.traceHeaders?.traceparent)).toEqual(calls.map((span) => `00-${requestSpan.spanContext().traceId}-${span.spanContext().spanId}-01`));
    } finally {
      propagation.disable();
      context.disable();
    }
  });
});
