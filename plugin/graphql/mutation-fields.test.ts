import { parse } from 'graphql';
import { collectRootFields, fragmentsOf, mutationOperations, parseResourceWrite } from './mutation-fields.ts';

function rootFieldNames(source: string): { name: string; throughFragmentSpread: boolean }[] {
  const document = parse(source);
  const [operation] = mutationOperations(document);
  if (!operation) throw new Error('no mutation in the document');
  return collectRootFields(operation, fragmentsOf(document)).map(({ field, throughFragmentSpread }) => ({ name: field.name.value, throughFragmentSpread }));
}

describe('parseResourceWrite', () => {
  test('a whole-resource write names its type and action', () => {
    expect(parseResourceWrite('ObservationCreate')).toEqual({ resourceType: 'Observation', action: 'Create' });
    expect(parseResourceWrite('DeviceUpdate')).toEqual({ resourceType: 'Device', action: 'Update' });
  });

  test('only the whole field name counts: a prefix or a suffix around a write name is not a write', () => {
    expect(parseResourceWrite('ObservationDelete')).toBeUndefined();
    expect(parseResourceWrite('ObservationCreateBatch')).toBeUndefined();
    expect(parseResourceWrite('myObservationCreate')).toBeUndefined();
    expect(parseResourceWrite('__typename')).toBeUndefined();
  });
});

describe('collectRootFields', () => {
  test('fields in inline fragments and fragment spreads are found, each spread fragment once', () => {
    const fields = rootFieldNames(`
      mutation {
        ObservationCreate(res: {}) { id }
        ... on Mutation { DeviceUpdate(id: "d", res: {}) { id } }
        ...Writes
        ...Writes
      }
      fragment Writes on Mutation { PatientCreate(res: {}) { id } }
    `);
    expect(fields).toEqual([
      { name: 'ObservationCreate', throughFragmentSpread: false },
      { name: 'DeviceUpdate', throughFragmentSpread: false },
      { name: 'PatientCreate', throughFragmentSpread: true },
    ]);
  });

  test('a spread of a fragment the document does not define is passed over', () => {
    expect(rootFieldNames('mutation { ObservationCreate(res: {}) { id } ...Missing }')).toEqual([{ name: 'ObservationCreate', throughFragmentSpread: false }]);
  });

  test('only mutations are operations to check', () => {
    const document = parse('query Q { Patient(id: "p") { id } } mutation M { ObservationCreate(res: {}) { id } } fragment F on Mutation { DeviceCreate(res: {}) { id } }');
    expect(mutationOperations(document).map((operation) => operation.name?.value)).toEqual(['M']);
  });
});
