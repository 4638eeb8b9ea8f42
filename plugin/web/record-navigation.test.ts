import { appPathOf } from './record-navigation.ts';

describe("Medplum's record links lead to the app's record page", () => {
  test('a record of any type opens the record page', () => {
    expect(appPathOf('/Patient/a1f0c0de-0000-4000-8000-000000000301')).toBe('/records/Patient/a1f0c0de-0000-4000-8000-000000000301');
    expect(appPathOf('/Practitioner/carter')).toBe('/records/Practitioner/carter');
  });

  test("the app's own pages, and anything not a record, are left as they are", () => {
    for (const path of ['/chat', '/review', '/review/conversations/3f2a', '/records/Patient/x', '/Patient/x/_history/2', '/patient/x']) {
      expect(appPathOf(path)).toBe(path);
    }
  });
});
