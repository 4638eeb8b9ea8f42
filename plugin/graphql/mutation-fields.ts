/**
 * Finding the root fields of a mutation in a parsed document: the translation renames their arguments and the
 * device guard checks them, and both must see every root field, including those inside inline fragments and
 * fragment spreads (`mutation { ...Writes }`), or a write could slip past.
 */
import { Kind, OperationTypeNode } from 'graphql';
import type { DocumentNode, FieldNode, FragmentDefinitionNode, NamedTypeNode, OperationDefinitionNode, SelectionNode, TypeNode } from 'graphql';

/** A root mutation field that writes a whole resource: `ObservationCreate` or `ObservationUpdate`. */
export interface ResourceWrite {
  readonly resourceType: string;
  readonly action: 'Create' | 'Update';
}

/** A root field of an operation, and whether it was reached through a fragment spread. */
export interface RootField {
  readonly field: FieldNode;
  readonly throughFragmentSpread: boolean;
}

const RESOURCE_WRITE = /^([A-Z][A-Za-z0-9]*)(Create|Update)$/;

/** The resource type and action of a Medplum write field name; undefined for any other field. */
export function parseResourceWrite(fieldName: string): ResourceWrite | undefined {
  const match = RESOURCE_WRITE.exec(fieldName);
  return match ? { resourceType: match[1], action: match[2] as ResourceWrite['action'] } : undefined;
}

/** The document's fragment definitions by name. */
export function fragmentsOf(document: DocumentNode): Map<string, FragmentDefinitionNode> {
  const fragments = new Map<string, FragmentDefinitionNode>();
  for (const definition of document.definitions) {
    if (definition.kind === Kind.FRAGMENT_DEFINITION) {
      fragments.set(definition.name.value, definition);
    }
  }
  return fragments;
}

/** The document's mutation operations. */
export function mutationOperations(document: DocumentNode): OperationDefinitionNode[] {
  return document.definitions.filter(
    (definition): definition is OperationDefinitionNode =>
      definition.kind === Kind.OPERATION_DEFINITION && definition.operation === OperationTypeNode.MUTATION,
  );
}

/** Every root field of the operation, looking through inline fragments and (once each) fragment spreads. */
export function collectRootFields(operation: OperationDefinitionNode, fragments: ReadonlyMap<string, FragmentDefinitionNode>): RootField[] {
  const found: RootField[] = [];
  const spread = new Set<string>();
  const walk = (selections: readonly SelectionNode[], throughFragmentSpread: boolean): void => {
    for (const selection of selections) {
      if (selection.kind === Kind.FIELD) {
        found.push({ field: selection, throughFragmentSpread });
      } else if (selection.kind === Kind.INLINE_FRAGMENT) {
        walk(selection.selectionSet.selections, throughFragmentSpread);
      } else {
        const fragment = fragments.get(selection.name.value);
        if (fragment && !spread.has(selection.name.value)) {
          spread.add(selection.name.value);
          walk(fragment.selectionSet.selections, true);
        }
      }
    }
  };
  walk(operation.selectionSet.selections, false);
  return found;
}

/** The named type inside `T`, `T!`, `[T]`, ... */
export function namedTypeOf(type: TypeNode): NamedTypeNode {
  return type.kind === Kind.NAMED_TYPE ? type : namedTypeOf(type.type);
}
