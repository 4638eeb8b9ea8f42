/**
 * The fast path of `/graphql`: Medplum's `$graphql`, minus re-validating a document it has already validated, and
 * minus Medplum's whole schema for the documents that do not need it. Medplum's handler validates every request
 * against its whole schema (~30,900 types, built at its first request: seconds, and ~500 MB) before running it,
 * which is nearly all of its cost for a small mutation. Here:
 *   1. a document seen for the first time that stays within the host's partial engine (the resource types devices
 *      write; `partial-schema.ts`) is pruned from that engine's schema, validated against its pruned schema and
 *      run on it; Medplum's whole schema is neither built nor read for it;
 *   2. any other document seen for the first time goes to Medplum's handler, which validates and runs it: that
 *      answer is Medplum's by definition. If it shows the document validated (no syntax or validation error), the
 *      document is kept (`ValidatedDocuments`, bounded) with a schema pruned from Medplum's (`buildPrunedSchema`);
 *   3. a kept document runs on its pruned schema, without validation, as Medplum's handler runs it after
 *      validating: Medplum's resolvers, the caller's repository, the same context, the same reader mode.
 * Medplum's handler keeps answering whatever this path is not sure to answer exactly as Medplum would: before
 * Medplum's schema could be read (or if it cannot be), introspection (Medplum's own rules and cache), documents
 * that fail to parse or validate (never kept: Medplum answers each time, in its own words), and valid documents
 * whose pruned schema could not be built (kept as such, so it is not tried again).
 *
 * Where the host runs Medplum's `$graphql` off its event loop (`HostFhirEngine.offThreadGraphql`), everything
 * step 2 and 3 would answer goes there instead, every time: Medplum's whole schema is then built and held there,
 * never in this thread, so no request here waits for its build (seconds, in one synchronous call) or its memory.
 */
import { allOk, isOk, normalizeOperationOutcome } from '@medplum/core';
import { RepositoryMode, makeSimpleRequest, type FhirRepository, type FhirRouter } from '@medplum/fhir-router';
import type { OperationOutcome, Reference, Resource } from '@medplum/fhirtypes';
import DataLoader from 'dataloader';
import { execute, parse, type DocumentNode, type GraphQLSchema } from 'graphql';
import type { OffThreadGraphql } from '../host.ts';
import { captureMedplumSchema } from './capture-medplum-schema.ts';
import type { ForeignSchema } from './foreign-schema.ts';
import { isPartialSchemaDocument, pruneFromPartialSchema, type PartialSchemaDocument } from './partial-schema.ts';
import { buildPrunedSchema } from './pruned-schema.ts';
import { ValidatedDocuments } from './validated-documents.ts';

/** A request in Medplum's dialect, as `executeGraphql` receives it. */
export interface FastGraphqlRequest {
  readonly query: string;
  readonly operationName?: string;
  readonly variables?: Readonly<Record<string, unknown>>;
}

/** What Medplum's `$graphql` answers: an outcome and, when it ran, the execution result. */
export type GraphqlEngineResponse = readonly [outcome: OperationOutcome, result?: unknown, ...options: unknown[]];

/** Options of the fast path; the defaults suit production. */
export interface FastGraphqlPathOptions {
  /** How many distinct valid documents are kept (256 by default). */
  readonly maxDocuments?: number;
  /** A router of the host's partial engine (`HostFhirEngine.createPartialRouter`), when it has one. */
  readonly partialRouter?: FhirRouter;
  /**
   * Told once, with the reason, when Medplum's schema cannot be read (every request then goes to Medplum's handler),
   * or the partial engine's cannot (new documents then go to Medplum's handler, which builds its whole schema).
   */
  readonly onUnavailable?: (reason: string) => void;
  /** Told once per document, with the reason, when a valid document stays with Medplum's handler. */
  readonly onUnsupportedDocument?: (reason: string) => void;
  /**
   * The host's `$graphql` off its event loop (`HostFhirEngine.offThreadGraphql`): when given, it answers every
   * document the partial engine does not, and Medplum's whole schema is never built or read in this thread.
   */
  readonly offThread?: OffThreadGraphql;
  /** Whether introspection is answered (Medplum's router option), for the off-thread engine; false by default. */
  readonly introspectionEnabled?: boolean;
}

/** A valid document: parsed, with its pruned schema, or without one when it stays with Medplum's handler. */
type KnownDocument = { readonly document: DocumentNode; readonly schema: GraphQLSchema } | { readonly schema: undefined };

// Medplum's own test for an introspection query (`isIntrospectionQuery` in its graphql handler).
const INTROSPECTION = /query IntrospectionQuery|__schema|__type(?!name)/;

/** Answers GraphQL requests as Medplum's `$graphql` does; see the file comment. */
export class FastGraphqlPath {
  readonly #router: FhirRouter;
  readonly #options: FastGraphqlPathOptions;
  readonly #documents: ValidatedDocuments<KnownDocument>;
  #foreignSchema: Promise<ForeignSchema | undefined> | undefined;
  #partialSchema: Promise<ForeignSchema | undefined> | undefined;

  constructor(router: FhirRouter, options: FastGraphqlPathOptions = {}) {
    this.#router = router;
    this.#options = options;
    this.#documents = new ValidatedDocuments(options.maxDocuments);
  }

