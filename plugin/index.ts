/**
 * fhirgate: the plugin a Medplum server mounts. `createFhirgatePlugin(host, options)` returns an Express router
 * serving the spec's routes (`/v1/...`, `/account/api/token/device/`, `/graphql`); everything it needs from the
 * server comes through `host`.
 */
import express, { type Router } from 'express';
import { AppError } from './errors.ts';
import type { FhirgateHost } from './host.ts';
import { createOpenAiErrorHandler } from './http/openai-error-response.ts';
import { parseFhirgateOptions, type FhirgateOptionsInput } from './options.ts';

export type { CallerContext, FhirgateHost, HostLogger } from './host.ts';
export { AppError, type AppErrorCode } from './errors.ts';
export type { FhirgateOptions, FhirgateOptionsInput } from './options.ts';

/** The mounted plugin: an Express router, plus a hook the server calls when it shuts down. */
export type FhirgatePlugin = Router & {
  /** Releases what the plugin holds (timers, connections); in-flight requests are the server's to drain. */
  close(): Promise<void>;
};

/** Creates the plugin router for a server; options are validated here, once. */
export function createFhirgatePlugin(host: FhirgateHost, optionsInput: FhirgateOptionsInput = {}): FhirgatePlugin {
  const options = parseFhirgateOptions(optionsInput);
  const router = express.Router();
  const v1 = express.Router();
  v1.use(express.json({ limit: options.maxBodyBytes }));
  // Chat routes mount here (POST /chat/completions, GET /models).
  v1.use((request, _response, next) => next(new AppError('not_found', `No route for ${request.method} /v1${request.path}.`)));
  v1.use(createOpenAiErrorHandler(host.logger));
  router.use('/v1', v1);
  return Object.assign(router, { close: async (): Promise<void> => undefined });
}
