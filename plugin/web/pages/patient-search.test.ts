import type { MedplumClient } from '@medplum/core';
import type { Patient } from '@medplum/fhirtypes';
import { patientSearches, searchPatients } from './patient-search.ts';

describe('patientSearches', () => {
  it('searches a name by name, and an identifier-like word by name and identifier', () => {
    expect(patientSearches(' Lopez ')).toEqual([{ name: 'Lopez', _count: '10' }]);
    expect(patientSearches('MRN-0042')).toEqual([{ name: 'MRN-0042', _count: '10' }, { identifier: 'MRN-0042', _count: '10' }]);
    expect(patientSearches('')).toEqual([]);
  });

  it('searches a date by birth date, written year first or day first', () => {
    expect(patientSearches('1958-03-14')).toEqual([{ birthdate: '1958-03-14', _count: '10' }]);
    expect(patientSearches('1958')).toEqual([{ birthdate: '1958', _count: '10' }]);
    expect(patientSearches('14.3.1958')).toEqual([{ birthdate: '1958-03-14', _count: '10' }]);
  });
});

describe('searchPatients', () => {
  it('runs each search as the user and lists each patient found once', async () => {
    const maria: Patient = { resourceType: 'Patient', id: 'p-1', name: [{ family: 'Lopez' }] };
    const queries: Record<string, string>[] = [];
    const medplum = {
      searchResources: async (_type: string, query: Record<string, string>) => {
        queries.push(query);
        return [maria];
      },
    } as unknown as MedplumClient;
    expect(await searchPatients(medplum, 'X42')).toEqual([maria]);
    expect(queries).toHaveLength(2);
  });
});
