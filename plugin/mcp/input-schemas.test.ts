import { InputSchemas } from './input-schemas.ts';

const READ_RECORD = { type: 'object', properties: { patient_id: { type: 'string' }, reference: { type: 'string' } }, required: ['patient_id', 'reference'], additionalProperties: false } as const;

describe('InputSchemas', () => {
  test('a schema asked for again (the next request’s fresh server) is the one compiled before, and still validates', async () => {
    const schemas = new InputSchemas();
    const first = schemas.of(READ_RECORD);
    expect(schemas.of(structuredClone(READ_RECORD))).toBe(first);
    const valid = await first['~standard'].validate({ patient_id: 'p1', reference: 'Observation/1' });
    expect(valid).not.toHaveProperty('issues');
    const invalid = await first['~standard'].validate({ patient_id: 7, reference: 'Observation/1', extra: true });
    expect((invalid as { issues?: unknown[] }).issues?.length).toBeGreaterThan(0);
  });

  test('another schema (another project’s types, another rule’s description) is compiled on its own', () => {
    const schemas = new InputSchemas();
    const described = { ...READ_RECORD, properties: { ...READ_RECORD.properties, patient_id: { type: 'string', description: 'The handle of the patient.' } } };
    expect(schemas.of(described)).not.toBe(schemas.of(READ_RECORD));
  });
});
