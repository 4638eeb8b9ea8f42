/**
 * What a document needs of Medplum's schema: for each output type its selections reach (through fields, inline
 * fragments and fragment spreads, over every operation of the document), the fields selected on it anywhere,
 * merged; the types its type conditions name; and the types of its variables. `pruned-schema.ts` builds a schema
 * of exactly that, so the document runs on it as it runs on Medplum's whole schema.
 *
 * Documents come here validated by Medplum's handler, or not yet validated (tried against the partial engine's
 * schema, `partial-schema.ts`). Anything that does not fit (an unknown field or type, a selection on a leaf, a
 * directive other than `@skip`/`@include`, a subscription) throws `UnsupportedSchemaError`, and the document stays
 * with Medplum's handler, which answers it in its own words.
 */
import { Kind, visit, type DocumentNode, type FragmentDefinitionNode, type SelectionSetNode } from 'graphql';
import {
  UnsupportedSchemaError,
  kindOf,
  nameOf,
  requireDefined,
  unwrapForeignType,
  type ForeignSchema,
  type ForeignType,
} from './foreign-schema.ts';
import { isLeafKind } from './shared-schema-types.ts';

/** An output type the document looks into, and the fields it selects on it (`__typename` aside). */
export interface SelectedType {
  readonly type: ForeignType;
  readonly fields: ReadonlySet<string>;
}

/** What a document needs of the foreign schema. */
export interface DocumentSelections {
  /** By type name: the roots of its operations, every type its selections reach or its type conditions name. */
  readonly types: ReadonlyMap<string, SelectedType>;
  /** The named types of its variables. */
  readonly variableTypes: readonly ForeignType[];
  /** Whether it has a mutation operation (it always needs the query root: a schema must have one). */
  readonly hasMutation: boolean;
}

// graphql's executable directives that change execution; Medplum declares no others that a query may use.
const EXECUTION_DIRECTIVES: ReadonlySet<string> = new Set(['skip', 'include']);

/** Collects what `document` needs of `schema`; throws `UnsupportedSchemaError` on anything unexpected. */
export function collectSelections(schema: ForeignSchema, document: DocumentNode): DocumentSelections {
  refuseOtherDirectives(document);
  const collector = new SelectionCollector(schema, document);
  let hasMutation = false;
  const variableTypes: ForeignType[] = [];
  for (const definition of document.definitions) {
    if (definition.kind !== Kind.OPERATION_DEFINITION) {
      continue; // fragments are walked where they are spread
    }
    if (definition.operation === 'subscription') {
      throw new UnsupportedSchemaError('a subscription');
    }
    hasMutation ||= definition.operation === 'mutation';
    const root = definition.operation === 'mutation' ? schema.getMutationType() : schema.getQueryType();
    collector.walk(requireDefined(root, `the ${definition.operation} root type`), definition.selectionSet);
    for (const variable of definition.variableDefinitions ?? []) {
      let type = variable.type;
      while (type.kind !== Kind.NAMED_TYPE) {
        type = type.type;
      }
      variableTypes.push(collector.namedType(type.name.value));
    }
  }
  return { types: collector.types, variableTypes, hasMutation };
}

class SelectionCollector {
  readonly types = new Map<string, { readonly type: ForeignType; readonly fields: Set<string> }>();
  readonly #schema: ForeignSchema;
  readonly #fragments = new Map<string, FragmentDefinitionNode>();
  readonly #walkedFragments = new Set<string>();

  constructor(schema: ForeignSchema, document: DocumentNode) {
    this.#schema = schema;
    for (const definition of document.definitions) {
      if (definition.kind === Kind.FRAGMENT_DEFINITION) {
        this.#fragments.set(definition.name.value, definition);
      }
    }
  }

  namedType(name: string): ForeignType {
    return requireDefined(this.#schema.getType(name), `type ${name}`);
  }

  walk(parent: ForeignType, selectionSet: SelectionSetNode): void {
    const parentName = nameOf(parent);
    let selected = this.types.get(parentName);
    if (!selected) {
      selected = { type: parent, fields: new Set() };
      this.types.set(parentName, selected);
    }
    for (const selection of selectionSet.selections) {
      switch (selection.kind) {
        case Kind.FIELD: {
          const fieldName = selection.name.value;
          if (fieldName === '__typename') {
            continue; // graphql answers it on any type; it is no field of the type
          }
          if (kindOf(parent) !== 'GraphQLObjectType') {
            throw new UnsupportedSchemaError(`field ${fieldName} on ${parentName}, a ${kindOf(parent)}`);
          }
          const field = requireDefined(parent.getFields?.()[fieldName], `field ${parentName}.${fieldName}`);
          selected.fields.add(fieldName);
          const fieldType = unwrapForeignType(field.type);
          if (isLeafKind(fieldType) !== !selection.selectionSet) {
            throw new UnsupportedSchemaError(`selection of ${parentName}.${fieldName}`);
          }
          if (selection.selectionSet) {
            this.walk(fieldType, selection.selectionSet);
          }
          break;
        }
        case Kind.INLINE_FRAGMENT:
          this.walk(selection.typeCondition ? this.namedType(selection.typeCondition.name.value) : parent, selection.selectionSet);
          break;
        case Kind.FRAGMENT_SPREAD: {
          // A fragment's selections depend only on its own type condition: walking it once covers every spread.
          const name = selection.name.value;
          if (!this.#walkedFragments.has(name)) {
            this.#walkedFragments.add(name);
            const fragment = requireDefined(this.#fragments.get(name), `fragment ${name}`);
            this.walk(this.namedType(fragment.typeCondition.name.value), fragment.selectionSet);
          }
          break;
        }
      }
    }
  }
}

function refuseOtherDirectives(document: DocumentNode): void {
  visit(document, {
    Directive(node) {
      if (!EXECUTION_DIRECTIVES.has(node.name.value)) {
        throw new UnsupportedSchemaError(`directive @${node.name.value}`);
      }
    },
  });
}
