import { describe, expect, test } from '@jest/globals';
import { parse, print } from 'graphql';
import { appErrorOf } from '../../test/support/app-error.ts';
import { DocumentTranslator, translateDocument } from './translate-document.ts';

/** The spec's document, exactly as the spec writes it. */
const SPEC_MUTATION =
  'mutation CreateObservation($input: ObservationInput!) { ObservationCreate(resource: $input) { id status code { coding { system code } } device { identifier { system value } } } }';

const specInput = {
  status: 'final',
  code: { coding: [{ system: 'http://loinc.org', code: '8867-4' }] },
  device: { identifier: { system: 'urn:example:devices', value: 'device-001' } },
};

function normalized(query: string): string {
  return print(parse(query));
}


describe('translateDocument: the spec dialect', () => {
  test("translates the spec's document and variables to Medplum's dialect", () => {
    const variables = { input: specInput };
    const translated = translateDocument({ query: SPEC_MUTATION, variables });
    expect(translated.query).toBe(
      normalized(
        'mutation CreateObservation($input: ObservationCreate!) { ObservationCreate(res: $input) { id status code { coding { system code } } device { identifier { system value } } } }',
      ),
    );
    expect(translated.variables).toEqual({ input: { resourceType: 'Observation', ...specInput } });
    expect(variables).toEqual({ input: specInput }); // the caller's variables are not modified
    expect(print(translated.document)).toBe(translated.query);
  });

  test('keeps a resourceType the caller sent', () => {
    const translated = translateDocument({ query: SPEC_MUTATION, variables: { input: { resourceType: 'Observation', ...specInput } } });
    expect(translated.variables).toEqual({ input: { resourceType: 'Observation', ...specInput } });
  });

  test('translates an inline literal and adds its resourceType', () => {
    const translated = translateDocument({
      query:
        'mutation { ObservationCreate(resource: { status: "final", code: { coding: [{ system: "http://loinc.org", code: "8867-4" }] } }) { id } }',
    });
    expect(translated.query).toBe(
      normalized(
        'mutation { ObservationCreate(res: { resourceType: "Observation", status: "final", code: { coding: [{ system: "http://loinc.org", code: "8867-4" }] } }) { id } }',
      ),
    );
  });

  test('translates an update: the variable becomes ObservationCreate, the type Medplum gives the res of ObservationUpdate', () => {
    const translated = translateDocument({
      query: 'mutation Update($id: ID!, $input: ObservationInput!) { ObservationUpdate(id: $id, resource: $input) { id status } }',
      variables: { id: 'o1', input: { id: 'o1', status: 'amended', code: { text: 'pulse' } } },
    });
    expect(translated.query).toBe(normalized('mutation Update($id: ID!, $input: ObservationCreate!) { ObservationUpdate(id: $id, res: $input) { id status } }'));
    expect(translated.variables).toEqual({ id: 'o1', input: { resourceType: 'Observation', id: 'o1', status: 'amended', code: { text: 'pulse' } } });
  });

  test('adds the resourceType to a default value when the variable is not sent', () => {
    const translated = translateDocument({
      query: 'mutation($input: ObservationInput! = { status: "final", code: { text: "x" } }) { ObservationCreate(resource: $input) { id } }',
    });
    expect(translated.query).toContain('$input: ObservationCreate! = { resourceType: "Observation", status: "final"');
  });

  test('translates writes inside inline fragments and fragment spreads of a mutation', () => {
    const translated = translateDocument({
      query: 'mutation($a: PatientInput!) { ... on MutationType { PatientCreate(resource: $a) { id } } ...W } fragment W on MutationType { ObservationCreate(resource: { status: "final" }) { id } }',
      variables: { a: { name: [{ family: 'Doe' }] } },
    });
    expect(translated.query).toBe(
      normalized(
        'mutation($a: PatientCreate!) { ... on MutationType { PatientCreate(res: $a) { id } } ...W } fragment W on MutationType { ObservationCreate(res: { resourceType: "Observation", status: "final" }) { id } }',
      ),
    );
    expect(translated.variables).toEqual({ a: { resourceType: 'Patient', name: [{ family: 'Doe' }] } });
  });

  test('refuses a variable declared for one resource type and used for another', () => {
    const error = appErrorOf(() => translateDocument({ query: 'mutation($input: PatientInput!) { ObservationCreate(resource: $input) { id } }' }));
    expect(error.code).toBe('invalid_request');
    expect(error.message).toContain('$input');
  });
});

