import { describe, expect, test } from '@jest/globals';
import {
  GraphQLEnumType,
  GraphQLInputObjectType,
  GraphQLObjectType,
  GraphQLUnionType,
  buildSchema,
  execute,
  parse,
  type GraphQLSchema,
} from 'graphql';
import { UnsupportedSchemaError, type ForeignSchema } from './foreign-schema.ts';
import { buildPrunedSchema } from './pruned-schema.ts';
import { SharedSchemaTypes } from './shared-schema-types.ts';

// A stand-in for Medplum's schema: a schema of fhirgate's own graphql is read through the same few members.
const FULL = buildSchema(`
  type Query { patient(id: ID!): Patient, patients(name: String, sort: Order): [Patient!]!, other: Other }
  type Mutation { createPatient(res: PatientInput!): Patient, deletePatient(id: ID!): Patient }
  type Patient { id: ID!, name(_count: Int): [HumanName!], link: Reference, gender: String, birthDate: String }
  type HumanName { family: String, given: [String] }
  type Reference { reference: String, resource: Resource }
  union Resource = Patient | Device | Other
  type Device { id: ID, status: String, owner: Reference }
  type Other { value: String, more: String }
  input PatientInput { id: ID, name: [HumanNameInput!], link: ReferenceInput }
  input HumanNameInput { family: String, given: [String], previous: HumanNameInput }
  input ReferenceInput { reference: String }
  enum Order { ASC, DESC }
`);

function prune(query: string, full: GraphQLSchema = FULL): GraphQLSchema {
  return buildPrunedSchema(full as unknown as ForeignSchema, parse(query), new SharedSchemaTypes());
}

function fieldsOf(schema: GraphQLSchema, name: string): string[] {
  const type = schema.getType(name);
  return type instanceof GraphQLObjectType || type instanceof GraphQLInputObjectType ? Object.keys(type.getFields()) : [];
}

const PATIENT = { id: 'p1', name: [{ family: 'Doe', given: ['J'] }], gender: 'x', link: { reference: 'Device/d1', resource: { __typename: 'Device', id: 'd1', status: 'on' } } };
const rootValue = { patient: () => PATIENT, patients: () => [PATIENT, { ...PATIENT, id: 'p2', link: { resource: { __typename: 'Other', value: 'v' } } }] };

describe('buildPrunedSchema', () => {
  test('keeps the selected root fields and, per type, the fields selected anywhere (fragments included)', () => {
    const pruned = prune(`
      query($id: ID!) { patient(id: $id) { id ...Names link { reference } } }
      fragment Names on Patient { name(_count: 1) { family } }
    `);
    expect(fieldsOf(pruned, 'Query')).toEqual(['patient']);
    expect(fieldsOf(pruned, 'Patient').sort()).toEqual(['id', 'link', 'name']);
    expect(fieldsOf(pruned, 'HumanName')).toEqual(['family']);
    expect(fieldsOf(pruned, 'Reference')).toEqual(['reference']);
    expect(pruned.getType('Resource')).toBeUndefined();
    expect(pruned.getMutationType()).toBeUndefined();
    expect((pruned.getType('Patient') as GraphQLObjectType).getFields().name.args.map((argument) => argument.name)).toEqual(['_count']);
  });

  test('a union keeps every member: those the document looks into with their fields, the others as one-field stand-ins', () => {
    const pruned = prune('{ patients { link { resource { __typename ... on Device { status } } } } }');
    const union = pruned.getType('Resource') as GraphQLUnionType;
    expect(union.getTypes().map((member) => member.name)).toEqual(['Patient', 'Device', 'Other']);
    expect(fieldsOf(pruned, 'Device')).toEqual(['status']);
    expect(fieldsOf(pruned, 'Other')).toEqual(['value']); // its first leaf field, never selected
    expect(fieldsOf(pruned, 'Patient')).toEqual(['link']); // selected, so not a stand-in
  });

  test('argument and variable input types are complete and recursive; enums keep all their values', () => {
    const pruned = prune('mutation($res: PatientInput!) { createPatient(res: $res) { id } } query Q($sort: Order) { patients(sort: $sort) { id } }');
    expect(fieldsOf(pruned, 'PatientInput')).toEqual(['id', 'name', 'link']);
    expect(fieldsOf(pruned, 'HumanNameInput')).toEqual(['family', 'given', 'previous']);
    expect(fieldsOf(pruned, 'ReferenceInput')).toEqual(['reference']);
    expect((pruned.getType('Order') as GraphQLEnumType).getValues().map((value) => value.name)).toEqual(['ASC', 'DESC']);
    expect(fieldsOf(pruned, 'Mutation')).toEqual(['createPatient']);
    expect((pruned.getQueryType()?.getFields().patients.args ?? []).map((argument) => argument.name)).toEqual(['name', 'sort']);
  });

  test('a document that only mutates still gets a query root (a schema needs one), with one field of the original', () => {
    const pruned = prune('mutation { deletePatient(id: "p1") { __typename } }');
    expect(fieldsOf(pruned, 'Query')).toEqual(['patient']);
    expect(fieldsOf(pruned, 'Mutation')).toEqual(['deletePatient']);
  });

  test.each([
    ['nested selections, a fragment and a list argument', '{ patient(id: "p1") { id ...F } } fragment F on Patient { name(_count: 1) { family given } gender }'],
    ['a union member named, another not', '{ patients { id link { resource { __typename ... on Device { id status } } } } }'],
    ['a fragment on the union itself', '{ patients { link { resource { ...R } } } } fragment R on Resource { __typename ... on Other { value } }'],
    ['@skip and @include', 'query($yes: Boolean!) { patient(id: "p1") { id @skip(if: $yes) gender @include(if: $yes) } }'],
  ])('executes %s as on the whole schema', async (_name, query) => {
    const document = parse(query);
    const variableValues = { yes: true };
    const onFull = await execute({ schema: FULL, document, rootValue, variableValues });
    const onPruned = await execute({ schema: prune(query), document, rootValue, variableValues });
    expect(onFull.errors).toBeUndefined();
    expect(onPruned).toEqual(onFull);
  });

  test('the shared input types are built once and reused by every pruned schema', () => {
    const shared = new SharedSchemaTypes();
    const document = parse('mutation($res: PatientInput!) { createPatient(res: $res) { id } }');
    const first = buildPrunedSchema(FULL as unknown as ForeignSchema, document, shared);
    const second = buildPrunedSchema(FULL as unknown as ForeignSchema, parse('mutation($r: PatientInput!) { createPatient(res: $r) { gender } }'), shared);
    expect(second.getType('PatientInput')).toBe(first.getType('PatientInput'));
    expect(second.getType('Patient')).not.toBe(first.getType('Patient'));
  });

  test.each([
    ['an interface', 'interface Named { name: String } type Query { a: A } type A implements Named { name: String }', '{ a { name } }', /interfaces/],
    ['a custom scalar', 'scalar Instant type Query { at: Instant }', '{ at }', /unknown scalar Instant/],
    ['a directive other than @skip and @include', 'directive @trace on FIELD type Query { a: String }', '{ a @trace }', /directive @trace/],
    ['a field the schema does not have', 'type Query { a: String }', '{ b }', /field Query.b/],
  ])('refuses %s', (_name, sdl, query, reason) => {
    expect(() => prune(query, buildSchema(sdl))).toThrow(UnsupportedSchemaError);
    expect(() => prune(query, buildSchema(sdl))).toThrow(reason);
  });
});
