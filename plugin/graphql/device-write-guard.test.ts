import { describe, expect, test } from '@jest/globals';
import { parse, print } from 'graphql';
import { AppError } from '../errors.ts';
import { guardDeviceWrites, type DeviceCaller } from './device-write-guard.ts';
import type { GraphqlRequest, MedplumGraphqlRequest } from './graphql-request.ts';
import { DocumentTranslator, translateDocument } from './translate-document.ts';

const SYSTEM = 'urn:example:devices';
const device: DeviceCaller = { deviceId: 'device-001', deviceResourceId: 'dev-res-1', identifierSystem: SYSTEM };

const SPEC_MUTATION =
  'mutation CreateObservation($input: ObservationInput!) { ObservationCreate(resource: $input) { id status code { coding { system code } } device { identifier { system value } } } }';

function observation(identifier: Record<string, unknown> | null = { system: SYSTEM, value: 'device-001' }): Record<string, unknown> {
  return {
    status: 'final',
    code: { coding: [{ system: 'http://loinc.org', code: '8867-4' }] },
    ...(identifier ? { device: { identifier } } : {}),
  };
}

function guard(request: GraphqlRequest): MedplumGraphqlRequest {
  return guardDeviceWrites(translateDocument(request), device);
}

function forbiddenMessage(request: GraphqlRequest): string {
  try {
    guard(request);
  } catch (error) {
    if (AppError.isInstance(error) && error.code === 'forbidden') {
      return error.message;
    }
    throw error;
  }
  throw new Error('expected a forbidden AppError');
}

describe('guardDeviceWrites: accepted writes', () => {
  test("the spec's mutation: checked, linked to the Device resource, hoisted into a fresh variable", () => {
    const guarded = guard({ query: SPEC_MUTATION, variables: { input: observation() } });
    expect(guarded.query).toBe(
      print(
        parse(
          'mutation CreateObservation($fhirgate_res_0: ObservationCreate!) { ObservationCreate(res: $fhirgate_res_0) { id status code { coding { system code } } device { identifier { system value } } } }',
        ),
      ),
    );
    expect(guarded.variables).toEqual({
      fhirgate_res_0: {
        resourceType: 'Observation',
        ...observation(),
        device: { identifier: { system: SYSTEM, value: 'device-001' }, reference: 'Device/dev-res-1' },
      },
    });
  });

  test('an inline literal is checked and hoisted the same way', () => {
    const guarded = guard({
      query: `mutation { ObservationCreate(resource: { status: "final", code: { text: "pulse" }, device: { identifier: { system: "${SYSTEM}", value: "device-001" } } }) { id } }`,
    });
    expect(guarded.query).toBe(print(parse('mutation ($fhirgate_res_0: ObservationCreate!) { ObservationCreate(res: $fhirgate_res_0) { id } }')));
    expect(guarded.variables.fhirgate_res_0).toEqual({
      resourceType: 'Observation',
      status: 'final',
      code: { text: 'pulse' },
      device: { identifier: { system: SYSTEM, value: 'device-001' }, reference: 'Device/dev-res-1' },
    });
  });

  test('nested variables inside a literal are resolved before the check', () => {
    const guarded = guard({
      query: 'mutation($value: String!) { ObservationCreate(resource: { status: "final", code: { text: "x" }, device: { identifier: { system: "urn:example:devices", value: $value } } }) { id } }',
      variables: { value: 'device-001' },
    });
    expect(guarded.query).not.toContain('$value');
    expect(guarded.variables).toEqual({
      fhirgate_res_0: expect.objectContaining({ device: { identifier: { system: SYSTEM, value: 'device-001' }, reference: 'Device/dev-res-1' } }),
    });
  });

  test('an update is checked too; a reference the device sent is replaced by its own', () => {
    const input = { id: 'o1', ...observation(), device: { reference: 'Device/someone-else', identifier: { system: SYSTEM, value: 'device-001' } } };
    const guarded = guard({
      query: 'mutation($input: ObservationInput!) { ObservationUpdate(id: "o1", resource: $input) { id } }',
      variables: { input },
    });
    expect(guarded.query).toContain('ObservationUpdate(id: "o1", res: $fhirgate_res_0)');
    expect((guarded.variables.fhirgate_res_0 as { device: unknown }).device).toEqual({
      reference: 'Device/dev-res-1',
      identifier: { system: SYSTEM, value: 'device-001' },
    });
  });

  test('two writes get two variables; a taken name is skipped; __typename is allowed', () => {
    const guarded = guard({
      query: 'mutation($fhirgate_res_0: ObservationInput!) { __typename a: ObservationCreate(resource: $fhirgate_res_0) { id } b: ObservationCreate(resource: $fhirgate_res_0) { id } }',
      variables: { fhirgate_res_0: observation() },
    });
    expect(guarded.query).toContain('mutation ($fhirgate_res_1: ObservationCreate!, $fhirgate_res_2: ObservationCreate!)');
    expect(Object.keys(guarded.variables).sort()).toEqual(['fhirgate_res_1', 'fhirgate_res_2']);
  });

  test('queries pass untouched', () => {
    const request = translateDocument({ query: '{ ObservationList(device: "Device/dev-res-1") { id status } }' });
    expect(guardDeviceWrites(request, device)).toBe(request);
  });
});

