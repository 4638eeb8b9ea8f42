/**
 * A bound on requests in flight that nobody has authenticated yet: a route that must read its body (or check a
 * password) to learn who calls (the device token exchange, OAuth's token endpoint, a sign-in) holds a place from
 * arrival until it has answered. When every place is taken the next such request is refused at once (429,
 * `Retry-After: 1`) instead of queueing work nobody vouched for. Routes that carry a bearer token never take one:
 * they check the token before they read a byte of the body.
 */
import type { RequestHandler, Response } from 'express';
import { AppError } from '../errors.ts';

/** Unauthenticated requests the plugin and the standalone host each let in at once, unless configured otherwise. */
export const DEFAULT_MAX_UNAUTHENTICATED_REQUESTS = 64;

/** The places of one server (or one plugin), shared by the routes that take them. */
export class UnauthenticatedRequests {
  readonly limit: number;
  #inFlight = 0;

  constructor(limit: number) {
    this.limit = limit;
  }

  /** Requests holding a place now. */
  get inFlight(): number {
    return this.#inFlight;
  }

  /** A place, or undefined when all are taken; giving it back more than once gives it back once. */
  tryEnter(): (() => void) | undefined {
    if (this.#inFlight >= this.limit) {
      return undefined;
    }
    this.#inFlight++;
    let held = true;
    return () => {
      if (held) {
        held = false;
        this.#inFlight--;
      }
    };
  }
}

/** The refusal when every place is taken: retryable, like any 429. */
export function tooManyUnauthenticatedRequests(): AppError {
  return new AppError('rate_limited', 'Too many unauthenticated requests are in progress on this server; retry shortly.', {
    isRetryable: true,
    retryAfterSeconds: 1,
    details: { limit: 'unauthenticated_requests' },
  });
}

/**
 * Middleware: the request holds a place until its response is sent or its connection closes; without a free
 * place it goes on as `tooManyUnauthenticatedRequests()` to the route's error handler, its body unread.
 */
export function holdUnauthenticatedPlace(places: UnauthenticatedRequests): RequestHandler {
  return (_request, response, next) => {
    const release = places.tryEnter();
    if (!release) {
      next(tooManyUnauthenticatedRequests());
      return;
    }
    releaseWhenDone(response, release);
    next();
  };
}

function releaseWhenDone(response: Response, release: () => void): void {
  response.once('finish', release);
  response.once('close', release);
}
