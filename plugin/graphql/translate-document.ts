/**
 * Translates the spec's device dialect of GraphQL onto Medplum's: `ObservationCreate(resource: $input)` with
 * `$input: ObservationInput!` becomes `ObservationCreate(res: $input)` with `$input: ObservationCreate!`, and each
 * resource value gets the `resourceType` Medplum's resolver insists on. The work is done on the parsed AST (never
 * on the text), after fhirgate's bounds are checked; a document already in Medplum's dialect comes back as it was.
 *
 * Why `XCreate` also for updates: Medplum caches its input types by resource type only, so the schema has no
 * `ObservationUpdate` input type; `ObservationUpdate(id, res)` takes an `ObservationCreate!`.
 */
import { Kind, print, visit } from 'graphql';
import type { ArgumentNode, DocumentNode, NamedTypeNode, ObjectFieldNode, ObjectValueNode, OperationDefinitionNode, FragmentDefinitionNode, VariableDefinitionNode } from 'graphql';
import { AppError } from '../errors.ts';
import { checkDocumentLimits, DEFAULT_DOCUMENT_LIMITS, parseDocument, selectOperation, type DocumentLimits } from './document-limits.ts';
import { isJsonObject, variableValue, withVariable, type GraphqlRequest, type MedplumGraphqlRequest } from './graphql-request.ts';
import { collectRootFields, fragmentsOf, mutationOperations, namedTypeOf, parseResourceWrite } from './mutation-fields.ts';
import { DEFAULT_MAX_VALIDATED_DOCUMENTS, ValidatedDocuments } from './validated-documents.ts';

const SPEC_INPUT_SUFFIX = 'Input';

/** AST changes found by the analysis, applied in one `visit`. Keys are the original nodes. */
interface DocumentEdits {
  readonly resourceArguments: Set<ArgumentNode>;
  readonly resourceTypeFor: Map<ObjectValueNode, string>;
  readonly typeRenames: Map<NamedTypeNode, string>;
}

/** Checks the request against fhirgate's limits and returns it in Medplum's dialect. */
export function translateDocument(request: GraphqlRequest, limits: DocumentLimits = {}): MedplumGraphqlRequest {
  return applyTranslation(planTranslation(request.query, request.operationName, limits), request);
}

/**
 * {@link translateDocument} with each document's plan kept, by its text and operation name (least recently used
 * first out): what depends on the text alone (parsing, the limits, the edits) is done once per document, and each
 * request only completes its own variables. Devices send the same few documents, so this is the common case.
 */
export class DocumentTranslator {
  readonly #limits: DocumentLimits;
  readonly #plans: ValidatedDocuments<TranslationPlan>;

  constructor(limits: DocumentLimits = {}, maxDocuments: number = DEFAULT_MAX_VALIDATED_DOCUMENTS) {
    this.#limits = limits;
    this.#plans = new ValidatedDocuments(maxDocuments);
  }

