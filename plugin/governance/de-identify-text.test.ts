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

/** The turn's time in these tests: the patient is 68, and 2024's dates are far from it. */
export const TURN_TIME = new Date('2026-11-28T10:00:00Z');

describe('Pseudonymizer', () => {
  const pseudonyms = new Pseudonymizer(IDENTIFIED_PATIENT, -100, TURN_TIME);

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
    // The birth date is sent as the age, in every form; other dates are moved.
    expect(sent).toContain('[GIVEN-1] [FAMILY-2] ([given-1] [family-2], [FAMILY-1], Ms. [FAMILY-3]), born [age 68] or [age 68] or [age 68].');
    expect(sent).toContain('IL');
  });

  test('keeps what is not the patient\'s: other names, clinical words, other numbers', () => {
    const text = 'Dr. Alice Carter prescribed Lisinopril 10 mg; HbA1c 6.1 %, heart rate 72 /min, 3 times a day.';
    expect(pseudonyms.deIdentify(text)).toBe(text);
  });

  test('maps pseudonyms, markers and shifted dates back, a name written in lower case as it was written', () => {
    const reply = 'Ms. [FAMILY-2] ([GIVEN-1]), born [age 68], can reach [given-1] at [PHONE-1]; seen November 25, 2023, [today] and [3 days ago]. [UNKNOWN-3] and [age 50] stay.';
    expect(pseudonyms.reIdentify(reply)).toBe(
      'Ms. López (María), born 1958-03-14, can reach maría at +1 (555) 010-0199; seen March 4, 2024, 2026-11-28 and 2026-11-25. [UNKNOWN-3] and [age 50] stay.'
    );
  });

  test('finds the variants people and systems write: names run together, user names, numbers alone, abbreviations, the id without hyphens', () => {
    const variants: [string, string][] = [
      ['MariaLopez', '[GIVEN-1][FAMILY-2]'],
      ['maria_lopez-garcia', '[given-1]_[family-1]'],
      ['LopezMaria', '[FAMILY-2][GIVEN-1]'],
      ['mlopez@hospital.org', 'm[family-2]@hospital.org'],
      ['maria.lopez58@mail.example', '[given-1].[family-2]58@mail.example'],
      ['19580314', '[age 68]'],
      ['14-Mar-58', '[age 68]'],
      ['03/14/58', '[age 68]'],
      ['14031958 or 58-03-14', '[age 68] or [age 68]'],
      ["Mar 14, '58", '[age 68]'],
      ['Mar 14, 1958', '[age 68]'],
      ['12 Elm St', '[ADDRESS-1]'],
      ['12 elm st.', '[address-1].'],
      ['Elm Street', '[ADDRESS-2]'],
      ['Apartment 4B', '[ADDRESS-3]'],
      ['004512', '[ID-3]'],
      ['SSN123456789', 'SSN[ID-2]'],
      ['call_123456789', 'call_[ID-2]'],
      [IDENTIFIED_PATIENT.id.replaceAll('-', ''), '[PATIENT-1]'],
      [IDENTIFIED_PATIENT.id.toUpperCase(), '[PATIENT-1]'],
      ['IL62704', 'IL[POSTCODE-1]'],
    ];
    for (const [written, sent] of variants) {
      expect([written, pseudonyms.deIdentify(written)]).toEqual([written, sent]);
    }
    // Back for the caller, consistently: what stands for a name part comes back as written, the rest as the record holds it.
    expect(pseudonyms.reIdentify('[GIVEN-1][FAMILY-2], m[family-2]@hospital.org, [ADDRESS-1], [ID-3], [PATIENT-1]')).toBe(
      `MaríaLópez, mlópez@hospital.org, 12 Elm Street, 004512, ${IDENTIFIED_PATIENT.id}`
    );
  });

  test('dates a provider could tie to the present reach it as their distance from the turn, never on the shifted calendar', () => {
    const sent = pseudonyms.deIdentify('Today is 2026-11-28 (Saturday, November 28, 2026). BP 2026-11-28T09:47:00Z, 11/27/2026, Nov 20, 2026, next visit 2026-12-05; HbA1c 2026-08-01.');
    expect(sent).toBe('Today is [today] (Saturday, [today]). BP [today]T09:47:00Z, [yesterday], [8 days ago], next visit [in 7 days]; HbA1c 2026-04-23.');
    expect(pseudonyms.reIdentify(sent)).toBe('Today is 2026-11-28 (Saturday, 2026-11-28). BP 2026-11-28T09:47:00Z, 2026-11-27, 2026-11-20, next visit 2026-12-05; HbA1c 2026-08-01.');
  });

  test('what it does not catch, as docs/governance.md lists it', () => {
    const missed = [
      'SSN ending 6789',
      'MRN 4512',
      'Mary Lopes',
      'M.L.',
      'www.lopezfamily.example',
      'born in 1958',
      'seen 04/03/2024',
      'seen 05-Jan-24',
      'since 2024-03',
      'at 1795832400',
      '12 Elm',
      'five five five, zero one zero, zero one nine nine',
    ];
    for (const text of missed) {
      expect([text, pseudonyms.deIdentify(text)]).toEqual([text, text]);
    }
  });

  test('the age: in months under two, grouped from 90 on (Safe Harbor)', () => {
    const age = (birthDate: string): string => new Pseudonymizer({ resourceType: 'Patient', birthDate }, -100, TURN_TIME).deIdentify(`born ${birthDate}`);
    expect(age('2025-09-30')).toBe('born [age 13 months]');
    expect(age('2026-10-28')).toBe('born [age 1 month]');
    expect(age('1936-11-29')).toBe('born [age 89]');
    expect(age('1936-11-28')).toBe('born [age 90+]');
    expect(age('1900-01-01')).toBe('born [age 90+]');
  });

  test('a name or an id that holds an identifier becomes one a function or a call takes; others stay as they are', () => {
    expect(pseudonyms.deIdentifyName('lookup_MariaLopez')).toBe('lookup_GIVEN-1FAMILY-2');
    expect(pseudonyms.deIdentifyName('call_123456789')).toBe('call_ID-2');
    expect(pseudonyms.deIdentifyName('get_labs_2026-11-27')).toBe('get_labs_yesterday');
    expect(pseudonyms.deIdentifyName('get_labs')).toBe('get_labs');
    // Spaces and dots are what such a field refuses; a name is cut at 64 characters.
    expect(pseudonyms.deIdentifyName('notes for Maria Lopez.v2')).toBe('notes_for_GIVEN-1_FAMILY-2_v2');
    const long = pseudonyms.deIdentifyName(`summarise_the_chart_of_MariaLopez_${'x'.repeat(60)}`);
    expect(long).toBe(`summarise_the_chart_of_GIVEN-1FAMILY-2_${'x'.repeat(25)}`);
    expect(long).toHaveLength(64);
    // A name holding nothing of the patient's is the client's own, character for character, whatever it holds.
    expect(pseudonyms.deIdentifyName('chart.lookup v2')).toBe('chart.lookup v2');
  });

  test('the keys of objects are de-identified with their values (schemas, metadata)', () => {
    expect(pseudonyms.deIdentifyStrings({ properties: { maria_lopez_ssn: { type: 'string', description: 'SSN 123-45-6789' } }, required: ['maria_lopez_ssn'] })).toEqual({
      properties: { '[given-1]_[family-2]_ssn': { type: 'string', description: 'SSN [ID-2]' } },
      required: ['[given-1]_[family-2]_ssn'],
    });
  });

  test('numbers, booleans and nulls of a schema or metadata go as they are', () => {
    const schema = { type: 'object', properties: { dose_mg: { type: 'number', minimum: 0, default: null } }, additionalProperties: false, maxProperties: 3 };
    expect(pseudonyms.deIdentifyStrings(schema)).toEqual(schema);
    expect(pseudonyms.deIdentifyStrings([1, true, null, 'Maria'])).toEqual([1, true, null, '[GIVEN-1]']);
  });

  test('restores into JSON as JSON: a value is escaped for the string it lands in', () => {
    const quoted = new Pseudonymizer({ resourceType: 'Patient', name: [{ family: 'O"Brien' }] }, -30, TURN_TIME);
    const sent = quoted.deIdentify('{"name":"O\\"Brien"}');
    expect(JSON.parse(quoted.reIdentify(quoted.deIdentify('{"q":"[FAMILY-1]"}'), true))).toEqual({ q: 'O"Brien' });
    expect(sent).not.toContain('Brien');
    // A reply is text unless the caller says it is JSON: the name comes back as written, unescaped.
    expect(quoted.reIdentify('Dear Mr. [FAMILY-1],')).toBe('Dear Mr. O"Brien,');
  });

  test('a tool result loses the patient\'s photo, and its markup stays escaped', () => {
    const result = JSON.stringify({ records: [{ ...IDENTIFIED_PATIENT, photo: [{ contentType: 'image/png', data: 'iVBORw0KGgo=' }], note: '\u003cb\u003e' }], next: null })
      .replaceAll('<', '\\u003c')
      .replaceAll('>', '\\u003e');
    const sent = pseudonyms.deIdentifyToolResult(result);
    expect(sent).not.toContain('iVBORw0KGgo');
    expect(sent).not.toMatch(/[<>]/);
    // The rest is the result as it was, de-identified: lists stay lists, the markup reads back as written.
    const { records, next } = JSON.parse(sent) as { records: Record<string, unknown>[]; next: unknown };
    expect(Array.isArray(records)).toBe(true);
    expect(records[0]).not.toHaveProperty('photo');
    expect(records[0].name).toEqual([{ given: ['[GIVEN-1]', '[GIVEN-2]'], family: '[FAMILY-1]', text: '[GIVEN-1] [GIVEN-2] [FAMILY-1]' }]);
    expect(records[0].note).toBe('<b>');
    expect(next).toBeNull();
    // A result without a photo is de-identified as it is.
    expect(pseudonyms.deIdentifyToolResult('{"note":"Maria \\u003cb\\u003e"}')).toBe('{"note":"[GIVEN-1] \\u003cb\\u003e"}');
    // Text that only mentions a photo is de-identified as text.
    expect(pseudonyms.deIdentifyToolResult('No "photo" of Maria on file.')).toBe('No "photo" of [GIVEN-1] on file.');
  });

  test('an empty message stays empty, both ways', () => {
    expect(pseudonyms.deIdentify('')).toBe('');
    expect(pseudonyms.reIdentify('')).toBe('');
  });

  test('the same text gives the same result in every step of a turn', () => {
    const text = 'Maria was seen 2024-01-05.';
    expect(pseudonyms.deIdentify(text)).toBe(pseudonyms.deIdentify(text));
    expect(new Pseudonymizer(IDENTIFIED_PATIENT, -100, TURN_TIME).deIdentify(text)).toBe(pseudonyms.deIdentify(text));
  });
});
