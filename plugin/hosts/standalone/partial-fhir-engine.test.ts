/**
 * The partial engine's GraphQL schema, which Medplum's own code builds over Observation alone, holds what Medplum's
 * whole schema holds for it: every type it has is in the whole schema, with the same fields (each with the same
 * type and arguments), input fields and enum values. Only the whole schema's extra root fields, the fields that lead
 * to other resource types and the members of `ResourceList` are missing.
 */
import { beforeAll, describe, expect, test } from '@jest/globals';
import { FhirRouter } from '@medplum/fhir-router';
import { captureMedplumSchema } from '../../graphql/capture-medplum-schema.ts';
import { kindOf, type ForeignSchema, type ForeignType } from '../../graphql/foreign-schema.ts';
import { loadFhirDefinitions } from './fhir-definitions.ts';
import { createPartialRouter } from './partial-fhir-engine.ts';

interface SchemaWithTypes extends ForeignSchema {
  getTypeMap(): Readonly<Record<string, ForeignType>>;
}

/** A type as a document writes it: `[Coding!]`, `ID!`. */
function typeName(type: ForeignType): string {
  if (kindOf(type) === 'GraphQLList') return `[${typeName(type.ofType as ForeignType)}]`;
  if (kindOf(type) === 'GraphQLNonNull') return `${typeName(type.ofType as ForeignType)}!`;
  return type.name ?? '?';
}

/** A type's fields, input fields or values, each with its type and arguments, as comparable text. */
function members(type: ForeignType): Record<string, string> {
  if (type.getValues) {
    return Object.fromEntries(type.getValues().map((value) => [value.name, JSON.stringify(value.value)]));
  }
  const fields = type.getFields?.() ?? {};
  return Object.fromEntries(
    Object.entries(fields).map(([name, field]) => [name, `${typeName(field.type)}(${(field.args ?? []).map((argument) => `${argument.name}: ${typeName(argument.type)}`).join(', ')})`]),
  );
}

describe('the partial FHIR engine', () => {
  let whole: SchemaWithTypes;
  let partial: SchemaWithTypes;

  beforeAll(async () => {
    loadFhirDefinitions();
    partial = (await captureMedplumSchema(createPartialRouter(['Observation']))) as SchemaWithTypes;
    whole = (await captureMedplumSchema(new FhirRouter())) as SchemaWithTypes;
  }, 120_000);

  test('its schema is Medplum’s over Observation alone: a hundred-odd types where the whole schema has ~30,000', () => {
    expect(Object.keys(partial.getMutationType()?.getFields?.() ?? {}).sort()).toEqual(['ObservationCreate', 'ObservationDelete', 'ObservationPatch', 'ObservationUpdate']);
    expect(Object.keys(partial.getQueryType()?.getFields?.() ?? {}).sort()).toEqual(['Observation', 'ObservationConnection', 'ObservationList']);
    expect(Object.keys(partial.getTypeMap()).length).toBeLessThan(200);
    expect(Object.keys(whole.getTypeMap()).length).toBeGreaterThan(20_000);
  });

  test('every type of it is the whole schema’s: the same kind, and each field, input field or value the same', () => {
    const differences: string[] = [];
    for (const [name, type] of Object.entries(partial.getTypeMap())) {
      const counterpart = whole.getType(name);
      if (!counterpart || kindOf(counterpart) !== kindOf(type)) {
        differences.push(`${name}: ${counterpart ? kindOf(counterpart) : 'missing'} in the whole schema`);
        continue;
      }
      if (kindOf(type) === 'GraphQLUnionType') {
        continue; // ResourceList: its members are the resource types each index lists
      }
      const own = members(type);
      const theirs = members(counterpart);
      for (const [member, text] of Object.entries(own)) {
        if (theirs[member] !== text) differences.push(`${name}.${member}: ${text} here, ${theirs[member] ?? 'missing'} in the whole schema`);
      }
      // Object types may lack fields leading to other resource types; nothing else may be missing.
      if (kindOf(type) !== 'GraphQLObjectType') {
        for (const member of Object.keys(theirs)) {
          if (!(member in own)) differences.push(`${name}.${member}: missing here`);
        }
      }
    }
    expect(differences).toEqual([]);
  });

  test('the data types are whole: Observation’s element types have every field the whole schema gives them', () => {
    for (const name of ['Observation', 'CodeableConcept', 'Reference', 'Quantity', 'ObservationComponent', 'Meta']) {
      const own = Object.keys(members(partial.getType(name) as ForeignType));
      const theirs = Object.keys(members(whole.getType(name) as ForeignType)).filter((field) => name !== 'Observation' || !/(List|Connection)$/.test(field));
      expect(own).toEqual(expect.arrayContaining(theirs));
    }
  });

  test('the host’s own definitions index is untouched: it still lists every resource type', async () => {
    const { getResourceTypes } = await import('@medplum/core');
    expect(getResourceTypes().length).toBeGreaterThan(100);
  });

  test('a process has one partial engine, over one set of resource types', () => {
    expect(() => createPartialRouter(['Observation'])).not.toThrow();
    expect(() => createPartialRouter(['Observation', 'Patient'])).toThrow(/holds Observation, not Observation,Patient/);
  });
});
