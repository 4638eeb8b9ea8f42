/**
 * fhirgate: the plugin a Medplum server mounts. `createFhirgatePlugin(host, options)` returns an Express router
 * serving the spec's routes (`/v1/...`, `/account/api/token/device/`, `/graphql`); everything it needs from the
 * server comes through `host`. A Medplum server builds `host` from its own functions with
 * `fhirgate/hosts/medplum-server` (`mountFhirgate`); the plugin never imports a host.
 */
export { createFhirgatePlugin, type FhirgatePlugin } from './create-plugin.ts';
export type { CallerContext, FhirgateHost, HostFhirEngine, HostLogger, HostRedis } from './host.ts';
export { AppError, type AppErrorCode } from './errors.ts';
export type { FhirgateOptions, FhirgateOptionsInput } from './options.ts';
export { readProviderConfigFromEnvironment } from './llm/provider-config.ts';
export { FHIRGATE_VERSION } from './version.ts';
