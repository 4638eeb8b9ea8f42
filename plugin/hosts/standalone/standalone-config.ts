/**
 * Configuration of the standalone host, read once from the environment at start-up.
 */
import { join, resolve } from 'node:path';
import { z } from 'zod';
import { parseLogLevel, type LogLevel } from './logger.ts';
import { DEFAULT_CACHE_SIZE_MIB } from './store/schema.ts';
import { parsePriceList, type PricePerMillion } from '../../governance/model-prices.ts';
import { DEFAULT_PASSWORD_CHECK_LIMITS } from './auth/password-checks.ts';
import { DEFAULT_SIGN_IN_LIMITS, type SignInLimits } from './auth/sign-in-limits.ts';
import { parseAllowedOrigins, type AllowedOrigins } from './cors.ts';
import { parseTrustProxy, type TrustProxy } from './trust-proxy.ts';

/** The standalone host's settings. */
export interface StandaloneConfig {
  readonly port: number;
  /** Interface to bind; loopback unless told otherwise. */
  readonly hostname: string;
  /** Public base URL (token issuer); defaults to `http://localhost:<port>/`. */
  readonly baseUrl: string;
  /** Folder of the SQLite file (`fhirgate.sqlite`). */
  readonly dataDir: string;
  /** The reply journal's folder (the plugin's `replyJournalDir`): a disk of this instance's own; default `<dataDir>/journal`. */
  readonly journalDir: string;
  /**
   * This host is one of several instances sharing the data folder (data-folder-lock.ts); off: it holds the folder
   * alone. On needs `REDIS_URL` (the instances' shared limits and turns) and `FHIRGATE_BASE_URL` (their one issuer).
   */
  readonly sharedDataDir: boolean;
  readonly redisUrl?: string;
  /** Prefix of fhirgate's keys in Redis (the plugin's `redisKeyPrefix`; unset: its default). */
  readonly redisKeyPrefix: string | undefined;
  readonly logLevel: LogLevel;
  /** Load the demo project at start-up (default on). */
  readonly seedDemo: boolean;
  /** A JSON file with the spec's `device_auth` object. */
  readonly deviceAuthFile?: string;
  /** Serve `/metrics` in Prometheus's text format (default on), to a scraper with the bearer token. */
  readonly metrics: boolean;
  /** The `/metrics` bearer token; unset: one generated into `<data dir>/secrets/metrics-token`. */
  readonly metricsToken?: string;
  /** The key of de-identified turns' date shifts (`deIdentification.dateShiftKey`); unset: generated into `<data dir>/secrets/date-shift-key`. */
  readonly dateShiftKey?: string;
  /** Largest JSON body of `/fhir/R4` and `/admin` (unset: Medplum's default, 1 MiB). */
  readonly maxJsonBytes: number | undefined;
  /** Sign-ins, token requests and device token exchanges worked on at once before the caller is known (unset: 64). */
  readonly maxUnauthenticatedRequests: number | undefined;
  /** Password checks (scrypt, on libuv's thread pool) running at once; more wait a moment or get 429. */
  readonly maxConcurrentPasswordChecks: number;
  /** Failed sign-ins per source and per account in a window before a lockout (auth/sign-in-limits.ts). */
  readonly signInLimits: SignInLimits;
  /** On SIGTERM, how long chat turns in flight may run on before they are stopped (milliseconds). */
  readonly shutdownGraceMs: number;
  /** Build Medplum's whole GraphQL schema before listening (default off: when a request first needs it, if ever). */
  readonly graphqlWarmUp: boolean;
  /** How long a write waits for another process's lock on the SQLite file before it fails (milliseconds). */
  readonly storeBusyTimeoutMs: number;
  /** SQLite's page cache in the process (MiB). */
  readonly storeCacheMiB: number;
  /** Streams one caller may hold open at once (the plugin's `chatLimits.maxConcurrentStreams`; unset: its default). */
  readonly maxConcurrentStreams: number | undefined;
  /** Non-streaming turns one caller may have running at once (`chatLimits.maxConcurrentTurns`; unset: its default). */
  readonly maxConcurrentTurns: number | undefined;
  /** Turns prepared at once (the plugin's `chatLimits.maxPreparingTurns`; unset: its default). */
  readonly maxPreparingTurns: number | undefined;
  /** MCP requests one caller may make per minute (the plugin's `mcpLimits.requestsPerMinute`; unset: its default). */
  readonly mcpRequestsPerMinute: number | undefined;
  /** Non-streaming chat answers carry their FHIR repository operations (the plugin's `reportRepositoryOperations`). */
  readonly reportRepositoryOperations: boolean;
  /** Model prices for cost budgets and the usage report (the plugin's `governance.prices`). */
  readonly modelPrices: Readonly<Record<string, PricePerMillion>>;
  /** Origins of browser applications allowed to call the host's Medplum routes (`FHIRGATE_ALLOWED_ORIGINS`; default none). */
  readonly allowedOrigins: AllowedOrigins;
  /** The proxies whose `X-Forwarded-For` is believed (`FHIRGATE_TRUST_PROXY`; default `loopback`). */
  readonly trustProxy: TrustProxy;
}