  translate(request: GraphqlRequest): MedplumGraphqlRequest {
    // Length-prefixed, so no operation name and text can stand for another pair.
    const key = request.operationName === undefined ? `-${request.query}` : `${request.operationName.length}:${request.operationName}${request.query}`;
    let plan = this.#plans.get(key);
    if (!plan) {
      // Only documents within the limits are kept: a refused one is checked again (and refused) each time.
      plan = planTranslation(request.query, request.operationName, this.#limits);
      this.#plans.remember(key, plan);
    }
    return applyTranslation(plan, request);
  }
}

/** A variable that holds the resource of a write: its value gets the `resourceType` the write needs. */
interface ResourceVariable {
  readonly definition: VariableDefinitionNode;
  readonly resourceType: string;
}

/** What a document's text decides: the parsed document, its edits, and the document with them applied. */
interface TranslationPlan {
  readonly document: DocumentNode;
  readonly edits: DocumentEdits;
  readonly resourceVariables: readonly ResourceVariable[];
  readonly translated: { readonly document: DocumentNode; readonly query: string };
}

function planTranslation(query: string, operationName: string | undefined, limits: DocumentLimits): TranslationPlan {
  const document = parseDocument(query, limits.maxTokens ?? DEFAULT_DOCUMENT_LIMITS.maxTokens);
  selectOperation(document, operationName);
  checkDocumentLimits(document, limits);

  const edits: DocumentEdits = { resourceArguments: new Set(), resourceTypeFor: new Map(), typeRenames: new Map() };
  const resourceVariables: ResourceVariable[] = [];
  const fragments = fragmentsOf(document);
  for (const operation of mutationOperations(document)) {
    const variableUses = findResourceValues(operation, fragments, edits);
    resourceVariables.push(...planVariables(operation, variableUses, edits));
  }
  return { document, edits, resourceVariables, translated: withEdits(document, query, edits) };
}

/** The request in Medplum's dialect: the plan's document, and the request's own variables completed. */
function applyTranslation(plan: TranslationPlan, request: GraphqlRequest): MedplumGraphqlRequest {
  let variables: Readonly<Record<string, unknown>> = request.variables ?? {};
  // A resource variable the request leaves out takes its default value, which then needs the resourceType too.
  let defaultEdits: Map<ObjectValueNode, string> | undefined;
  for (const { definition, resourceType } of plan.resourceVariables) {
    const name = definition.variable.name.value;
    const value = variableValue(variables, name);
    if (isJsonObject(value) && !('resourceType' in value)) {
      variables = withVariable(variables, name, { resourceType, ...value });
    } else if (value === undefined && definition.defaultValue?.kind === Kind.OBJECT && !hasResourceTypeField(definition.defaultValue)) {
      defaultEdits ??= new Map();
      defaultEdits.set(definition.defaultValue, resourceType);
    }
  }
  const translated = defaultEdits
    ? withEdits(plan.document, request.query, { ...plan.edits, resourceTypeFor: new Map([...plan.edits.resourceTypeFor, ...defaultEdits]) })
    : plan.translated;
  return {
    query: translated.query,
    ...(request.operationName !== undefined ? { operationName: request.operationName } : {}),
    variables,
    document: translated.document,
  };
}

function withEdits(document: DocumentNode, query: string, edits: DocumentEdits): { readonly document: DocumentNode; readonly query: string } {
  const changed = edits.resourceArguments.size + edits.resourceTypeFor.size + edits.typeRenames.size > 0;
  if (!changed) {
    return { document, query };
  }
  const translated = applyEdits(document, edits);
  return { document: translated, query: print(translated) };
}

/**
 * Marks `resource:` arguments of `XCreate`/`XUpdate` root fields for renaming and inline values missing a
 * `resourceType`; returns, per variable used as such a value, the resource types it stands for.
 */
function findResourceValues(
  operation: OperationDefinitionNode,
  fragments: ReadonlyMap<string, FragmentDefinitionNode>,
  edits: DocumentEdits,
): Map<string, Set<string>> {
  const variableUses = new Map<string, Set<string>>();
  for (const { field } of collectRootFields(operation, fragments)) {
    const write = parseResourceWrite(field.name.value);
    if (!write) {
      continue;
    }
    const specArgument = field.arguments?.find((argument) => argument.name.value === 'resource');
    let valueArgument = field.arguments?.find((argument) => argument.name.value === 'res');
    if (specArgument && !valueArgument) {
      edits.resourceArguments.add(specArgument);
      valueArgument = specArgument;
    }
    const value = valueArgument?.value;
    if (value?.kind === Kind.OBJECT && !hasResourceTypeField(value)) {
      edits.resourceTypeFor.set(value, write.resourceType);
    } else if (value?.kind === Kind.VARIABLE) {
      const uses = variableUses.get(value.name.value) ?? new Set<string>();
      uses.add(write.resourceType);
      variableUses.set(value.name.value, uses);
    }
  }
  return variableUses;
}

/** Renames `XInput` variable types to `XCreate`; returns the variables whose values get a `resourceType`. */
function planVariables(operation: OperationDefinitionNode, variableUses: ReadonlyMap<string, ReadonlySet<string>>, edits: DocumentEdits): ResourceVariable[] {
  const planned: ResourceVariable[] = [];
  for (const definition of operation.variableDefinitions ?? []) {
    const name = definition.variable.name.value;
    const resourceTypes = variableUses.get(name);
    if (!resourceTypes) {
      continue;
    }
    const namedType = namedTypeOf(definition.type);
    if (namedType.name.value.endsWith(SPEC_INPUT_SUFFIX)) {
      const declared = namedType.name.value.slice(0, -SPEC_INPUT_SUFFIX.length);
      for (const resourceType of resourceTypes) {
        if (resourceType !== declared) {
          throw new AppError('invalid_request', `Variable "$${shorten(name)}" is the resource of a ${shorten(resourceType)} write but is declared as another type.`, {
            details: { graphqlCode: 'GRAPHQL_VALIDATION_FAILED' },
          });
        }
      }
      edits.typeRenames.set(namedType, `${declared}Create`);
    }
    if (resourceTypes.size !== 1) {
      continue; // one value cannot be two resource types; Medplum reports it
    }
    const [resourceType] = resourceTypes;
    planned.push({ definition, resourceType });
  }
  return planned;
}

function applyEdits(document: DocumentNode, edits: DocumentEdits): DocumentNode {
  return visit(document, {
    Argument(node) {
      return edits.resourceArguments.has(node) ? { ...node, name: { ...node.name, value: 'res' } } : undefined;
    },
    ObjectValue(node) {
      const resourceType = edits.resourceTypeFor.get(node);
      return resourceType ? { ...node, fields: [resourceTypeField(resourceType), ...node.fields] } : undefined;
    },
    NamedType(node) {
      const name = edits.typeRenames.get(node);
      return name ? { ...node, name: { ...node.name, value: name } } : undefined;
    },
  });
}

function hasResourceTypeField(value: ObjectValueNode): boolean {
  return value.fields.some((field) => field.name.value === 'resourceType');
}

function resourceTypeField(resourceType: string): ObjectFieldNode {
  return {
    kind: Kind.OBJECT_FIELD,
    name: { kind: Kind.NAME, value: 'resourceType' },
    value: { kind: Kind.STRING, value: resourceType },
  };
}

function shorten(name: string): string {
  return name.length > 64 ? `${name.slice(0, 64)}…` : name;
}
