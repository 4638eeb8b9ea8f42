/**
 * fhirgate's own bounds on a GraphQL document, checked before Medplum sees it. Medplum's max-depth and query-cost
 * rules only log, so without these a caller could send a document of any depth or breadth. Parsing is bounded by a
 * token count, depth and field counts expand fragments (memoised, so a fragment bomb costs linear time), and
 * introspection, subscriptions and ambiguous multi-operation documents are refused with a clear message.
 */
import { GraphQLError, Kind, OperationTypeNode, parse, visit, BREAK } from 'graphql';
import type { DocumentNode, FragmentDefinitionNode, OperationDefinitionNode, SelectionNode } from 'graphql';
import { AppError } from '../errors.ts';

/** Limits a document must stay within; each has a default. */
export interface DocumentLimits {
  /** Nesting of fields, counted as Medplum's `graphqlMaxDepth` counts it (a field without a selection is 0). */
  readonly maxDepth?: number;
  /** Fields (aliases included) in one operation, fragments expanded. */
  readonly maxFields?: number;
  /** Lexical tokens in the document; bounds the parser's work before anything else runs. */
  readonly maxTokens?: number;
  /** Allow `__schema` / `__type` (the Medplum router must then also be built with `introspectionEnabled`). */
  readonly allowIntrospection?: boolean;
}

/** The defaults: depth 12 as in Medplum, 100 fields, 5,000 tokens, no introspection. */
export const DEFAULT_DOCUMENT_LIMITS: Required<DocumentLimits> = {
  maxDepth: 12,
  maxFields: 100,
  maxTokens: 5000,
  allowIntrospection: false,
};

const MAX_MESSAGE_CHARS = 200;

/** Parses a document; a syntax error is an `invalid_request` with the position, never the whole input. */
export function parseDocument(query: string, maxTokens: number = DEFAULT_DOCUMENT_LIMITS.maxTokens): DocumentNode {
  try {
    return parse(query, { maxTokens });
  } catch (error) {
    const where = error instanceof GraphQLError && error.locations?.[0] ? ` at line ${error.locations[0].line}, column ${error.locations[0].column}` : '';
    const reason = error instanceof GraphQLError ? `: ${truncate(error.message)}` : '.';
    throw new AppError('invalid_request', `GraphQL syntax error${where}${reason}`, { cause: error, details: { graphqlCode: 'GRAPHQL_PARSE_FAILED' } });
  }
}

/** The operation Medplum will run; refuses subscriptions and documents where the choice is ambiguous. */
export function selectOperation(document: DocumentNode, operationName: string | undefined): OperationDefinitionNode {
  const operations = document.definitions.filter((definition) => definition.kind === Kind.OPERATION_DEFINITION);
  if (operations.some((operation) => operation.operation === OperationTypeNode.SUBSCRIPTION)) {
    throw invalidDocument('GraphQL subscriptions are not supported.');
  }
  if (operations.length === 0) {
    throw invalidDocument('The GraphQL document contains no operation.');
  }
  if (operationName === undefined) {
    if (operations.length > 1) {
      throw invalidDocument('The GraphQL document contains several operations: name the one to run in "operationName" (batching is not supported).');
    }
    return operations[0];
  }
  const selected = operations.find((operation) => operation.name?.value === operationName);
  if (!selected) {
    throw invalidDocument('The GraphQL document has no operation named in "operationName".');
  }
  return selected;
}

/** Throws an `invalid_request` when any operation of the document exceeds the limits. */
export function checkDocumentLimits(document: DocumentNode, limits: DocumentLimits = {}): void {
  const { maxDepth, maxFields, allowIntrospection } = { ...DEFAULT_DOCUMENT_LIMITS, ...limits };
  if (!allowIntrospection && usesIntrospection(document)) {
    throw invalidDocument('GraphQL introspection is disabled on this server.');
  }
  const fragments = new Map<string, FragmentDefinitionNode>();
  for (const definition of document.definitions) {
    if (definition.kind === Kind.FRAGMENT_DEFINITION) {
      fragments.set(definition.name.value, definition);
    }
  }
  const measurer = new SelectionMeasurer(fragments);
  for (const definition of document.definitions) {
    if (definition.kind !== Kind.OPERATION_DEFINITION) {
      continue;
    }
    const { depth, fields } = measurer.measure(definition.selectionSet.selections);
    if (depth > maxDepth) {
      throw invalidDocument(`The GraphQL operation is nested too deeply (depth ${depth}, at most ${maxDepth}).`);
    }
    if (fields > maxFields) {
      throw invalidDocument(`The GraphQL operation selects too many fields (${fields > 1e6 ? 'over a million' : fields}, at most ${maxFields}).`);
    }
  }
}

function usesIntrospection(document: DocumentNode): boolean {
  let found = false;
  visit(document, {
    Field(node) {
      if (node.name.value === '__schema' || node.name.value === '__type') {
        found = true;
        return BREAK;
      }
      return undefined;
    },
  });
  return found;
}

interface SelectionMetrics {
  readonly depth: number;
  readonly fields: number;
}

/** Depth and field count of selections, each fragment measured once. */
class SelectionMeasurer {
  readonly #fragments: ReadonlyMap<string, FragmentDefinitionNode>;
  readonly #measured = new Map<string, SelectionMetrics>();
  readonly #inProgress = new Set<string>();

  constructor(fragments: ReadonlyMap<string, FragmentDefinitionNode>) {
    this.#fragments = fragments;
  }

  measure(selections: readonly SelectionNode[]): SelectionMetrics {
    let depth = -1;
    let fields = 0;
    for (const selection of selections) {
      const metrics = this.#measureOne(selection);
      depth = Math.max(depth, metrics.depth);
      fields += metrics.fields;
    }
    return { depth, fields };
  }

  #measureOne(selection: SelectionNode): SelectionMetrics {
    switch (selection.kind) {
      case Kind.FIELD: {
        if (!selection.selectionSet) {
          return { depth: 0, fields: 1 };
        }
        const inner = this.measure(selection.selectionSet.selections);
        return { depth: inner.depth + 1, fields: inner.fields + 1 };
      }
      case Kind.INLINE_FRAGMENT:
        return this.measure(selection.selectionSet.selections);
      case Kind.FRAGMENT_SPREAD:
        return this.#measureFragment(selection.name.value);
    }
  }

  #measureFragment(name: string): SelectionMetrics {
    const known = this.#measured.get(name);
    if (known) {
      return known;
    }
    const fragment = this.#fragments.get(name);
    if (!fragment) {
      return { depth: -1, fields: 0 }; // Medplum's validation reports the unknown fragment
    }
    if (this.#inProgress.has(name)) {
      throw invalidDocument('The GraphQL document has a fragment that spreads itself.');
    }
    this.#inProgress.add(name);
    const metrics = this.measure(fragment.selectionSet.selections);
    this.#inProgress.delete(name);
    this.#measured.set(name, metrics);
    return metrics;
  }
}

function invalidDocument(message: string): AppError {
  return new AppError('invalid_request', message, { details: { graphqlCode: 'GRAPHQL_VALIDATION_FAILED' } });
}

function truncate(text: string): string {
  return text.length > MAX_MESSAGE_CHARS ? `${text.slice(0, MAX_MESSAGE_CHARS)}…` : text;
}
