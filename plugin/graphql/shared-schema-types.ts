/**
 * The parts of Medplum's schema that every pruned schema may share, rebuilt with fhirgate's graphql once per
 * process: input types, enums and scalars (complete, since variable and argument coercion walk every field of an
 * input type), and the stand-ins for union members a document never looks into. A graphql-js type can belong to
 * several schemas, and names are unique across Medplum's schema, so sharing changes no answer; it keeps each
 * pruned schema down to the output types its document selects. The cache only grows with what documents use:
 * an `ObservationCreate` pulls in 45 of Medplum's ~720 input types, and never its ~29,000 reverse-lookup enums
 * except the few a document's selected fields take as arguments.
 */
import {
  GraphQLEnumType,
  GraphQLInputObjectType,
  GraphQLList,
  GraphQLNonNull,
  GraphQLObjectType,
  specifiedScalarTypes,
  type GraphQLArgumentConfig,
  type GraphQLEnumValueConfigMap,
  type GraphQLInputFieldConfig,
  type GraphQLInputType,
  type GraphQLNamedType,
  type GraphQLNullableType,
  type GraphQLOutputType,
  type GraphQLScalarType,
  type GraphQLType,
} from 'graphql';
import {
  UnsupportedSchemaError,
  kindOf,
  nameOf,
  refuseDefaultValue,
  requireDefined,
  unwrapForeignType,
  type ForeignArgument,
  type ForeignSchema,
  type ForeignType,
} from './foreign-schema.ts';

const STANDARD_SCALARS: ReadonlyMap<string, GraphQLScalarType> = new Map(specifiedScalarTypes.map((scalar) => [scalar.name, scalar]));

/** Input types, leaf types and stand-in object types of one foreign schema, each built once. */
export class SharedSchemaTypes {
  readonly #named = new Map<string, GraphQLNamedType>();

  /** An input type (wrappers included), complete and recursive. */
  inputType(foreign: ForeignType): GraphQLInputType {
    return rebuildWrappers(foreign, (named) =>
      kindOf(named) === 'GraphQLInputObjectType' ? this.#remember(named, () => this.#inputObjectType(named)) : this.leafType(named),
    ) as GraphQLInputType;
  }

  /** A scalar (graphql's standard ones only, as Medplum uses) or an enum with all its values. */
  leafType(foreign: ForeignType): GraphQLScalarType | GraphQLEnumType {
    const kind = kindOf(foreign);
    const name = nameOf(foreign);
    if (kind === 'GraphQLScalarType') {
      // A custom scalar would need its own parse and serialise, which cannot be read from the other copy.
      return requireStandardScalar(name);
    }
    if (kind !== 'GraphQLEnumType') {
      throw new UnsupportedSchemaError(`${name} is a ${kind}, not an input or leaf type`);
    }
    const built = this.#remember(foreign, () => new GraphQLEnumType({ name, description: foreign.description, values: enumValues(foreign) }));
    return built as GraphQLEnumType;
  }

  /** The arguments of a field, all of them, as Medplum declares them. */
  argumentsOf(foreignArguments: readonly ForeignArgument[] | undefined): Record<string, GraphQLArgumentConfig> {
    const args: Record<string, GraphQLArgumentConfig> = {};
    for (const argument of foreignArguments ?? []) {
      refuseDefaultValue(argument, `argument ${argument.name}`);
      args[argument.name] = { type: this.inputType(argument.type), description: argument.description, deprecationReason: argument.deprecationReason };
    }
    return args;
  }

  /**
   * A stand-in for an object type a document names nowhere, so that a union keeps all its members: Medplum's
   * `resolveType` may answer any of them (a reference to a Patient where the document only asks `... on Device`),
   * and graphql refuses a runtime type its schema does not have. Such a member is never looked into, so the
   * stand-in has one field of Medplum's, a leaf one (an object type needs a field), which no selection reaches.
   */
  standInObjectType(foreign: ForeignType): GraphQLObjectType {
    const built = this.#remember(foreign, () => {
      const name = nameOf(foreign);
      const leaf = Object.entries(foreign.getFields?.() ?? {}).find(([, field]) => isLeafKind(unwrapForeignType(field.type)) && (field.args ?? []).length === 0);
      if (!leaf) {
        throw new UnsupportedSchemaError(`${name} has no leaf field to stand in with`);
      }
      const [fieldName, field] = leaf;
      return new GraphQLObjectType({
        name,
        description: foreign.description,
        fields: { [fieldName]: { type: rebuildWrappers(field.type, (named) => this.leafType(named)) as GraphQLOutputType, resolve: field.resolve } },
      });
    });
    return built as GraphQLObjectType;
  }

  #inputObjectType(foreign: ForeignType): GraphQLInputObjectType {
    const name = nameOf(foreign);
    return new GraphQLInputObjectType({
      name,
      description: foreign.description,
      isOneOf: foreign.isOneOf === true,
      fields: () => {
        const fields: Record<string, GraphQLInputFieldConfig> = {};
        for (const [fieldName, field] of Object.entries(foreign.getFields?.() ?? {})) {
          refuseDefaultValue(field, `${name}.${fieldName}`);
          fields[fieldName] = { type: this.inputType(field.type), description: field.description, deprecationReason: field.deprecationReason };
        }
        return fields;
      },
    });
  }

  #remember(foreign: ForeignType, build: () => GraphQLNamedType): GraphQLNamedType {
    const name = nameOf(foreign);
    const known = this.#named.get(name);
    if (known) {
      return known;
    }
    const built = build();
    this.#named.set(name, built);
    return built;
  }
}

// One set per foreign schema, which is one per process (Medplum builds its schema once): shared by every route.
const sharedBySchema = new WeakMap<ForeignSchema, SharedSchemaTypes>();

/** The shared types of a foreign schema, created on first use. */
export function sharedTypesOf(foreign: ForeignSchema): SharedSchemaTypes {
  let shared = sharedBySchema.get(foreign);
  if (!shared) {
    shared = new SharedSchemaTypes();
    sharedBySchema.set(foreign, shared);
  }
  return shared;
}

/** The same list and non-null wrappers around the named type `named` builds. */
export function rebuildWrappers(foreign: ForeignType, named: (foreign: ForeignType) => GraphQLNamedType): GraphQLType {
  switch (kindOf(foreign)) {
    case 'GraphQLList':
      return new GraphQLList(rebuildWrappers(requireDefined(foreign.ofType, 'a list item type'), named));
    case 'GraphQLNonNull':
      // graphql-js itself refuses to wrap a non-null type twice.
      return new GraphQLNonNull(rebuildWrappers(requireDefined(foreign.ofType, 'a non-null item type'), named) as GraphQLNullableType);
    default:
      return named(foreign);
  }
}

/** True for a scalar or an enum. */
export function isLeafKind(foreign: ForeignType): boolean {
  const kind = kindOf(foreign);
  return kind === 'GraphQLScalarType' || kind === 'GraphQLEnumType';
}

function requireStandardScalar(name: string): GraphQLScalarType {
  const scalar = STANDARD_SCALARS.get(name);
  if (!scalar) {
    throw new UnsupportedSchemaError(`unknown scalar ${name}`);
  }
  return scalar;
}

function enumValues(foreign: ForeignType): GraphQLEnumValueConfigMap {
  const values: GraphQLEnumValueConfigMap = {};
  for (const value of foreign.getValues?.() ?? []) {
    values[value.name] = { value: value.value, description: value.description, deprecationReason: value.deprecationReason };
  }
  return values;
}
