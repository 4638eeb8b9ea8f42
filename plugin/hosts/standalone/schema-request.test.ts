import { loadFhirDefinitions } from './fhir-definitions.ts';
import { answerSchemaRequest } from './schema-request.ts';

const SCHEMA_REQUEST = `{
  StructureDefinitionList(_filter: "name eq Communication") { resourceType, name, kind, snapshot { element { id, path } } }
  SearchParameterList(base: "Communication", _count: 100) { base, code, type, expression, target }
}`;

describe('the schema request of Medplum client', () => {
  beforeAll(() => loadFhirDefinitions());

  test('is answered with the type definition and its search parameters, fhirgate own included', () => {
    const answer = answerSchemaRequest(SCHEMA_REQUEST);
    expect(answer?.data.StructureDefinitionList).toEqual([expect.objectContaining({ resourceType: 'StructureDefinition', name: 'Communication', kind: 'resource' })]);
    const codes = (answer?.data.SearchParameterList as { code: string }[]).map((parameter) => parameter.code);
    expect(codes).toEqual(expect.arrayContaining(['category', 'sent', 'part-of', 'in-response-to']));
  });

  test('any other document is left to the GraphQL engine, where the caller AccessPolicy applies', () => {
    expect(answerSchemaRequest('{ CommunicationList(_count: 5) { id } }')).toBeUndefined();
    expect(answerSchemaRequest(`{ StructureDefinitionList(_filter: "name eq Communication") { name } PatientList { id } }`)).toBeUndefined();
    expect(answerSchemaRequest('mutation { CommunicationCreate(res: {}) { id } }')).toBeUndefined();
    expect(answerSchemaRequest('not graphql')).toBeUndefined();
  });
});
