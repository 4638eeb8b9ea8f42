import type { Patient } from '@medplum/fhirtypes';
import { Pseudonymizer } from './de-identify-text.ts';

/** A patient with every kind of identifier the de-identification removes. */
export const IDENTIFIED_PATIENT: Patient & { id: string } = {
  resourceType: 'Patient',
  id: 'b7e1c2d4-5f60-4a8b-9c0d-1e2f3a4b5c6d',
  name: [{ given: ['María', 'José'], family: 'López-García', text: 'María José López-García' }],
  birthDate: '1958-03-14',
  identifier: [
    { system: 'urn:oid:1.2.3.4', value: 'MRN-004512' },
    { system: 'http://hl7.org/fhir/sid/us-ssn', value: '123-45-6789' },
  ],
  telecom: [
    { system: 'phone', value: '+1 (555) 010-0199' },
    { system: 'email', value: 'maria.lopez@example.org' },
  ],
  address: [{ line: ['12 Elm Street', 'Apt 4B'], city: 'Springfield', postalCode: '62704', state: 'IL' }],
  contact: [{ name: { given: ['Carlos'], family: 'Ruiz' }, telecom: [{ system: 'phone', value: '555-010-0777' }] }],
};

/** Everything identifying in {@link IDENTIFIED_PATIENT}, as it may be written. */
export const IDENTIFYING_STRINGS = ['María', 'Maria', 'José', 'López', 'Lopez', 'García', 'Garcia', '1958', '004512', '6789', '0199', 'maria.lopez', 'Elm', 'Springfield', '62704', 'Carlos', 'Ruiz', '0777', 'b7e1c2d4'];

describe('Pseudonymizer', () => {
  const pseudonyms = new Pseudonymizer(IDENTIFIED_PATIENT, -100);

  test("removes the patient's identifiers however they are written, and the birth date", () => {
    const text = [
      'Maria Lopez (maria lopez, LÓPEZ-GARCÍA, Ms. Garcia), born 1958-03-14 or 03/14/1958 or March 14, 1958.',
      'MRN 004512, SSN 123456789, phone 555 010 0199 or +15550100199 or (555) 010-0199, Maria.Lopez@example.org.',
      'Lives at 12 elm street, apt 4b, Springfield 62704. Next of kin Carlos Ruiz, 5550100777.',
      `Record Patient/${IDENTIFIED_PATIENT.id}.`,
    ].join('\n');
    const sent = pseudonyms.deIdentify(text);
    for (const identifying of IDENTIFYING_STRINGS) {
      expect([identifying, sent.toLowerCase().includes(identifying.toLowerCase())]).toEqual([identifying, false]);
    }
    expect(sent).toContain('[GIVEN-1] [FAMILY-2] ([given-1] [family-2], [FAMILY-1], Ms. [FAMILY-3]), born 1957-12-04 or 12/04/1957 or December 4, 1957.');
    expect(sent).toContain('IL');
  });

  test('keeps what is not the patient\'s: other names, clinical words, other numbers', () => {
    const text = 'Dr. Alice Carter prescribed Lisinopril 10 mg; HbA1c 6.1 %, heart rate 72 /min, 3 times a day.';
    expect(pseudonyms.deIdentify(text)).toBe(text);
  });

  test('maps pseudonyms and shifted dates back, a name written in lower case as it was written', () => {
    const reply = 'Ms. [FAMILY-2] ([GIVEN-1]), born 1957-12-04, can reach [given-1] at [PHONE-1]; seen November 25, 2023. [UNKNOWN-3] stays.';
    expect(pseudonyms.reIdentify(reply)).toBe('Ms. López (María), born 1958-03-14, can reach maría at +1 (555) 010-0199; seen March 4, 2024. [UNKNOWN-3] stays.');
  });

  test('restores into JSON as JSON: a value is escaped for the string it lands in', () => {
    const quoted = new Pseudonymizer({ resourceType: 'Patient', name: [{ family: 'O"Brien' }] }, -30);
    const sent = quoted.deIdentify('{"name":"O\\"Brien"}');
    expect(JSON.parse(quoted.reIdentify(quoted.deIdentify('{"q":"[FAMILY-1]"}'), true))).toEqual({ q: 'O"Brien' });
    expect(sent).not.toContain('Brien');
  });

  test('a tool result loses the patient\'s photo, and its markup stays escaped', () => {
    const result = JSON.stringify({ records: [{ ...IDENTIFIED_PATIENT, photo: [{ contentType: 'image/png', data: 'iVBORw0KGgo=' }], note: '\u003cb\u003e' }] }).replaceAll('<', '\\u003c');
    const sent = pseudonyms.deIdentifyToolResult(result);
    expect(sent).not.toContain('iVBORw0KGgo');
    expect(sent).not.toContain('<');
    expect(JSON.parse(sent).records[0].name[0].family).toBe('[FAMILY-1]');
  });

  test('the same text gives the same result in every step of a turn', () => {
    const text = 'Maria was seen 2024-01-05.';
    expect(pseudonyms.deIdentify(text)).toBe(pseudonyms.deIdentify(text));
    expect(new Pseudonymizer(IDENTIFIED_PATIENT, -100).deIdentify(text)).toBe(pseudonyms.deIdentify(text));
  });
});