describe('translateDocument: what passes through', () => {
  test("a document already in Medplum's dialect comes back unchanged", () => {
    const query = 'mutation Create($res: ObservationCreate!) {\n  ObservationCreate(res: $res) { id }\n}';
    const variables = { res: { resourceType: 'Observation', status: 'final', code: { text: 'x' } } };
    const translated = translateDocument({ query, operationName: 'Create', variables });
    expect(translated.query).toBe(query);
    expect(translated.operationName).toBe('Create');
    expect(translated.variables).toEqual(variables);
  });

  test('Patch, Delete and queries are left as they are', () => {
    for (const query of [
      'mutation { ObservationDelete(id: "o1") { id } }',
      'mutation { ObservationPatch(id: "o1", patch: [{ op: "replace", path: "/status", value: "final" }]) { id } }',
      'query($id: ID!) { Observation(id: $id) { id resource: subject { reference } } }',
      '{ ObservationList(code: "8867-4", _count: 5) { id status } }',
    ]) {
      expect(translateDocument({ query, variables: { id: 'o1' } }).query).toBe(query);
    }
  });

  test('a resource argument on a query field is not touched', () => {
    const query = '{ ObservationCreate(resource: { status: "final" }) { id } }';
    expect(translateDocument({ query }).query).toBe(query);
  });
});

describe('translateDocument: refusals', () => {
  test('a syntax error names the position and does not echo the document', () => {
    const query = `mutation { ObservationCreate(resource: { status: "final" ${'x'.repeat(10_000)} ) { id } }`;
    const error = appErrorOf(() => translateDocument({ query }));
    expect(error.code).toBe('invalid_request');
    expect(error.details).toEqual({ graphqlCode: 'GRAPHQL_PARSE_FAILED' });
    expect(error.message).toMatch(/^GraphQL syntax error at line 1, column \d+: /);
    expect(error.message.length).toBeLessThan(300);
  });

  test('several operations without an operationName are refused; with one, the named operation must exist', () => {
    const query = 'query A { ObservationList { id } } query B { PatientList { id } }';
    expect(appErrorOf(() => translateDocument({ query })).message).toMatch(/several operations.*operationName/);
    expect(translateDocument({ query, operationName: 'B' }).query).toBe(query);
    expect(appErrorOf(() => translateDocument({ query, operationName: 'C' })).code).toBe('invalid_request');
  });

  test('subscriptions and documents without operations are refused', () => {
    expect(appErrorOf(() => translateDocument({ query: 'subscription { ObservationList { id } }' })).message).toMatch(/subscriptions/);
    expect(appErrorOf(() => translateDocument({ query: 'fragment F on Observation { id }' })).message).toMatch(/no operation/);
  });

  test('depth is bounded (default 12, counted as Medplum counts it)', () => {
    const nested = (levels: number): string => `{ Patient(id: "p") ${'{ link { other '.repeat(levels)}{ id }${' } }'.repeat(levels)} }`;
    // Patient = 1, each `link { other` adds 2, `other { id }` ends it: depth = 2 * levels + 1
    expect(() => translateDocument({ query: nested(5) })).not.toThrow();
    const error = appErrorOf(() => translateDocument({ query: nested(6) }));
    expect(error.message).toBe('The GraphQL operation is nested too deeply (depth 13, at most 12).');
    expect(() => translateDocument({ query: nested(6) }, { maxDepth: 13 })).not.toThrow();
  });

  test('fields and aliases are bounded (default 100), fragments expanded', () => {
    const aliases = (count: number): string => `{ ${Array.from({ length: count }, (_, index) => `a${index}: Patient(id: "p") { id }`).join(' ')} }`;
    expect(() => translateDocument({ query: aliases(50) })).not.toThrow(); // 100 fields
    expect(appErrorOf(() => translateDocument({ query: aliases(51) })).message).toMatch(/too many fields \(102, at most 100\)/);
    const spreads = `{ PatientList { ...F ...F ...F } } fragment F on Patient { ${Array.from({ length: 40 }, (_, index) => `f${index}: id`).join(' ')} }`;
    expect(appErrorOf(() => translateDocument({ query: spreads })).message).toMatch(/too many fields/);
  });

  test('introspection is refused unless allowed', () => {
    for (const query of ['{ __schema { types { name } } }', '{ __type(name: "Observation") { name } }', '{ ObservationList { id } ...I } fragment I on QueryType { __schema { queryType { name } } }']) {
      const error = appErrorOf(() => translateDocument({ query }));
      expect(error.message).toBe('GraphQL introspection is disabled on this server.');
      expect(translateDocument({ query }, { allowIntrospection: true }).query).toBe(query);
    }
    expect(translateDocument({ query: '{ ObservationList { __typename id } }' }).query).toContain('__typename');
  });
});

