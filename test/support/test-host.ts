/**
 * Starts a standalone host on a fresh SQLite file and a loopback port, for end-to-end tests; each test loads
 * its own project from the demo fixture (fresh ids), so tests never share records.
 */
import { createHash } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ProjectMembership } from '@medplum/fhirtypes';
import { startLogin } from '../../plugin/hosts/standalone/auth/logins.ts';
import { createStandaloneHost, type StandaloneHost, type StandaloneHostOptions } from '../../plugin/hosts/standalone/create-standalone-host.ts';
import { createJsonLogger } from '../../plugin/hosts/standalone/logger.ts';
import { openStandaloneStore, type StandaloneStore } from '../../plugin/hosts/standalone/open-store.ts';
import { readProjectFixture, seedProject, type SeededProject } from '../../plugin/hosts/standalone/seed.ts';
import type { FhirgateOptionsInput } from '../../plugin/options.ts';
import { loadFhirDefinitions } from '../../plugin/hosts/standalone/fhir-definitions.ts';
import type { Redis } from 'ioredis';
import type { HostLogger } from '../../plugin/host.ts';
import type { FhirRepository } from '@medplum/fhir-router';

/** A running test host. */
export interface TestHost {
  /** Base URL with a trailing slash, e.g. `http://127.0.0.1:40123/`. */
  readonly url: string;
  readonly dataDir: string;
  readonly store: StandaloneStore;
  readonly standalone: StandaloneHost;
  /** The project loaded before start-up when `pluginFor` was given. */
  readonly project?: SeededProject;
  /** Loads a project of the test's own from the demo fixture. */
  seedProject(): Promise<SeededProject>;
  /** Signs in a membership as the token command does and returns its access token. */
  accessTokenFor(membershipId: string): Promise<string>;
  /** Stops the server and closes the store; with `keepData` the SQLite file stays for a restart. */
  close(options?: { keepData?: boolean }): Promise<void>;
}

/** Options of a test host. */
export interface TestHostOptions {
  /** Reuse a data folder (to restart on the same SQLite file). */
  readonly dataDir?: string;
  readonly plugin?: FhirgateOptionsInput;
  /**
   * Plugin options that need a project (e.g. `device_auth.project_id`): the host loads one from the demo fixture
   * before the plugin is created and exposes it as `TestHost.project`. Used instead of `plugin`.
   */
  readonly pluginFor?: (project: SeededProject) => FhirgateOptionsInput;
  /** Redis shared by the host (rate limits). */
  readonly redis?: Redis;
  readonly accessTokenLifetimeSeconds?: number;
  /** Token issuer; all test hosts share `TEST_ISSUER` unless told otherwise. */
  readonly issuer?: string;
  /** Serve `/metrics` to `TEST_METRICS_TOKEN` (registers this test file's global meter provider). */
  readonly metrics?: boolean;
  /** Where the host logs; silent unless given. */
  readonly logger?: HostLogger;
  /** The host's own bounds on bodies, unauthenticated requests, password checks and failed sign-ins (its defaults otherwise). */
  readonly hostLimits?: Pick<StandaloneHostOptions, 'maxJsonBytes' | 'maxJsonDepth' | 'maxUnauthenticatedRequests' | 'passwordChecks' | 'signInLimits' | 'trustProxy'>;
  /**
   * Another instance of the same deployment: this host serves from that host's store and data folder (as instances
   * behind a load balancer share one database), with a plugin, a journal and turns of its own.
   */
  readonly sharesStoreWith?: TestHost;
  /** Wraps the store the host serves from (e.g. to inject write faults); seeding and reads in tests use the real one. */
  readonly wrapStore?: (store: StandaloneStore) => FhirRepository;
}

/** The bearer token of a test host's `/metrics`. */
export const TEST_METRICS_TOKEN = 'test-metrics-token-0123456789abcdef';

/** The issuer test hosts sign with, whatever port they listen on. */
export const TEST_ISSUER = 'http://localhost:8103/';

/** Starts a standalone host for a test. */
export async function startTestHost(options: TestHostOptions = {}): Promise<TestHost> {
  const shared = options.sharesStoreWith;
  const dataDir = shared?.dataDir ?? options.dataDir ?? (await mkdtemp(join(tmpdir(), 'fhirgate-test-')));
  const store = shared?.store ?? openStandaloneStore(dataDir);
  let project: SeededProject | undefined;
  if (options.pluginFor) {
    loadFhirDefinitions();
    project = await seedProject(store, await readProjectFixture(), { freshIds: true });
  }
  const standalone = await createStandaloneHost({
    store: options.wrapStore ? options.wrapStore(store) : store,
    baseUrl: options.issuer ?? TEST_ISSUER,
    logger: options.logger ?? createJsonLogger('silent'),
    metrics: options.metrics ? { bearerToken: TEST_METRICS_TOKEN } : undefined,
    plugin: withOwnRedisKeys(project && options.pluginFor ? options.pluginFor(project) : options.plugin, dataDir, options.redis),
    redis: options.redis,
    accessTokenLifetimeSeconds: options.accessTokenLifetimeSeconds,
    ...options.hostLimits,
  });
  const { url } = await standalone.listen(0);
  return {
    url,
    dataDir,
    store,
    standalone,
    project,
    seedProject: async () => seedProject(store, await readProjectFixture(), { freshIds: true }),
    accessTokenFor: async (membershipId) => {
      const membership = await store.readResource<ProjectMembership>('ProjectMembership', membershipId);
      const issued = await startLogin(store, standalone.tokens, { membership, authMethod: 'pre-authorized' });
      return issued.accessToken;
    },
    close: async (closeOptions = {}) => {
      await standalone.close();
      if (shared) {
        // The store and its folder are the other host's.
        return;
      }
      store.close();
      if (!closeOptions.keepData) {
        await rm(dataDir, { recursive: true, force: true });
      }
    },
  };
}

/** A host with Redis keeps its keys apart from every other test's (they share one Redis): per data directory. */
function withOwnRedisKeys(plugin: FhirgateOptionsInput | undefined, dataDir: string, redis: Redis | undefined): FhirgateOptionsInput | undefined {
  if (!redis || !plugin || plugin.redisKeyPrefix) {
    return plugin;
  }
  return { ...plugin, redisKeyPrefix: `fhirgate:test:${createHash('sha256').update(dataDir).digest('hex').slice(0, 16)}:` };
}
