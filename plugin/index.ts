/**
 * fhirgate: the plugin a Medplum server mounts. `createFhirgatePlugin(host, options)` returns an Express router
 * serving the spec's routes (`/v1/...`, `/account/api/token/device/`, `/graphql`); everything it needs from the
 * server comes through `host`.
 */
import express, { type Router } from 'express';
import { AgentDevices } from './chat/agent-device.ts';
import type { ChatServices } from './chat/chat-completion.ts';
import { createChatRoutes } from './chat/chat-routes.ts';
import { AppError } from './errors.ts';
import { createDeviceServices } from './devices/device-services.ts';
import { createDeviceTokenRoute } from './devices/device-token-route.ts';
import { createGraphqlRoute } from './graphql/graphql-route.ts';
import { createModelRegistry } from './llm/model-registry.ts';
import type { FhirgateHost } from './host.ts';
import { createOpenAiErrorHandler } from './http/openai-error-response.ts';
import { parseFhirgateOptions, type FhirgateOptionsInput } from './options.ts';

export type { CallerContext, FhirgateHost, HostLogger } from './host.ts';
export { AppError, type AppErrorCode } from './errors.ts';
export type { FhirgateOptions, FhirgateOptionsInput } from './options.ts';
export { createMedplumServerHost, mountFhirgate, type MedplumServerFunctions } from './hosts/medplum-server.ts';
export { readProviderConfigFromEnvironment } from './llm/provider-config.ts';

// A device token request is two short strings.
const DEVICE_TOKEN_BODY_LIMIT = 16 * 1024;

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
  if (options.llm) {
    const chat: ChatServices = {
      host,
      models: createModelRegistry(options.llm),
      agents: new AgentDevices((projectId) => host.getSystemRepo(projectId), options.agentDeviceName),
      categorySystem: options.categorySystem,
      history: options.history,
      defaultMaxTokens: options.llm.maxTokens,
    };
    v1.use(createChatRoutes(chat, options.operatorName));
  } else {
    v1.use(['/chat/completions', '/models'], (_request, _response, next) =>
      next(new AppError('not_configured', 'No LLM provider is configured on this server.'))
    );
  }
  v1.use((request, _response, next) => next(new AppError('not_found', `No route for ${request.method} /v1${request.path}.`)));
  v1.use(createOpenAiErrorHandler(host.logger));
  router.use('/v1', v1);

  const devices = options.device_auth ? createDeviceServices(host, options.device_auth) : undefined;
  const deviceToken = express.Router();
  deviceToken.use(express.json({ limit: DEVICE_TOKEN_BODY_LIMIT }));
  if (devices) {
    deviceToken.use(createDeviceTokenRoute(devices, host.logger));
  } else {
    deviceToken.post('/', (_request, _response, next) => next(new AppError('not_configured', 'Device authentication is not configured on this server.')));
  }
  deviceToken.use(createOpenAiErrorHandler(host.logger));
  router.use('/account/api/token/device', deviceToken);
  router.use(createGraphqlRoute({ host, devices, limits: { allowIntrospection: options.graphql.introspection }, maxBodyBytes: options.maxBodyBytes }));
  return Object.assign(router, { close: async (): Promise<void> => undefined });
}