describe('guardDeviceWrites: forbidden writes', () => {
  test('a wrong identifier system is refused, naming the field and the expected system', () => {
    const message = forbiddenMessage({ query: SPEC_MUTATION, variables: { input: observation({ system: 'urn:other', value: 'device-001' }) } });
    expect(message).toBe(`ObservationCreate: device.identifier.system must be this server's device identifier system (${SYSTEM}).`);
  });

  test('another device id is refused without echoing either id', () => {
    const message = forbiddenMessage({ query: SPEC_MUTATION, variables: { input: observation({ system: SYSTEM, value: 'device-002' }) } });
    expect(message).toBe('ObservationCreate: device.identifier.value must be the device id of the access token.');
    expect(message).not.toMatch(/device-00[12]/);
  });

  test('an Observation without a device identifier is refused', () => {
    expect(forbiddenMessage({ query: SPEC_MUTATION, variables: { input: observation(null) } })).toMatch(/must name this device in device.identifier/);
    expect(forbiddenMessage({ query: SPEC_MUTATION, variables: {} })).toMatch(/must name this device/);
    expect(forbiddenMessage({ query: SPEC_MUTATION, variables: { input: { ...observation(), device: { reference: 'Device/dev-res-1' } } } })).toMatch(
      /must name this device/,
    );
  });

  test('other resource types, Patch and Delete are refused', () => {
    expect(forbiddenMessage({ query: 'mutation { PatientCreate(resource: { name: [{ family: "Doe" }] }) { id } }' })).toBe(
      'A device may only create or update Observations; PatientCreate is not allowed.',
    );
    expect(forbiddenMessage({ query: 'mutation { ObservationDelete(id: "o1") { id } }' })).toMatch(/ObservationDelete is not allowed/);
    expect(forbiddenMessage({ query: 'mutation { ObservationPatch(id: "o1", patch: [{ op: "remove", path: "/device" }]) { id } }' })).toMatch(
      /ObservationPatch is not allowed/,
    );
    expect(forbiddenMessage({ query: 'mutation { ObservationDefinitionCreate(resource: {}) { id } }' })).toMatch(/not allowed/);
  });

  test('one bad write refuses the whole document, in any operation, also behind an inline fragment', () => {
    const query = `query Read { ObservationList { id } } mutation Write($input: ObservationInput!) { ObservationCreate(resource: $input) { id } ... on MutationType { PatientDelete(id: "p1") { id } } }`;
    expect(forbiddenMessage({ query, operationName: 'Read', variables: { input: observation() } })).toMatch(/PatientDelete is not allowed/);
  });

  test('a variable named __proto__ (valid GraphQL, and an own key of JSON.parse) is read as a variable', () => {
    const variables = JSON.parse(`{"__proto__": ${JSON.stringify(observation({ system: SYSTEM, value: 'device-002' }))}}`) as Record<string, unknown>;
    const query = 'mutation($__proto__: ObservationInput!) { ObservationCreate(resource: $__proto__) { id } }';
    expect(forbiddenMessage({ query, variables })).toMatch(/device.identifier.value must be/);
    const nested = 'mutation($__proto__: String!) { ObservationCreate(resource: { status: "final", device: { identifier: { system: "urn:example:devices", value: $__proto__ } } }) { id } }';
    expect(forbiddenMessage({ query: nested, variables: JSON.parse('{"__proto__": "device-002"}') as Record<string, unknown> })).toMatch(/value must be/);
  });

  test('writes in fragment spreads are refused', () => {
    const query = `mutation { ...W } fragment W on MutationType { ObservationCreate(resource: { status: "final", code: { text: "x" }, device: { identifier: { system: "${SYSTEM}", value: "device-001" } } }) { id } }`;
    expect(forbiddenMessage({ query })).toMatch(/not in a fragment/);
  });
});

