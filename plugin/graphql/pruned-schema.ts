/**
 * A schema for one document: the part of Medplum's schema the document needs, rebuilt with fhirgate's graphql so
 * the document can run without Medplum's handler re-validating it against all ~30,000 types on every request.
 *
 * What it holds (see `collectSelections` for how the document is read):
 * - the root types with only the root fields the document selects, each with all its arguments and Medplum's
 *   resolver;
 * - each object type the selections reach, with only the fields selected on it anywhere in the document, again
 *   with their arguments and Medplum's resolvers (and Medplum's `isTypeOf`, if any);
 * - each union reached, with Medplum's `resolveType` and all its members: those the document looks into as
 *   above, the others as shared stand-ins (`SharedSchemaTypes.standInObjectType`), since Medplum may resolve to any;
 * - the input types of those arguments and of the variables, complete (shared, see `SharedSchemaTypes`).
 * Executing the document touches only these fields and types, each the same as in Medplum's schema, so the answer
 * is the same. Anything unexpected throws (`UnsupportedSchemaError` or graphql's own schema check), and the
 * caller keeps the document on Medplum's handler.
 */
import {
  GraphQLObjectType,
  GraphQLSchema,
  GraphQLUnionType,
  assertValidSchema,
  type DocumentNode,
  type GraphQLFieldConfig,
  type GraphQLNamedType,
  type GraphQLOutputType,
} from 'graphql';
import { collectSelections, type DocumentSelections } from './document-selections.ts';
import { UnsupportedSchemaError, kindOf, nameOf, requireDefined, unwrapForeignType, type ForeignSchema, type ForeignType } from './foreign-schema.ts';
import { isLeafKind, rebuildWrappers, sharedTypesOf, type SharedSchemaTypes } from './shared-schema-types.ts';

/** How a schema is pruned. */
export interface PruneOptions {
  /** Refuse (throw) a document that reaches a union type, instead of rebuilding the union with all its members. */
  readonly refuseUnions?: boolean;
}

/** The schema `document` runs on, pruned from `foreign`; throws when something does not fit. */
export function buildPrunedSchema(
  foreign: ForeignSchema,
  document: DocumentNode,
  shared: SharedSchemaTypes = sharedTypesOf(foreign),
  options: PruneOptions = {},
): GraphQLSchema {
  const selections = collectSelections(foreign, document);
  const types = new PrunedTypes(selections, shared, options);
  const mutationRoot = selections.hasMutation ? types.rootType(requireDefined(foreign.getMutationType(), 'the mutation root type')) : undefined;
  const schema = new GraphQLSchema({
    query: types.rootType(requireDefined(foreign.getQueryType(), 'the query root type')),
    ...(mutationRoot ? { mutation: mutationRoot } : {}),
    // Type conditions and variables name types by name: graphql looks them up in the schema when it executes.
    types: [
      ...[...selections.types.values()].map((selected) => types.namedOutputType(selected.type)),
      ...selections.variableTypes.map((variableType) => shared.inputType(variableType) as GraphQLNamedType),
    ],
  });
  // graphql checks a schema on its first execution; here, a schema it would refuse is never cached.
  assertValidSchema(schema);
  return schema;
}

/** The output types of one pruned schema, each built once. */
class PrunedTypes {
  readonly #selections: DocumentSelections;
  readonly #shared: SharedSchemaTypes;
  readonly #options: PruneOptions;
  readonly #built = new Map<string, GraphQLNamedType>();

  constructor(selections: DocumentSelections, shared: SharedSchemaTypes, options: PruneOptions) {
    this.#selections = selections;
    this.#shared = shared;
    this.#options = options;
  }

  /**
   * A root type. A schema must have a query root even when the document only mutates: then it gets one field of
   * Medplum's (its first), which no selection reaches.
   */
  rootType(foreign: ForeignType): GraphQLObjectType {
    const name = nameOf(foreign);
    const selected = this.#selections.types.get(name)?.fields;
    if (selected && selected.size > 0) {
      return this.namedOutputType(foreign) as GraphQLObjectType;
    }
    const first = requireDefined(Object.keys(foreign.getFields?.() ?? {})[0], `a field of ${name}`);
    const root = this.#objectType(foreign, new Set([first]));
    this.#built.set(name, root);
    return root;
  }

  /** The named output type for `foreign` in this schema. */
  namedOutputType(foreign: ForeignType): GraphQLNamedType {
    const name = nameOf(foreign);
    const known = this.#built.get(name);
    if (known) {
      return known;
    }
    const kind = kindOf(foreign);
    let built: GraphQLNamedType;
    if (isLeafKind(foreign)) {
      built = this.#shared.leafType(foreign);
    } else if (kind === 'GraphQLObjectType') {
      const fields = this.#selections.types.get(name)?.fields;
      // A type the document never looks into (only `__typename`, or a union member it does not name).
      built = fields && fields.size > 0 ? this.#objectType(foreign, fields) : this.#shared.standInObjectType(foreign);
    } else if (kind === 'GraphQLUnionType' && this.#options.refuseUnions) {
      throw new UnsupportedSchemaError(`${name} is a union`);
    } else if (kind === 'GraphQLUnionType') {
      built = new GraphQLUnionType({
        name,
        description: foreign.description,
        types: () => (foreign.getTypes?.() ?? []).map((member) => this.#objectMember(member, name)),
        // Medplum's resolver answers a type name, which names the same type here.
        ...(foreign.resolveType ? { resolveType: foreign.resolveType } : {}),
      });
    } else {
      throw new UnsupportedSchemaError(`${name} is a ${kind}`);
    }
    this.#built.set(name, built);
    return built;
  }

  #objectType(foreign: ForeignType, fieldNames: ReadonlySet<string>): GraphQLObjectType {
    const name = nameOf(foreign);
    if ((foreign.getInterfaces?.() ?? []).length > 0) {
      throw new UnsupportedSchemaError(`${name} implements interfaces`);
    }
    return new GraphQLObjectType({
      name,
      description: foreign.description,
      fields: () => {
        const foreignFields = foreign.getFields?.() ?? {};
        const fields: Record<string, GraphQLFieldConfig<unknown, unknown>> = {};
        for (const fieldName of fieldNames) {
          const field = requireDefined(foreignFields[fieldName], `field ${name}.${fieldName}`);
          fields[fieldName] = {
            type: rebuildWrappers(field.type, (named) => this.namedOutputType(named)) as GraphQLOutputType,
            args: this.#shared.argumentsOf(field.args),
            description: field.description,
            deprecationReason: field.deprecationReason,
            // Medplum's own resolver; a field without one uses graphql's default resolver in both copies.
            ...(field.resolve ? { resolve: field.resolve } : {}),
          };
        }
        return fields;
      },
      ...(foreign.isTypeOf ? { isTypeOf: foreign.isTypeOf } : {}),
    });
  }

  #objectMember(member: ForeignType, unionName: string): GraphQLObjectType {
    const built = this.namedOutputType(unwrapForeignType(member));
    if (!(built instanceof GraphQLObjectType)) {
      throw new UnsupportedSchemaError(`a member of ${unionName} is not an object type`);
    }
    return built;
  }
}