describe('DocumentTranslator: each document planned once, each request its own variables', () => {
  const withDefault =
    'mutation Create($input: ObservationInput = { status: "final", code: { text: "pulse" } }) { ObservationCreate(resource: $input) { id } }';

  test('requests with the same document get the same translated document and their own variables', () => {
    const translator = new DocumentTranslator();
    const first = translator.translate({ query: SPEC_MUTATION, variables: { input: specInput } });
    const second = translator.translate({ query: SPEC_MUTATION, variables: { input: { ...specInput, status: 'amended' } } });
    expect(second.document).toBe(first.document);
    expect(first).toEqual(translateDocument({ query: SPEC_MUTATION, variables: { input: specInput } }));
    expect(second.variables).toEqual({ input: { resourceType: 'Observation', ...specInput, status: 'amended' } });
    expect(first.variables).toEqual({ input: { resourceType: 'Observation', ...specInput } });
  });

  test("a left-out resource variable's default gets its resourceType, without changing the document of requests that send one", () => {
    const translator = new DocumentTranslator();
    const sent = translator.translate({ query: withDefault, variables: { input: specInput } });
    const leftOut = translator.translate({ query: withDefault });
    const sentAgain = translator.translate({ query: withDefault, variables: { input: specInput } });
    expect(leftOut).toEqual(translateDocument({ query: withDefault }));
    expect(leftOut.query).toContain('resourceType: "Observation"');
    expect(sent).toEqual(translateDocument({ query: withDefault, variables: { input: specInput } }));
    expect(sent.query).not.toContain('resourceType');
    expect(sentAgain.document).toBe(sent.document);
  });

  test('the operation name is part of what is planned, and a refused document is refused every time', () => {
    const translator = new DocumentTranslator({ maxDepth: 5 });
    const query = 'query A { ObservationList { id } } query B { PatientList { id } }';
    expect(translator.translate({ query, operationName: 'A' }).operationName).toBe('A');
    expect(appErrorOf(() => translator.translate({ query, operationName: 'C' })).code).toBe('invalid_request');
    expect(appErrorOf(() => translator.translate({ query })).message).toMatch(/several operations/);
    const deep = `{ Patient(id: "p") ${'{ link { other '.repeat(3)}{ id }${' } }'.repeat(3)} }`; // depth 7
    expect(appErrorOf(() => translator.translate({ query: deep })).code).toBe('invalid_request');
    expect(appErrorOf(() => translator.translate({ query: deep })).code).toBe('invalid_request');
  });
});
