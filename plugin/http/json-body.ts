/**
 * Reading a request body within bounds: Express's own parsers (body-parser) with a size limit, then a bound on how
 * deeply the JSON nests. Every failure leaves as an AppError (400 or 413) for the surface's own error handler to
 * render; none carries the body or the parser's message, which can quote it (a client secret, a prompt).
 */
import express, { type RequestHandler } from 'express';
import { AppError } from '../errors.ts';

/** The bounds of one route's body. */
export interface BodyLimits {
  /** Largest body read, in bytes; a larger one is refused (413), from its Content-Length before it is read. */
  readonly maxBytes: number;
  /** Most arrays and objects nested in one another (400 beyond). */
  readonly maxDepth: number;
  /** Content types parsed as JSON (default `application/json`); other bodies are left unread. */
  readonly type?: string | readonly string[];
  /**
   * Every body is read as JSON, whatever Content-Type it declares, as OpenAI's API does: `curl -d '{...}'` without
   * `-H 'Content-Type: application/json'` declares `application/x-www-form-urlencoded`. For routes whose credentials
   * are a header (a bearer token) or the body itself, never a cookie a browser would add to another site's form post.
   */
  readonly anyContentType?: boolean;
  /**
   * Whether only an object or an array is taken at the top (body-parser's `strict`, the default); `false` parses any
   * JSON value, for a route that then says itself what it takes (a string is valid JSON, just not what it wants).
   */
  readonly strict?: boolean;
}

/** Nesting the plugin's and the standalone host's routes accept unless configured otherwise. */
export const DEFAULT_MAX_JSON_DEPTH = 64;

/** Parses a JSON body within `limits`, into `request.body`. */
export function readJsonBody(limits: BodyLimits): RequestHandler {
  const type = limits.type === undefined ? 'application/json' : typeof limits.type === 'string' ? limits.type : [...limits.type];
  // body-parser asks `type` only of a request that has a body.
  const parse = express.json({ limit: limits.maxBytes, type: limits.anyContentType ? () => true : type, strict: limits.strict ?? true });
  return (request, response, next) => {
    parse(request, response, (error?: unknown) => {
      if (error !== undefined) {
        next(fromBodyParserError(error) ?? error);
        return;
      }
      if (isNestedDeeperThan(request.body, limits.maxDepth)) {
        next(tooDeep(limits.maxDepth));
        return;
      }
      next();
    });
  };
}

/** Parses a form body (`application/x-www-form-urlencoded`, flat: no nested keys) within `maxBytes`. */
export function readFormBody(maxBytes: number): RequestHandler {
  const parse = express.urlencoded({ extended: false, limit: maxBytes });
  return (request, response, next) => {
    parse(request, response, (error?: unknown) => next(error === undefined ? undefined : (fromBodyParserError(error) ?? error)));
  };
}

/** The error of a body nested deeper than `maxDepth`. */
export function tooDeep(maxDepth: number): AppError {
  return new AppError('invalid_request', `The request body nests arrays and objects more than ${maxDepth} levels deep.`, {
    details: { limit: 'json_depth', maxDepth },
  });
}

/**
 * True when `value` nests arrays and objects more than `maxDepth` levels (`{}` is one level, `[[1]]` two). Walked
 * with a stack of its own, not recursion: a body nested a million levels deep must not overflow the call stack.
 */
export function isNestedDeeperThan(value: unknown, maxDepth: number): boolean {
  const nodes: unknown[] = [value];
  const depths: number[] = [1];
  while (nodes.length > 0) {
    const node = nodes.pop();
    const depth = depths.pop() ?? 1;
    if (typeof node !== 'object' || node === null) {
      continue;
    }
    if (depth > maxDepth) {
      return true;
    }
    for (const child of Array.isArray(node) ? node : Object.values(node)) {
      if (typeof child === 'object' && child !== null) {
        nodes.push(child);
        depths.push(depth + 1);
      }
    }
  }
  return false;
}

// The errors of bodies that are not JSON at all, for surfaces whose error shape tells them apart (JSON-RPC's parse error).
const notJsonErrors = new WeakSet<object>();

/** Whether `error` is the refusal of a body that is not valid JSON. */
export function isNotJsonError(error: unknown): boolean {
  return typeof error === 'object' && error !== null && notJsonErrors.has(error);
}

/**
 * Maps an error of Express's body parser (body-parser, its `type` names it) onto an AppError; undefined for
 * anything else. The parser's error is not kept as the cause: it holds the raw body.
 */
export function fromBodyParserError(thrown: unknown): AppError | undefined {
  if (typeof thrown !== 'object' || thrown === null || !('type' in thrown)) {
    return undefined;
  }
  const { type, status } = thrown as { type: unknown; status?: unknown };
  switch (type) {
    case 'entity.too.large':
    case 'parameters.too.many':
      return new AppError('payload_too_large', 'The request body is larger than this server accepts.');
    case 'entity.parse.failed': {
      // body-parser's strict mode refuses a valid JSON value that is not an object or an array with the same type.
      const kind = topLevelKind((thrown as { body?: unknown }).body);
      if (kind !== undefined) {
        return new AppError('invalid_request', `The request body must be a JSON object, not ${kind}.`);
      }
      const error = new AppError('invalid_request', 'The request body is not valid JSON.');
      notJsonErrors.add(error);
      return error;
    }
    case 'encoding.unsupported':
    case 'charset.unsupported':
      return new AppError('invalid_request', 'The request body encoding is not supported.');
    default:
      // The rest (a body shorter than its Content-Length, a client that left mid-body, ...) are the client's.
      return typeof type === 'string' && typeof status === 'number' && status >= 400 && status < 500
        ? new AppError('invalid_request', 'The request body could not be read.')
        : undefined;
  }
}

/** What a body that is valid JSON but neither an object nor an array holds (`null`, `a string`, ...); else undefined. */
function topLevelKind(body: unknown): string | undefined {
  if (typeof body !== 'string' || /^\s*[[{]/.test(body)) {
    return undefined;
  }
  let value: unknown;
  try {
    value = JSON.parse(body);
  } catch {
    return undefined;
  }
  return value === null ? 'null' : typeof value === 'object' ? undefined : `a ${typeof value}`;
}
