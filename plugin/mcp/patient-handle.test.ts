import { PatientHandles } from './patient-handle.ts';

const KEY = 'a-patient-handle-test-key-of-forty-characters';
const ID = 'a1f0c0de-0000-4000-8000-000000000301';

describe('PatientHandles', () => {
  const handles = new PatientHandles(KEY, 'project-1', 'Practitioner/1');

  test('the same patient has the same handle at every call; it names the patient back, and holds nothing of the id', () => {
    const handle = handles.handleOf(ID);
    expect(new PatientHandles(KEY, 'project-1', 'Practitioner/1').handleOf(ID)).toBe(handle);
    expect(handles.patientIdOf(handle)).toBe(ID);
    expect(handle).not.toContain('a1f0c0de');
    expect(handles.handleOf('a1f0c0de-0000-4000-8000-000000000302')).not.toBe(handle);
  });

  test("another caller's, another project's or another key's handle names no patient", () => {
    const handle = handles.handleOf(ID);
    expect(new PatientHandles(KEY, 'project-1', 'Practitioner/2').patientIdOf(handle)).toBeUndefined();
    expect(new PatientHandles(KEY, 'project-2', 'Practitioner/1').patientIdOf(handle)).toBeUndefined();
    expect(new PatientHandles(`${KEY}-other`, 'project-1', 'Practitioner/1').patientIdOf(handle)).toBeUndefined();
  });

  test('every byte altered, a handle cut short or made up, names no patient', () => {
    const handle = handles.handleOf(ID);
    const bytes = Buffer.from(handle.slice(4), 'base64url');
    for (let index = 0; index < bytes.length; index += 1) {
      const altered = Buffer.from(bytes);
      altered[index] ^= 1;
      expect([index, handles.patientIdOf(`ph1_${altered.toString('base64url')}`)]).toEqual([index, undefined]);
    }
    expect(handles.patientIdOf(handle.slice(0, -8))).toBeUndefined();
    expect(handles.patientIdOf(`ph1_${Buffer.from(ID).toString('base64url')}`)).toBeUndefined();
    expect(handles.patientIdOf(ID)).toBeUndefined();
  });
});
