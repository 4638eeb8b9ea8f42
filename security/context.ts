/** What every attack module gets: the host, two projects with their callers, and ways to see side effects. */
import type { LlmEmulator } from '../test/emulator/index.ts';
import type { SeededProject } from '../plugin/hosts/standalone/seed.ts';
import type { TestHost } from '../test/support/test-host.ts';
import type { SigningKeys } from '../plugin/hosts/standalone/auth/signing-keys.ts';
import type { AttackLog } from './suite.ts';

/** The default model (`openai/gpt-4o-mini`) is cleared for patient data; this one of the same provider is not. */
export const UNCLEARED_MODEL = 'gpt-4o-uncleared';

/**
 * A provider of kind `openai-compatible` (as a LiteLLM proxy or vLLM would be), answered by the emulator, with
 * fhirgate's default retries: the model its attacks call, and how many times fhirgate retries a failed call to it.
 */
export const GATEWAY = { provider: 'litellm', model: 'gpt-4o', maxRetries: 2 } as const;

export interface SecurityContext {
  readonly host: TestHost;
  readonly emulator: LlmEmulator;
  readonly log: AttackLog;
  /** Project A: the attacker's own, with a practitioner and a device. */
  readonly projectA: SeededProject;
  /** Project B: the victim's. */
  readonly projectB: SeededProject;
  /** A valid access token of project A's practitioner. */
  readonly tokenA: string;
  /** A valid access token of project B's practitioner. */
  readonly tokenB: string;
  /** A valid device token of project A's demo device. */
  readonly deviceTokenA: string;
  /** The host's token signing keys: to forge tokens that differ from a real one in one claim only. */
  readonly hostKeys: SigningKeys;
  /** Secrets that must never appear in a log line. */
  readonly secrets: readonly string[];
  /** Communications in the store, all projects. */
  storedCommunications(): Promise<number>;
  /** Chat requests the provider has received so far. */
  providerCalls(): number;
  /** POST /v1/chat/completions with a bearer token (or none) and a raw or JSON body. */
  chat(token: string | undefined, body: unknown, headers?: Record<string, string>): Promise<Response>;
}
