/**
 * Wraps a ChatModel so that each provider call is a `chat <model>` span (OpenTelemetry's GenAI conventions) and
 * feeds the provider metrics: duration, time to first token, tokens in and out, upstream errors by kind. The
 * chat pipeline calls the wrapped model as it would the bare one.
 */
import { SpanKind, SpanStatusCode, context, propagation, trace, type Attributes, type Context, type Span } from '@opentelemetry/api';
import { AppError } from '../errors.ts';
import type { ChatCompletion, ChatModel, ChatModelRequest, ChatStreamEvent, ChatUsage } from '../llm/chat-model.ts';
import { isAbortError } from '../llm/provider-errors.ts';
import type { Telemetry } from './telemetry.ts';

/** Who a call is for, as metric attributes. */
export interface ProviderCallLabels {
  readonly projectId: string;
  /** The model or deployment name sent to the provider. */
  readonly modelName: string;
  /**
   * The context of the request the call serves (`requestContextOf`): its span is the call's parent. Taken
   * explicitly because the active context at the call is not the request's inside a Medplum server (Express's
   * instrumentation makes each middleware's span the active one); the active context when not given.
   */
  readonly parent?: Context;
}

/** The model, observed. */
export function observeChatModel(model: ChatModel, telemetry: Telemetry, labels: ProviderCallLabels): ChatModel {
  const attributes: Attributes = {
    'gen_ai.provider.name': model.provider,
    'gen_ai.request.model': labels.modelName,
    'fhirgate.project.id': labels.projectId,
  };
  const startCall = (stream: boolean): ProviderCall => new ProviderCall(telemetry, attributes, stream, labels.parent ?? context.active());
  return {
    provider: model.provider,
    ...(model.checkRequest ? { checkRequest: model.checkRequest.bind(model) } : {}),
    complete: async (request: ChatModelRequest): Promise<ChatCompletion> => {
      const call = startCall(false);
      try {
        const completion = await model.complete({ ...request, traceHeaders: call.traceHeaders() });
        call.succeeded(completion.usage, completion.finishReason);
        return completion;
      } catch (error) {
        call.failed(error);
        throw error;
      }
    },
    stream: (request: ChatModelRequest): AsyncIterable<ChatStreamEvent> => observeStream(request, model, startCall),
  };
}

/**
 * The stream with its call observed: the clock starts on the first `next()` (when the upstream request starts), the
 * first event is the first token, `finish` ends the call well, and an error, or a reader that stops first (its
 * client left), ends it failed. A plain iterator over the model's, not an async generator: with a thousand streams
 * waiting at once, a generator layer's pending objects are what the young generation's collections copy
 * (bench/findings.md, "Stream layers").
 */
function observeStream(request: ChatModelRequest, model: ChatModel, startCall: (stream: boolean) => ProviderCall): AsyncIterableIterator<ChatStreamEvent> {
  let call: ProviderCall | undefined;
  let inner: AsyncIterator<ChatStreamEvent> | undefined;
  let ended = false;
  const stopped = (): void => {
    if (!ended) {
      ended = true;
      // The consumer stopped reading (its client left), or the stream ended without its finish: not a provider failure.
      call?.failed(new DOMException('The reader stopped.', 'AbortError'));
    }
  };
  // Made once per stream, not per event: each event's wait then allocates only its promise.
  const onResult = (result: IteratorResult<ChatStreamEvent>): IteratorResult<ChatStreamEvent> => {
    if (result.done) {
      stopped();
    } else if (result.value.type === 'finish') {
      call?.succeeded(result.value.usage, result.value.finishReason);
      ended = true;
    } else {
      // A reply that begins with a call has its first token there, as one that begins with text does.
      call?.firstToken();
    }
    return result;
  };
  const onError = (error: unknown): never => {
    // A call ends once: an error after its finish changes nothing on record.
    ended = true;
    call?.failed(error);
    throw error;
  };
  const observed: AsyncIterableIterator<ChatStreamEvent> = {
    [Symbol.asyncIterator]: () => observed,
    next: () => {
      if (!inner) {
        call = startCall(true);
        try {
          inner = model.stream({ ...request, traceHeaders: call.traceHeaders() })[Symbol.asyncIterator]();
        } catch (error) {
          ended = true;
          call.failed(error);
          return Promise.reject(error);
        }
      }
      return inner.next().then(onResult, onError);
    },
    return: async (value?: unknown) => {
      await inner?.return?.(value);
      stopped();
      return { done: true, value: undefined };
    },
  };
  return observed;
}

/** One provider call's span and measurements. */
class ProviderCall {
  readonly #telemetry: Telemetry;
  readonly #attributes: Attributes;
  readonly #span: Span;
  readonly #context: Context;
  readonly #started = performance.now();
  #sawFirstToken = false;
  #ended = false;

  constructor(telemetry: Telemetry, attributes: Attributes, stream: boolean, parent: Context) {
    this.#telemetry = telemetry;
    this.#attributes = attributes;
    this.#span = telemetry.tracer.startSpan(
      `chat ${String(attributes['gen_ai.request.model'])}`,
      { kind: SpanKind.CLIENT, attributes: { ...attributes, 'gen_ai.operation.name': 'chat', 'fhirgate.stream': stream } },
      parent
    );
    this.#context = trace.setSpan(parent, this.#span);
  }

  /** The span's trace context as the registered propagator writes it (W3C trace context in a Medplum server). */
  traceHeaders(): Record<string, string> {
    const headers: Record<string, string> = {};
    propagation.inject(this.#context, headers);
    return headers;
  }

  firstToken(): void {
    if (this.#sawFirstToken) {
      return;
    }
    this.#sawFirstToken = true;
    this.#telemetry.timeToFirstToken.record(this.#seconds(), this.#attributes);
    this.#span.addEvent('first_token');
  }

  succeeded(usage: ChatUsage | undefined, finishReason: string): void {
    if (usage) {
      this.#telemetry.tokens.add(usage.promptTokens, { ...this.#attributes, 'gen_ai.token.type': 'input' });
      this.#telemetry.tokens.add(usage.completionTokens, { ...this.#attributes, 'gen_ai.token.type': 'output' });
      this.#span.setAttributes({ 'gen_ai.usage.input_tokens': usage.promptTokens, 'gen_ai.usage.output_tokens': usage.completionTokens });
    }
    this.#span.setAttribute('gen_ai.response.finish_reasons', [finishReason]);
    this.#end(undefined);
  }

  failed(error: unknown): void {
    if (isAbortError(error)) {
      this.#end('cancelled');
      return;
    }
    const kind = AppError.isInstance(error) && typeof error.details?.reason === 'string' ? error.details.reason : 'unknown';
    this.#telemetry.upstreamErrors.add(1, { 'gen_ai.provider.name': this.#attributes['gen_ai.provider.name'], 'error.type': kind });
    // The AppError's message is written for the client: it names the provider and the kind, never a key.
    this.#span.setStatus({ code: SpanStatusCode.ERROR, message: AppError.isInstance(error) ? error.message : kind });
    this.#end(kind);
  }

  #end(errorType: string | undefined): void {
    if (this.#ended) {
      return;
    }
    this.#ended = true;
    const attributes = errorType ? { ...this.#attributes, 'error.type': errorType } : this.#attributes;
    this.#telemetry.providerDuration.record(this.#seconds(), attributes);
    if (errorType) {
      this.#span.setAttribute('error.type', errorType);
    }
    this.#span.end();
  }

  #seconds(): number {
    return (performance.now() - this.#started) / 1000;
  }
}
