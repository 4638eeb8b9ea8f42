/**
 * Medplum's GraphQL schema as fhirgate sees it: objects of another copy of graphql-js. `@medplum/fhir-router`
 * bundles its own graphql-js and keeps its schema private, and the two copies' objects do not mix (each copy
 * checks its own classes), so fhirgate reads the other copy's schema through the few members declared here and
 * builds what it executes with its own graphql (`pruned-schema.ts`). A type's kind is read from its
 * `Symbol.toStringTag` ("GraphQLObjectType", ...), which every copy sets.
 */
import type { GraphQLFieldResolver, GraphQLIsTypeOfFn, GraphQLTypeResolver } from 'graphql';

/** The parts of a graphql-js type of another copy that fhirgate reads; everything else is left alone. */
export interface ForeignType {
  readonly name?: string;
  readonly description?: string | null;
  readonly ofType?: ForeignType;
  getFields?(): Readonly<Record<string, ForeignField>>;
  getValues?(): readonly ForeignEnumValue[];
  getTypes?(): readonly ForeignType[];
  readonly resolveType?: GraphQLTypeResolver<unknown, unknown> | null;
  readonly isTypeOf?: GraphQLIsTypeOfFn<unknown, unknown> | null;
  readonly isOneOf?: boolean;
  getInterfaces?(): readonly unknown[];
}

/** A field of an object or input object type of another copy. */
export interface ForeignField {
  readonly description?: string | null;
  readonly deprecationReason?: string | null;
  readonly type: ForeignType;
  readonly args?: readonly ForeignArgument[];
  readonly resolve?: GraphQLFieldResolver<unknown, unknown>;
  readonly default?: unknown;
  readonly defaultValue?: unknown;
}

/** An argument of a field of another copy. */
export interface ForeignArgument {
  readonly name: string;
  readonly description?: string | null;
  readonly deprecationReason?: string | null;
  readonly type: ForeignType;
  readonly default?: unknown;
  readonly defaultValue?: unknown;
}

/** A value of an enum type of another copy. */
export interface ForeignEnumValue {
  readonly name: string;
  readonly value: unknown;
  readonly description?: string | null;
  readonly deprecationReason?: string | null;
}

/** The schema of another copy: its root types and its types by name. */
export interface ForeignSchema {
  getQueryType(): ForeignType | null | undefined;
  getMutationType(): ForeignType | null | undefined;
  getType(name: string): ForeignType | null | undefined;
}

/** The kinds of named type fhirgate can rebuild. */
export type ForeignTypeKind = 'GraphQLObjectType' | 'GraphQLInputObjectType' | 'GraphQLEnumType' | 'GraphQLScalarType' | 'GraphQLUnionType';

/** Something in Medplum's schema, or in a document, that fhirgate does not know how to rebuild faithfully. */
export class UnsupportedSchemaError extends Error {
  override readonly name = 'UnsupportedSchemaError';
}

/** True when `value` looks like a graphql-js schema (of any copy). */
export function isForeignSchema(value: unknown): value is ForeignSchema {
  return kindOf(value) === 'GraphQLSchema';
}

/** The graphql-js class of an object of any copy, by its `Symbol.toStringTag` (e.g. "GraphQLObjectType"). */
export function kindOf(value: unknown): string {
  return typeof value === 'object' && value !== null ? Object.prototype.toString.call(value).slice('[object '.length, -1) : typeof value;
}

/** The named type inside list and non-null wrappers. */
export function unwrapForeignType(type: ForeignType): ForeignType {
  let named = type;
  while (kindOf(named) === 'GraphQLList' || kindOf(named) === 'GraphQLNonNull') {
    named = requireDefined(named.ofType, 'the item type of a wrapper');
  }
  return named;
}

/** The name of a named type; every named type has one. */
export function nameOf(type: ForeignType): string {
  return requireDefined(type.name, 'a type name');
}

/** Medplum declares no default values; rebuilding one would need the other copy's value handling, so refuse. */
export function refuseDefaultValue(input: { readonly default?: unknown; readonly defaultValue?: unknown }, where: string): void {
  if (input.default !== undefined || input.defaultValue !== undefined) {
    throw new UnsupportedSchemaError(`${where} has a default value`);
  }
}

/** `value`, or an UnsupportedSchemaError naming what was missing. */
export function requireDefined<T>(value: T | null | undefined, what: string): T {
  if (value === undefined || value === null) {
    throw new UnsupportedSchemaError(`missing ${what}`);
  }
  return value;
}
