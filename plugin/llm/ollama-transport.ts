/**
 * The `fetch` fhirgate gives the ollama SDK. The SDK takes no per-request signal or timeout, keeps no response
 * headers on its errors, and silently skips (after printing it with console.warn) an NDJSON line that does not
 * parse. One client serves every request, so each call runs in an `OllamaRequestScope` (AsyncLocalStorage) that
 * carries its signal in and the response status and headers out. Streamed bodies are checked line by line: a
 * malformed line or an in-band error line is replaced by an error line with a fixed text, which ends the stream.
 */
import { AsyncLocalStorage } from 'node:async_hooks';

/** One call through the SDK: what the transport needs from it, and what it reports back. */
export interface OllamaRequestScope {
  /** Aborts the HTTP request (and the body being read). */
  readonly signal: AbortSignal;
  /** True for a streamed call: its NDJSON body is checked line by line. */
  readonly stream: boolean;
  /** Headers added to the call's request (the trace context). */
  readonly headers?: Readonly<Record<string, string>>;
  /** The response's status and headers, once they arrived. */
  response?: { readonly status: number; readonly headers: Headers };
}

/**
 * What the SDK throws (as `new Error(text)`) for a line the transport replaced: the transport turns a bad line into
 * an `{"error": ...}` line with one of these texts and ends the body there, so the lines before it still arrive in
 * order and the upstream text (model output, or the provider's own error text) goes no further.
 */
export const OLLAMA_MALFORMED_LINE = 'fhirgate: the Ollama stream has a line that is not a JSON object';
export const OLLAMA_STREAM_ERROR = 'fhirgate: the Ollama stream reported an error';

const scopes = new AsyncLocalStorage<OllamaRequestScope>();

/** Runs one SDK call with its scope; the transport reads it for every fetch the call makes. */
export function runInOllamaScope<T>(scope: OllamaRequestScope, call: () => Promise<T>): Promise<T> {
  return scopes.run(scope, call);
}

/** A fetch for `new Ollama({fetch})` that applies the current scope. */
export function createOllamaFetch(baseFetch: typeof fetch = fetch): typeof fetch {
  return async (input, init) => {
    const scope = scopes.getStore();
    if (scope === undefined) {
      return baseFetch(input, init);
    }
    const signal = init?.signal ? AbortSignal.any([init.signal, scope.signal]) : scope.signal;
    const headers = scope.headers ? withHeaders(init?.headers, scope.headers) : init?.headers;
    const response = await baseFetch(input, { ...init, signal, headers });
    scope.response = { status: response.status, headers: response.headers };
    if (!scope.stream || !response.ok || response.body === null) {
      return response;
    }
    return new Response(response.body.pipeThrough(createNdjsonCheck()), {
      status: response.status,
      statusText: response.statusText,
      headers: response.headers,
    });
  };
}

function withHeaders(base: ConstructorParameters<typeof Headers>[0], added: Readonly<Record<string, string>>): Headers {
  const headers = new Headers(base);
  for (const [name, value] of Object.entries(added)) {
    headers.set(name, value);
  }
  return headers;
}

/** Passes complete lines on; a line that is not a JSON object, or carries `error`, is replaced and ends the body. */
function createNdjsonCheck(): TransformStream<Uint8Array, Uint8Array> {
  const decoder = new TextDecoder();
  const encoder = new TextEncoder();
  let pending = '';
  let ended = false;
  const pass = (line: string, controller: TransformStreamDefaultController<Uint8Array>): void => {
    if (ended || line.trim() === '') {
      return;
    }
    const problem = findProblem(line);
    if (problem === undefined) {
      controller.enqueue(encoder.encode(`${line}\n`));
      return;
    }
    ended = true;
    controller.enqueue(encoder.encode(`${JSON.stringify({ error: problem })}\n`));
    // Closes what the SDK reads (after the lines queued so far) and cancels the upstream body.
    controller.terminate();
  };
  return new TransformStream({
    transform(chunk, controller) {
      pending += decoder.decode(chunk, { stream: true });
      const lines = pending.split('\n');
      pending = lines.pop() ?? '';
      for (const line of lines) {
        pass(line, controller);
      }
    },
    flush(controller) {
      pass(pending + decoder.decode(), controller);
    },
  });
}

function findProblem(line: string): string | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(line);
  } catch {
    return OLLAMA_MALFORMED_LINE;
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    return OLLAMA_MALFORMED_LINE;
  }
  return 'error' in parsed ? OLLAMA_STREAM_ERROR : undefined;
}
