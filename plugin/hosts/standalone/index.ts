/**
 * The standalone host as a library (`fhirgate/hosts/standalone`): what `main.ts` (the `fhirgate` command) is built
 * from, for embedding the host in another process, e.g. a consumer's own integration tests. A typical start:
 * `readStandaloneConfig` → `lockDataFolder` → `openStandaloneStore` → `createStandaloneHost` → `seedProject` → `listen`.
 */
export { createStandaloneHost, type StandaloneHost, type StandaloneHostOptions } from './create-standalone-host.ts';
export { readStandaloneConfig, type StandaloneConfig } from './standalone-config.ts';
export { openStandaloneStore, STORE_FILE_NAME, type StandaloneStore } from './open-store.ts';
export { lockDataFolder, type DataFolderLock } from './data-folder-lock.ts';
export { StartUpError } from './start-up-error.ts';
export { loadFhirDefinitions } from './fhir-definitions.ts';
export { DEMO_PROJECT_FIXTURE, readProjectFixture, seedProject, type SeededProject } from './seed.ts';
export { startLogin, type IssuedLogin, type StartLoginRequest } from './auth/logins.ts';
export { createJsonLogger, parseLogLevel, type LogLevel } from './logger.ts';
export { DEMO_MODEL_ID, startDemoProvider } from './demo-provider.ts';
export { DEMO_DEVICE, readDemoDeviceKey, readStandaloneDeviceAuth } from './demo-devices.ts';