const environmentSchema = z.object({
  PORT: z.coerce.number().int().min(0).max(65535).default(8103),
  HOST: z.string().min(1).default('127.0.0.1'),
  FHIRGATE_BASE_URL: z.url().optional(),
  FHIRGATE_DATA_DIR: z.string().min(1).default('./data'),
  FHIRGATE_SEED_DEMO: z.enum(['true', 'false']).default('true'),
  FHIRGATE_JOURNAL_DIR: z.string().min(1).optional(),
  FHIRGATE_SHARED_DATA_DIR: z.enum(['on', 'off']).default('off'),
  REDIS_URL: z.string().min(1).optional(),
  FHIRGATE_REDIS_KEY_PREFIX: z.string().min(1).max(100).optional(),
  LOG_LEVEL: z.string().optional(),
  FHIRGATE_DEVICE_AUTH: z.string().min(1).optional(),
  FHIRGATE_METRICS: z.enum(['on', 'off']).default('on'),
  FHIRGATE_METRICS_TOKEN: z.string().trim().min(16, 'at least 16 characters').optional(),
  FHIRGATE_DATE_SHIFT_KEY: z.string().trim().min(32, 'at least 32 characters').optional(),
  FHIRGATE_MAX_JSON_BYTES: z.coerce.number().int().min(1024).max(1024 * 1024 * 1024).optional(),
  FHIRGATE_MAX_UNAUTHENTICATED_REQUESTS: z.coerce.number().int().min(1).optional(),
  FHIRGATE_MAX_CONCURRENT_PASSWORD_CHECKS: z.coerce.number().int().min(1).max(64).default(DEFAULT_PASSWORD_CHECK_LIMITS.maxConcurrent),
  FHIRGATE_SIGN_IN_FAILURES_PER_SOURCE: z.coerce.number().int().min(1).default(DEFAULT_SIGN_IN_LIMITS.perSource),
  FHIRGATE_SIGN_IN_FAILURES_PER_ACCOUNT: z.coerce.number().int().min(1).default(DEFAULT_SIGN_IN_LIMITS.perAccount),
  FHIRGATE_SIGN_IN_FAILURE_WINDOW_SECONDS: z.coerce.number().int().min(1).max(86_400).default(DEFAULT_SIGN_IN_LIMITS.windowSeconds),
  FHIRGATE_SIGN_IN_LOCKOUT_SECONDS: z.coerce.number().int().min(1).max(86_400).default(DEFAULT_SIGN_IN_LIMITS.lockoutSeconds),
  FHIRGATE_SHUTDOWN_GRACE_MS: z.coerce.number().int().min(0).max(600_000).default(10_000),
  FHIRGATE_GRAPHQL_WARMUP: z.enum(['on', 'off']).default('off'),
  FHIRGATE_STORE_BUSY_TIMEOUT_MS: z.coerce.number().int().min(0).max(600_000).default(5000),
  FHIRGATE_STORE_CACHE_MB: z.coerce.number().int().min(1).max(65_536).default(DEFAULT_CACHE_SIZE_MIB),
  // Unset: the plugin's own defaults (options.ts) apply.
  FHIRGATE_MAX_CONCURRENT_STREAMS: z.coerce.number().int().min(1).optional(),
  FHIRGATE_MAX_CONCURRENT_TURNS: z.coerce.number().int().min(1).optional(),
  FHIRGATE_MAX_PREPARING_TURNS: z.coerce.number().int().min(1).optional(),
  FHIRGATE_MCP_REQUESTS_PER_MINUTE: z.coerce.number().int().min(1).optional(),
  FHIRGATE_REPORT_REPOSITORY_OPERATIONS: z.enum(['on', 'off']).default('off'),
  FHIRGATE_MODEL_PRICES: z.string().optional(),
  FHIRGATE_ALLOWED_ORIGINS: z.string().optional(),
  FHIRGATE_TRUST_PROXY: z.string().optional(),
});