  /** Reads Medplum's schema now (building it if needed); resolves to whether the fast path is available. */
  async prepare(): Promise<boolean> {
    this.#foreignSchema ??= this.#capture();
    return (await this.#foreignSchema) !== undefined;
  }

  /** Medplum's response to the request, from its handler or from the document's pruned schema. */
  async execute(repo: FhirRepository, request: FastGraphqlRequest): Promise<GraphqlEngineResponse> {
    const offThread = this.#options.offThread;
    if (INTROSPECTION.test(request.query)) {
      return offThread ? this.#offThread(offThread, repo, request) : this.#medplumHandler(repo, request);
    }
    const known = this.#documents.get(request.query);
    if (known) {
      return known.schema ? executeValidated(repo, request, known.document, known.schema) : this.#medplumHandler(repo, request);
    }
    const partial = await this.#fromPartialSchema(request.query);
    if (partial) {
      this.#documents.remember(request.query, partial);
      return executeValidated(repo, request, partial.document, partial.schema);
    }
    if (offThread) {
      return this.#offThread(offThread, repo, request);
    }
    this.#foreignSchema ??= this.#capture();
    const foreign = await this.#foreignSchema;
    const response = await this.#medplumHandler(repo, request);
    // An ok outcome: the handler parsed and validated the document (it answers a 400 outcome when either fails).
    if (foreign && isOk(response[0])) {
      this.#documents.remember(request.query, this.#prune(foreign, request.query));
    }
    return response;
  }

  /** How many documents are kept; for tests. */
  get keptDocuments(): number {
    return this.#documents.size;
  }

  #medplumHandler(repo: FhirRepository, request: FastGraphqlRequest): Promise<GraphqlEngineResponse> {
    const { query, operationName, variables } = request;
    return this.#router.handleRequest(makeSimpleRequest('POST', '$graphql', { query, operationName, variables }), repo);
  }

  #offThread(offThread: OffThreadGraphql, repo: FhirRepository, request: FastGraphqlRequest): Promise<GraphqlEngineResponse> {
    const { query, operationName, variables } = request;
    return offThread.handleRequest({ query, operationName, variables, introspectionEnabled: this.#options.introspectionEnabled === true }, repo);
  }

  #prune(foreign: ForeignSchema, query: string): KnownDocument {
    try {
      const document = parse(query);
      return { document, schema: buildPrunedSchema(foreign, document) };
    } catch (error) {
      this.#options.onUnsupportedDocument?.(error instanceof Error ? error.message : String(error));
      return { schema: undefined };
    }
  }

  async #fromPartialSchema(query: string): Promise<PartialSchemaDocument | undefined> {
    const partialRouter = this.#options.partialRouter;
    if (!partialRouter) {
      return undefined;
    }
    this.#partialSchema ??= this.#capturePartial(partialRouter);
    const partial = await this.#partialSchema;
    const pruned = partial ? pruneFromPartialSchema(partial, query) : undefined;
    return pruned && isPartialSchemaDocument(pruned) ? pruned : undefined;
  }

  async #capturePartial(partialRouter: FhirRouter): Promise<ForeignSchema | undefined> {
    // Never rejects: without it, documents go to Medplum's handler, as on a host without a partial engine.
    const partial = await captureMedplumSchema(partialRouter).catch(() => undefined);
    if (!partial) {
      this.#options.onUnavailable?.("the partial engine's GraphQL schema could not be read: new documents wait for Medplum's whole schema");
    }
    return partial;
  }

  async #capture(): Promise<ForeignSchema | undefined> {
    // Never rejects: a failure here must leave Medplum's handler answering, not fail every request.
    const foreign = await captureMedplumSchema(this.#router).catch(() => undefined);
    if (!foreign) {
      this.#options.onUnavailable?.("Medplum's GraphQL schema could not be read: every request is validated by Medplum");
    }
    return foreign;
  }
}

/** What Medplum's handler does once a document has validated: the same mode, context and execution. */
async function executeValidated(
  repo: FhirRepository,
  request: FastGraphqlRequest,
  document: DocumentNode,
  schema: GraphQLSchema,
): Promise<GraphqlEngineResponse> {
  const { query, operationName, variables } = request;
  // Medplum's own test: the text, not the operation (a query that merely mentions "mutation" is not a reader).
  if (!query.includes('mutation')) {
    repo.setMode(RepositoryMode.READER);
  }
  // Medplum's resolvers read references and ids through `dataLoader`: batched per tick, one read per reference.
  const dataLoader = new DataLoader<Reference, Resource, string>((references) => repo.readReferences(references), {
    cacheKeyFn: (reference) => reference.reference ?? '',
  });
  // `config` is the request's, which `makeSimpleRequest` leaves undefined for Medplum's handler too.
  const contextValue = { repo, config: undefined, dataLoader, searchCount: 0, searchDataLoaders: Object.create(null) as Record<string, unknown> };
  try {
    const result = await execute({ schema, document, contextValue, operationName, variableValues: variables });
    return [allOk, result];
  } catch (error) {
    // As FhirRouter.handleRequest turns a handler's throw into an outcome.
    return [normalizeOperationOutcome(error)];
  }
}
