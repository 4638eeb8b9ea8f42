/**
 * The messages between the standalone host and its GraphQL worker (`graphql-worker.ts`, driven by
 * `off-thread-graphql.ts`), and how what cannot cross a thread as it is crosses it: errors. A structured clone keeps
 * an Error's message but drops its other fields, and the two threads run different copies of `@medplum/core`, so a
 * Medplum refusal travels as its OperationOutcome and is thrown again on the other side as that side's
 * `OperationOutcomeError`; a GraphQL error travels as the fields graphql's own `toJSON` gives, plus the outcome of
 * its original error, which is what fhirgate reads of it (`graphql/execute-graphql.ts`).
 */
import type { OperationOutcome } from '@medplum/fhirtypes';
import { outcomeOf } from '../../medplum-errors.ts';

/** The repository methods Medplum's GraphQL resolvers call; the host serves no others. */
export const FORWARDED_REPOSITORY_METHODS = [
  'createResource',
  'readResource',
  'readReference',
  'readReferences',
  'updateResource',
  'deleteResource',
  'patchResource',
  'search',
  'searchByReference',
] as const;

/** A repository method the worker may ask the host to call. */
export type ForwardedRepositoryMethod = (typeof FORWARDED_REPOSITORY_METHODS)[number];

/** An error as it crosses: its message, and a Medplum refusal's outcome. */
export interface SerializedError {
  readonly message: string;
  readonly outcome?: OperationOutcome;
}

/** One entry of `readReferences`'s answer: a resource, or why it could not be read. */
export type SerializedReadResult = { readonly resource: unknown } | { readonly error: SerializedError };

/** A GraphQL error as it crosses. */
export interface SerializedGraphqlError {
  readonly message: string;
  readonly locations?: readonly { readonly line: number; readonly column: number }[];
  readonly path?: readonly (string | number)[];
  readonly extensions?: Readonly<Record<string, unknown>>;
  /** Whether graphql wrapped an error of a resolver (or of the engine); its outcome when that was a Medplum refusal. */
  readonly original?: { readonly outcome?: OperationOutcome };
}

/** An execution result (`{ data?, errors? }`) as it crosses. */
export interface SerializedResult {
  readonly hasData: boolean;
  readonly data?: unknown;
  readonly errors?: readonly SerializedGraphqlError[];
  /** Any other answer of Medplum's handler (none known), as it is. */
  readonly other?: unknown;
}

/** Host → worker. */
export type ToWorker =
  | {
      readonly kind: 'request';
      readonly id: number;
      readonly query: string;
      readonly operationName?: string;
      readonly variables?: Readonly<Record<string, unknown>>;
      readonly introspectionEnabled: boolean;
    }
  | { readonly kind: 'reply'; readonly callId: number; readonly value?: unknown; readonly error?: SerializedError };

/** Worker → host. */
export type FromWorker =
  | { readonly kind: 'call'; readonly id: number; readonly callId: number; readonly method: ForwardedRepositoryMethod; readonly args: readonly unknown[] }
  | { readonly kind: 'set-mode'; readonly id: number; readonly mode: string }
  | { readonly kind: 'response'; readonly id: number; readonly outcome: OperationOutcome; readonly result?: SerializedResult }
  | { readonly kind: 'failed'; readonly id: number; readonly error: SerializedError };

/** `error` as it crosses. The message stays inside the process: fhirgate never repeats a server fault's text. */
export function serializeError(error: unknown): SerializedError {
  const outcome = outcomeOf(error);
  return { message: error instanceof Error ? error.message : String(error), ...(outcome ? { outcome } : {}) };
}

/** A GraphQL error of the other side, with what fhirgate and graphql's `toJSON` read of it. */
export class OffThreadGraphqlError extends Error {
  readonly locations: SerializedGraphqlError['locations'];
  readonly path: SerializedGraphqlError['path'];
  readonly extensions: SerializedGraphqlError['extensions'];
  /** As graphql's `GraphQLError.originalError`: a Medplum refusal carries its `outcome`. */
  readonly originalError: { readonly outcome?: OperationOutcome } | undefined;

  constructor(serialized: SerializedGraphqlError) {
    super(serialized.message);
    this.name = 'GraphQLError';
    this.locations = serialized.locations;
    this.path = serialized.path;
    this.extensions = serialized.extensions;
    this.originalError = serialized.original;
  }

  /** What graphql's `GraphQLError.toJSON` gives: the error as a GraphQL response carries it. */
  toJSON(): Record<string, unknown> {
    return {
      message: this.message,
      ...(this.locations ? { locations: this.locations } : {}),
      ...(this.path ? { path: this.path } : {}),
      ...(this.extensions && Object.keys(this.extensions).length > 0 ? { extensions: this.extensions } : {}),
    };
  }
}

/** An execution result of the worker, as the host's side reads it. */
export function deserializeResult(serialized: SerializedResult | undefined): unknown {
  if (!serialized) {
    return undefined;
  }
  if (serialized.other !== undefined) {
    return serialized.other;
  }
  return {
    ...(serialized.errors ? { errors: serialized.errors.map((error) => new OffThreadGraphqlError(error)) } : {}),
    ...(serialized.hasData ? { data: serialized.data } : {}),
  };
}