describe('guardDeviceWrites: a document planned once', () => {
  test('each request of the same document is checked with its own values and linked to its own device', () => {
    const translator = new DocumentTranslator();
    const other: DeviceCaller = { deviceId: 'device-002', deviceResourceId: 'dev-res-2', identifierSystem: SYSTEM };
    const first = guardDeviceWrites(translator.translate({ query: SPEC_MUTATION, variables: { input: observation() } }), device);
    const forged = translator.translate({ query: SPEC_MUTATION, variables: { input: observation({ system: SYSTEM, value: 'device-001' }) } });
    expect(() => guardDeviceWrites(forged, other)).toThrow(/device id of the access token/);
    const second = guardDeviceWrites(
      translator.translate({ query: SPEC_MUTATION, variables: { input: { ...observation({ system: SYSTEM, value: 'device-002' }), status: 'amended' } } }),
      other,
    );
    expect(second.document).toBe(first.document);
    expect(second.variables).toEqual({
      fhirgate_res_0: { resourceType: 'Observation', ...observation({ system: SYSTEM, value: 'device-002' }), status: 'amended', device: { identifier: { system: SYSTEM, value: 'device-002' }, reference: 'Device/dev-res-2' } },
    });
    expect(first.variables).toMatchObject({ fhirgate_res_0: { status: 'final', device: { reference: 'Device/dev-res-1' } } });
    expect(() => guardDeviceWrites(translator.translate({ query: SPEC_MUTATION, variables: { input: observation(null) } }), device)).toThrow(/must name this device/);
  });

  test('the same document about a patient passes for the device assigned to it, and is refused for the same device once reassigned', () => {
    const translator = new DocumentTranslator();
    const request = { query: SPEC_MUTATION, variables: { input: { ...observation(), subject: { reference: 'Patient/p-1' } } } };
    const guarded = guardDeviceWrites(translator.translate(request), { ...device, assignedPatient: 'Patient/p-1' });
    expect(guarded.variables.fhirgate_res_0).toMatchObject({ subject: { reference: 'Patient/p-1' }, device: { reference: 'Device/dev-res-1' } });
    expect(() => guardDeviceWrites(translator.translate(request), { ...device, assignedPatient: 'Patient/p-2' })).toThrow(
      /^ObservationCreate: subject must be the patient this device is assigned to/,
    );
    expect(() => guardDeviceWrites(translator.translate(request), device)).toThrow(/assigned to no patient of its project/);
  });
});