/** Reads the configuration from environment variables; a wrong value stops start-up naming the variable. */
export function readStandaloneConfig(environment: NodeJS.ProcessEnv = process.env): StandaloneConfig {
  const parsed = environmentSchema.safeParse(environment);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((issue) => `${issue.path.join('.')}: ${issue.message}`);
    throw new Error(`Invalid configuration: ${problems.join('; ')}`);
  }
  const values = parsed.data;
  if (values.FHIRGATE_SHARED_DATA_DIR === 'on' && (!values.REDIS_URL || !values.FHIRGATE_BASE_URL)) {
    throw new Error(
      'Invalid configuration: FHIRGATE_SHARED_DATA_DIR=on needs REDIS_URL (the instances share their limits, budgets and turns there) ' +
        'and FHIRGATE_BASE_URL (the one public address, the issuer of every token, whichever instance signs it)'
    );
  }
  const baseUrl = values.FHIRGATE_BASE_URL ?? `http://localhost:${values.PORT}/`;
  return {
    port: values.PORT,
    hostname: values.HOST,
    baseUrl: baseUrl.endsWith('/') ? baseUrl : `${baseUrl}/`,
    dataDir: resolve(values.FHIRGATE_DATA_DIR),
    journalDir: resolve(values.FHIRGATE_JOURNAL_DIR ?? join(values.FHIRGATE_DATA_DIR, 'journal')),
    sharedDataDir: values.FHIRGATE_SHARED_DATA_DIR === 'on',
    redisUrl: values.REDIS_URL,
    redisKeyPrefix: values.FHIRGATE_REDIS_KEY_PREFIX,
    logLevel: parseLogLevel(values.LOG_LEVEL),
    seedDemo: values.FHIRGATE_SEED_DEMO === 'true',
    deviceAuthFile: values.FHIRGATE_DEVICE_AUTH ? resolve(values.FHIRGATE_DEVICE_AUTH) : undefined,
    metrics: values.FHIRGATE_METRICS === 'on',
    metricsToken: values.FHIRGATE_METRICS_TOKEN,
    dateShiftKey: values.FHIRGATE_DATE_SHIFT_KEY,
    maxJsonBytes: values.FHIRGATE_MAX_JSON_BYTES,
    maxUnauthenticatedRequests: values.FHIRGATE_MAX_UNAUTHENTICATED_REQUESTS,
    maxConcurrentPasswordChecks: values.FHIRGATE_MAX_CONCURRENT_PASSWORD_CHECKS,
    signInLimits: {
      perSource: values.FHIRGATE_SIGN_IN_FAILURES_PER_SOURCE,
      perAccount: values.FHIRGATE_SIGN_IN_FAILURES_PER_ACCOUNT,
      windowSeconds: values.FHIRGATE_SIGN_IN_FAILURE_WINDOW_SECONDS,
      lockoutSeconds: values.FHIRGATE_SIGN_IN_LOCKOUT_SECONDS,
    },
    shutdownGraceMs: values.FHIRGATE_SHUTDOWN_GRACE_MS,
    graphqlWarmUp: values.FHIRGATE_GRAPHQL_WARMUP === 'on',
    storeBusyTimeoutMs: values.FHIRGATE_STORE_BUSY_TIMEOUT_MS,
    storeCacheMiB: values.FHIRGATE_STORE_CACHE_MB,
    maxConcurrentStreams: values.FHIRGATE_MAX_CONCURRENT_STREAMS,
    maxConcurrentTurns: values.FHIRGATE_MAX_CONCURRENT_TURNS,
    maxPreparingTurns: values.FHIRGATE_MAX_PREPARING_TURNS,
    mcpRequestsPerMinute: values.FHIRGATE_MCP_REQUESTS_PER_MINUTE,
    reportRepositoryOperations: values.FHIRGATE_REPORT_REPOSITORY_OPERATIONS === 'on',
    modelPrices: readModelPrices(values.FHIRGATE_MODEL_PRICES),
    allowedOrigins: readAllowedOrigins(values.FHIRGATE_ALLOWED_ORIGINS),
    trustProxy: readTrustProxy(values.FHIRGATE_TRUST_PROXY),
  };
}

/** `FHIRGATE_MODEL_PRICES`: `provider/model=<input>/<output>, ...`, US dollars per 1M tokens. */
function readModelPrices(text: string | undefined): Record<string, PricePerMillion> {
  try {
    return parsePriceList(text ?? '', 'FHIRGATE_MODEL_PRICES');
  } catch (error) {
    throw new Error(`Invalid configuration: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
  }
}

/** `FHIRGATE_ALLOWED_ORIGINS`: `*`, or origins separated by commas (cors.ts). */
function readAllowedOrigins(text: string | undefined): AllowedOrigins {
  try {
    return parseAllowedOrigins(text, 'FHIRGATE_ALLOWED_ORIGINS');
  } catch (error) {
    throw new Error(`Invalid configuration: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
  }
}

/** `FHIRGATE_TRUST_PROXY`: `true`, `false`, a hop count, or addresses, CIDR ranges and proxy-addr's names (trust-proxy.ts). */
function readTrustProxy(text: string | undefined): TrustProxy {
  try {
    return parseTrustProxy(text);
  } catch (error) {
    throw new Error(`Invalid configuration: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
  }
}
