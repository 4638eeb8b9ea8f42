import { beforeAll, describe, expect, test } from '@jest/globals';
import { isResourceType } from '@medplum/core';
import { parse } from 'graphql';
import { appErrorOf } from '../../test/support/app-error.ts';
import { loadFhirDefinitions } from '../hosts/standalone/fhir-definitions.ts';
import { checkDeviceDocumentScope } from './device-document-scope.ts';

beforeAll(() => loadFhirDefinitions());

function check(query: string): void {
  checkDeviceDocumentScope(parse(query), isResourceType);
}

describe("checkDeviceDocumentScope: what a device's document may name", () => {
  test.each([
    ["the spec's ObservationCreate", 'mutation CreateObservation($input: ObservationInput!) { ObservationCreate(resource: $input) { id status device { identifier { system value } } } }'],
    ["the same in Medplum's dialect", 'mutation ($input: ObservationCreate!) { ObservationCreate(res: $input) { id } }'],
    ['an update', 'mutation ($input: ObservationCreate!) { ObservationUpdate(id: "o1", res: $input) { id } }'],
    ['a search of its Observations, with a connection', '{ ObservationList(_count: 5) { id code { text } } ObservationConnection { count edges { resource { id } } } }'],
    ['a read of an Observation and of its own Device', '{ Observation(id: "o1") { id } Device(id: "d1") { id status } DeviceList(_id: "d1") { id } }'],
    ['a reverse lookup of Observations', '{ ObservationList { id ObservationList(_reference: has_member) { id } } }'],
    ['a reference read as an Observation or a Device', '{ ObservationList { device { resource { ... on Device { id } } } hasMember { resource { ... on Observation { id } } } } }'],
    ['fragments on its types and on data types', 'query { ObservationList { ...Reading } } fragment Reading on Observation { id valueQuantity { ...Amount } } fragment Amount on Quantity { value unit }'],
    ['__typename alone', '{ __typename }'],
    ['a connection of its own Device', '{ DeviceConnection(_id: "d1") { count edges { resource { id } } } }'],
    // Only a resource type's own name, or it followed by one of Medplum's suffixes, names it: `Entry` is not `Input`.
    ['a type whose name only begins with another resource type (BundleEntry)', '{ ObservationList { id } } fragment Part on BundleEntry { fullUrl }'],
  ])('lets through %s', (_name, query) => {
    expect(() => check(query)).not.toThrow();
  });

  test.each([
    ['a search of Patients', '{ PatientList { id } }', 'PatientList is not allowed.'],
    ['a read of a Patient by id', '{ Patient(id: "p1") { id } }', 'Patient is not allowed.'],
    ['a Patient search beside its own Observations, under an alias', '{ ObservationList { id } mine: PractitionerList { id } }', 'PractitionerList is not allowed.'],
    ['a reverse lookup of another resource type', '{ ObservationList { DiagnosticReportList(_reference: result) { id } } }', 'DiagnosticReportList is not allowed.'],
    ['a reference read as a Patient', '{ ObservationList { subject { resource { ... on Patient { name { family } } } } } }', 'the type Patient is not allowed.'],
    ['a fragment on another resource type, unused', '{ ObservationList { id } } fragment Who on Patient { id }', 'the type Patient is not allowed.'],
    ['a connection of another resource type', '{ ObservationList { id } } fragment Page on PatientConnection { count }', 'the type PatientConnection is not allowed.'],
    ['a variable of another resource type', 'mutation ($patient: PatientCreate!) { ObservationCreate(res: { resourceType: "Observation" }) { id } }', 'the type PatientCreate is not allowed.'],
    ['a write of another resource type', 'mutation { PatientCreate(res: { resourceType: "Patient" }) { id } }', 'PatientCreate is not allowed.'],
    ['a delete of its own Observation', 'mutation { ObservationDelete(id: "o1") { id } }', 'ObservationDelete is not allowed.'],
    ['a root field Medplum does not have', '{ Foo { id } }', 'Foo is not allowed.'],
    ['introspection', '{ __schema { types { name } } }', '__schema (the schema) is not allowed.'],
    ['a type introspected', '{ __type(name: "Patient") { name } }', '__type (the schema) is not allowed.'],
  ])('refuses %s, FORBIDDEN, naming it', (_name, query, reason) => {
    const error = appErrorOf(() => check(query));
    expect(error.code).toBe('forbidden');
    expect(error.status).toBe(403);
    expect(error.message).toBe(`A device may only read and write its Observations and read its own Device; ${reason}`);
  });

  test('a long name is shortened in the message to its first 64 characters; one of 64 is quoted whole', () => {
    const name = `X${'y'.repeat(500)}List`;
    expect(appErrorOf(() => check(`{ ${name} { id } }`)).message).toBe(
      `A device may only read and write its Observations and read its own Device; ${name.slice(0, 64)}… is not allowed.`,
    );
    const sixtyFour = `X${'y'.repeat(59)}List`;
    expect(appErrorOf(() => check(`{ ${sixtyFour} { id } }`)).message).toBe(
      `A device may only read and write its Observations and read its own Device; ${sixtyFour} is not allowed.`,
    );
  });

  test('the same document object is refused every time, and a passing one stays passing', () => {
    const refused = parse('{ PatientList { id } }');
    expect(() => checkDeviceDocumentScope(refused, isResourceType)).toThrow();
    expect(() => checkDeviceDocumentScope(refused, isResourceType)).toThrow();
    const allowed = parse('{ ObservationList { id } }');
    checkDeviceDocumentScope(allowed, isResourceType);
    expect(() => checkDeviceDocumentScope(allowed, isResourceType)).not.toThrow();
  });
});
