import { isRecordAddress, recordKind, recordPath, sharedRecordsOf } from './shared-records.ts';

describe('sharedRecordsOf', () => {
  it('lists the reply’s about in order, once each, the patient first as the reply has it', () => {
    const records = sharedRecordsOf({
      about: [
        { reference: 'Patient/p-1' },
        { reference: 'Condition/c-1' },
        { reference: 'Observation/o-1' },
        { reference: 'Condition/c-1' },
      ],
    });
    expect(records.map((record) => record.reference)).toEqual(['Patient/p-1', 'Condition/c-1', 'Observation/o-1']);
    expect(records[1]).toEqual({ resourceType: 'Condition', id: 'c-1', reference: 'Condition/c-1' });
  });

  it('links nothing that is not a plain reference to a record', () => {
    expect(sharedRecordsOf({ about: [{ reference: 'https://elsewhere.example/Patient/1' }, { display: 'no reference' }, { reference: 'Condition/../../admin' }, { reference: '#contained' }] })).toEqual([]);
    expect(sharedRecordsOf({})).toEqual([]);
  });
});

describe('the record page’s address', () => {
  it('is built from a record and accepts only a type and an id', () => {
    expect(recordPath({ resourceType: 'Observation', id: 'o-1' })).toBe('/records/Observation/o-1');
    expect(isRecordAddress('Observation', 'o-1')).toBe(true);
    expect(isRecordAddress('observation', 'o-1')).toBe(false);
    expect(isRecordAddress('Observation', undefined)).toBe(false);
    expect(isRecordAddress('Observation', 'a/b')).toBe(false);
  });

  it('names records as a clinician does', () => {
    expect(recordKind('Condition')).toBe('Problem');
    expect(recordKind('CarePlan')).toBe('Care Plan');
  });
});