describe('guardDeviceWrites: what the document leaves to Medplum', () => {
  const write = (value: string): string => `{ status: "final", code: { text: "pulse" }, device: { identifier: { system: "${SYSTEM}", value: "${value}" } } }`;

  test("a variable's default value is checked as the value it is, and a value sent for it wins", () => {
    const query = (value: string): string => `mutation($note: String = "n", $input: ObservationInput = ${write(value)}) { ObservationCreate(resource: $input) { id } }`;
    expect(forbiddenMessage({ query: query('device-002') })).toBe('ObservationCreate: device.identifier.value must be the device id of the access token.');
    expect(guard({ query: query('device-001') }).variables).toEqual({
      fhirgate_res_0: { resourceType: 'Observation', status: 'final', code: { text: 'pulse' }, device: { identifier: { system: SYSTEM, value: 'device-001' }, reference: 'Device/dev-res-1' } },
    });
    expect(forbiddenMessage({ query: query('device-001'), variables: { input: observation({ system: SYSTEM, value: 'device-002' }) } })).toMatch(/value must be the device id/);
  });

  test('a variable of the checked value that the document still uses elsewhere stays defined, with its value', () => {
    const query = `mutation($flag: Boolean!, $id: ID!) { ObservationUpdate(id: $id, resource: { status: "final", valueBoolean: $flag, device: { identifier: { system: "${SYSTEM}", value: "device-001" } } }) { id ...Shown } } fragment Shown on Observation { status @include(if: $flag) }`;
    const guarded = guard({ query, variables: { flag: true, id: 'o1' } });
    expect(guarded.query).toContain('mutation ($flag: Boolean!, $id: ID!, $fhirgate_res_0: ObservationCreate!)');
    expect(guarded.variables).toEqual({
      flag: true,
      id: 'o1',
      fhirgate_res_0: { resourceType: 'Observation', status: 'final', valueBoolean: true, device: { identifier: { system: SYSTEM, value: 'device-001' }, reference: 'Device/dev-res-1' } },
    });
  });

  test('a write without its resource is refused, and a refusal quotes at most 64 characters of the field', () => {
    expect(forbiddenMessage({ query: 'mutation { ObservationCreate { id } }' })).toBe('ObservationCreate: the Observation must name this device in device.identifier.');
    expect(forbiddenMessage({ query: 'mutation { ObservationUpdate(id: "o1") { id } }' })).toBe('ObservationUpdate: the Observation must name this device in device.identifier.');
    const fieldName = `${'Observation'.repeat(10)}Create`;
    expect(forbiddenMessage({ query: `mutation { ${fieldName}(resource: ${write('device-001')}) { id } }` })).toBe(
      `A device may only create or update Observations; ${fieldName.slice(0, 64)} is not allowed.`,
    );
  });
});

describe('guardDeviceWrites: documents Medplum would refuse anyway', () => {
  test('a variable the document does not define still has its value checked: a refusal, not a crash', () => {
    const forged = { input: observation({ system: SYSTEM, value: 'device-002' }) };
    expect(forbiddenMessage({ query: 'mutation { ObservationCreate(resource: $input) { id } }', variables: forged })).toMatch(/value must be the device id/);
    expect(forbiddenMessage({ query: 'mutation($other: String) { ObservationCreate(resource: $input) { id } }', variables: forged })).toMatch(/value must be the device id/);
  });

  test('a spread of a fragment the document does not hold is passed over: no crash (the translation refuses a cycle)', () => {
    const query = `mutation($flag: Boolean!) { ObservationCreate(resource: { status: "final", valueBoolean: $flag, device: { identifier: { system: "${SYSTEM}", value: "device-001" } } }) { ...Missing ...Shown } } fragment Shown on Observation { status @include(if: $flag) }`;
    const guarded = guard({ query, variables: { flag: false } });
    expect(guarded.query).toContain('mutation ($flag: Boolean!, $fhirgate_res_0: ObservationCreate!)');
    expect(guarded.variables.flag).toBe(false);
  });
});
