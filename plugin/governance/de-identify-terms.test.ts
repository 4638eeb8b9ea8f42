import type { Patient } from '@medplum/fhirtypes';
import { fold, mayBeginPseudonym, PatientTerms } from './de-identify-terms.ts';

/** The pseudonymised text of `text` for a patient holding `record`. */
function sent(record: Omit<Patient, 'resourceType'>, text: string): string {
  return new PatientTerms({ resourceType: 'Patient', ...record }).replace(text);
}

/** Each text of `cases` as it is sent for `record`, beside it: a failure names the text. */
function sentEach(record: Omit<Patient, 'resourceType'>, cases: readonly string[]): [string, string][] {
  const terms = new PatientTerms({ resourceType: 'Patient', ...record });
  return cases.map((text) => [text, terms.replace(text)]);
}

/** The street words written in full and abbreviated (USPS and common British forms), as docs/governance.md lists them. */
const STREET_WORDS = [
  ['street', 'st', 'str'],
  ['avenue', 'ave', 'av'],
  ['road', 'rd'],
  ['boulevard', 'blvd'],
  ['drive', 'dr'],
  ['lane', 'ln'],
  ['court', 'ct'],
  ['place', 'pl'],
  ['square', 'sq'],
  ['terrace', 'ter', 'terr'],
  ['highway', 'hwy'],
  ['parkway', 'pkwy'],
  ['circle', 'cir'],
  ['crescent', 'cres'],
  ['heights', 'hts'],
  ['apartment', 'apt'],
  ['suite', 'ste'],
  ['building', 'bldg'],
  ['floor', 'fl'],
  ['north', 'n'],
  ['south', 's'],
  ['east', 'e'],
  ['west', 'w'],
  ['mount', 'mt'],
  ['saint', 'st'],
  ['fort', 'ft'],
];

describe('PatientTerms', () => {
  test('a phone, fax, SMS or pager number is found in any grouping, with or without its country code or trunk prefix', () => {
    const record = {
      telecom: [
        { system: 'fax' as const, value: '+44 20 7946 0958' },
        { system: 'sms' as const, value: '07700 900123' },
        { system: 'pager' as const, value: '555-0142' },
      ],
    };
    expect(sentEach(record, ['fax 020 7946 0958', 'fax +44 (20) 7946-0958', 'fax 2079460958', 'text 07700 900 123 or +447700900123', 'page 555 0142'])).toEqual([
      ['fax 020 7946 0958', 'fax [PHONE-1]'],
      ['fax +44 (20) 7946-0958', 'fax [PHONE-1]'],
      ['fax 2079460958', 'fax [PHONE-1]'],
      ['text 07700 900 123 or +447700900123', 'text [PHONE-2] or [PHONE-2]'],
      ['page 555 0142', 'page [PHONE-3]'],
    ]);
  });

  test('a phone number is not found inside a longer number, and one of fewer than 7 digits is not a term', () => {
    const record = { telecom: [{ system: 'phone' as const, value: '555-0142' }, { system: 'phone' as const, value: 'ext. 014' }, { system: 'phone' as const, value: '   ' }] };
    expect(sentEach(record, ['lot 5550142999', 'ref A5550142 and 55501420', 'ext. 014', 'call 555-0142', 'call 5550142ext. 3'])).toEqual([
      ['lot 5550142999', 'lot 5550142999'],
      ['ref A5550142 and 55501420', 'ref A5550142 and 55501420'],
      ['ext. 014', 'ext. 014'],
      ['call 555-0142', 'call [PHONE-1]'],
      ['call 5550142ext. 3', 'call [PHONE-1]ext. 3'],
    ]);
  });

  test('an e-mail address is an EMAIL wherever the record files it, any other contact point a CONTACT', () => {
    const record = {
      telecom: [
        { system: 'email' as const, value: 'Maria <maria@example.org>' },
        { system: 'other' as const, value: 'mlopez@chat.example' },
        { system: 'other' as const, value: 'skype: maria@skype' },
        { system: 'url' as const, value: 'https://lopez.example/maria' },
        { value: 'maria@home (evenings)' },
      ],
    };
    const terms = new PatientTerms({ resourceType: 'Patient', ...record });
    expect(terms.replace('Write to Maria <maria@example.org> or mlopez@chat.example; skype: maria@skype; https://lopez.example/maria; maria@home (evenings).')).toBe(
      'Write to [EMAIL-1] or [EMAIL-2]; [CONTACT-1]; [CONTACT-2]; [CONTACT-3].'
    );
    // Not inside a longer address.
    expect(terms.replace('amlopez@chat.example, mlopez@chat.examples')).toBe('amlopez@chat.example, mlopez@chat.examples');
  });

  test("a contact's name, phone and address are found, and a name she shares with a contact has one pseudonym", () => {
    const record = {
      name: [{ given: ['Maria'], family: 'Lopez' }],
      contact: [
        { name: { given: ['Carlos'], family: 'Lopez' }, telecom: [{ system: 'phone' as const, value: '555-0177' }], address: { line: ['8 Oak Road'], city: 'Shelbyville' } },
        { name: { family: 'Ruiz' }, telecom: [{ system: 'email' as const, value: 'ana@example.org' }] },
        { telecom: [{ system: 'pager' as const, value: '555-0199' }] },
      ],
    };
    expect(sent(record, 'Carlos Lopez (husband), 555 0177, 8 Oak Rd, Shelbyville; Ruiz, ana@example.org; 555 0199; Maria Lopez')).toBe(
      '[NAME-1] [FAMILY-1] (husband), [PHONE-1], [ADDRESS-1], [CITY-1]; [NAME-2], [EMAIL-1]; [PHONE-2]; [GIVEN-1] [FAMILY-1]'
    );
  });

  test("the name as the record writes it in full is searched word by word: a name she goes by is found too", () => {
    const record = { name: [{ given: ['Robert'], family: 'Smith', text: 'Bob Smith, Jr' }] };
    expect(sent(record, 'Bob Smith called; Robert Smith is well; Jr stays')).toBe('[NAME-1] [FAMILY-1] called; [GIVEN-1] [FAMILY-1] is well; Jr stays');
  });

  test('each part of a compound name is found alone, a short particle is not; a one-letter name is no term', () => {
    const record = { name: [{ given: ['Mary Ann', ' J'], family: 'de la Cruz' }] };
    expect(sentEach(record, ['Mary Ann', 'Ann', 'Mary', 'Cruz', 'de la Cruz', 'la de', 'J. Cruz'])).toEqual([
      ['Mary Ann', '[GIVEN-1]'],
      ['Ann', '[GIVEN-3]'],
      ['Mary', '[GIVEN-2]'],
      ['Cruz', '[FAMILY-2]'],
      ['de la Cruz', '[FAMILY-1]'],
      ['la de', 'la de'],
      ['J. Cruz', 'J. [FAMILY-2]'],
    ]);
  });

  test('a name is not found inside a longer word, and a two-letter name only as a word of its own', () => {
    const record = { name: [{ given: ['Ann', ' Li '], family: 'Hale' }] };
    expect(sentEach(record, ['Annual review', 'Joanne', 'Lisinopril', 'li58', 'Li 58', 'Hale-Smith', 'Ann58'])).toEqual([
      ['Annual review', 'Annual review'],
      ['Joanne', 'Joanne'],
      ['Lisinopril', 'Lisinopril'],
      ['li58', 'li58'],
      ['Li 58', '[GIVEN-2] 58'],
      ['Hale-Smith', '[FAMILY-1]-Smith'],
      ['Ann58', '[GIVEN-1]58'],
    ]);
  });

  test('only the family name follows her initials, one or two of them, and only hers', () => {
    const record = { name: [{ given: ['Maria', 'José'], family: 'Lopez' }] };
    expect(sentEach(record, ['mlopez', 'mjlopez', 'jlopez', 'rlopez', 'xmlopez', 'mjmlopez', 'jmaria'])).toEqual([
      ['mlopez', 'm[family-1]'],
      ['mjlopez', 'mj[family-1]'],
      ['jlopez', 'j[family-1]'],
      ['rlopez', 'rlopez'],
      ['xmlopez', 'xmlopez'],
      ['mjmlopez', 'mjmlopez'],
      ['jmaria', 'jmaria'],
    ]);
  });

  test('a name is found run together only with her other names, not with her other identifiers', () => {
    const record = { name: [{ given: ['Maria'], family: 'Lopez' }], address: [{ city: 'Springfield' }] };
    expect(sentEach(record, ['SpringfieldMaria', 'MariaSpringfield', 'LopezMaria'])).toEqual([
      ['SpringfieldMaria', 'SpringfieldMaria'],
      ['MariaSpringfield', 'MariaSpringfield'],
      ['LopezMaria', '[FAMILY-1][GIVEN-1]'],
    ]);
  });

  test('a name written in a script with accents is found in capitals without them', () => {
    const record = { name: [{ given: ['Άννα'], family: 'Παπαδοπούλου' }] };
    expect(sent(record, 'ΑΝΝΑ ΠΑΠΑΔΟΠΟΥΛΟΥ')).toBe('[GIVEN-1] [FAMILY-1]');
  });

  test('a combining mark with no composed form keeps every match in its place', () => {
    const record = { name: [{ given: ['Maria'], family: 'Lopez' }] };
    expect(sent(record, 'x\u0301 y\u0301 Maria Lopez.')).toBe('x\u0301 y\u0301 [GIVEN-1] [FAMILY-1].');
    // Characters outside the basic plane (two UTF-16 units) too.
    expect(sent(record, '👩‍⚕️ Maria Lopez 😀.')).toBe('👩‍⚕️ [GIVEN-1] [FAMILY-1] 😀.');
  });

  test('every street word of a line is found written in full or abbreviated, and a different street word is a different address', () => {
    for (const group of STREET_WORDS) {
      for (const held of group) {
        const terms = new PatientTerms({ resourceType: 'Patient', address: [{ line: [`12 Oak ${held}`] }] });
        for (const written of group) {
          expect([held, written, terms.replace(`at 12 Oak ${written.toUpperCase()}.`)]).toEqual([held, written, 'at [ADDRESS-1].']);
        }
      }
    }
    const terms = new PatientTerms({ resourceType: 'Patient', address: [{ line: ['12 Oak Street'] }] });
    expect(terms.replace('12 Oak Road, 12 Oak Lane, 12 Oak Strand')).toBe('12 Oak Road, 12 Oak Lane, 12 Oak Strand');
  });

  test("an address line is found with its abbreviations' periods, and without its house number only when a street follows", () => {
    const record = { address: [{ line: ['4 St. Mary Rd.', '12B Elm Street', 'Flat 3', 'B7 Birch Lane', '9 Elm,', 'Apt', '12 Broadway', ' 7 Ash Grove', 'P.O. Box 1234'] }] };
    expect(sentEach(record, ['4 Saint Mary Road', '4 St Mary Rd.', 'St. Mary Road', '12b elm st', 'Elm Street', 'Flat 3', 'Birch Lane', 'B7 Birch Lane', '9 Elm', 'Elm', 'Apt', 'Broadway', 'Ash Grove', 'P.O. Box 1234', 'Flat 3B'])).toEqual([
      ['4 Saint Mary Road', '[ADDRESS-1]'],
      ['4 St Mary Rd.', '[ADDRESS-1].'],
      ['St. Mary Road', '[ADDRESS-2]'],
      ['12b elm st', '[address-3]'],
      ['Elm Street', '[ADDRESS-4]'],
      ['Flat 3', '[ADDRESS-5]'],
      ['Birch Lane', 'Birch Lane'],
      ['B7 Birch Lane', '[ADDRESS-6]'],
      ['9 Elm', '[ADDRESS-7]'],
      ['Elm', 'Elm'],
      ['Apt', 'Apt'],
      ['Broadway', 'Broadway'],
      ['Ash Grove', '[ADDRESS-10]'],
      ['P.O. Box 1234', '[ADDRESS-11]'],
      ['Flat 3B', 'Flat 3B'],
    ]);
  });

  test("an address's text, city, district and postal code are found, each from its shortest length on", () => {
    const record = {
      address: [
        { text: 'Rose Cottage, Lower Slaughter', city: 'Rye', district: 'Kent', postalCode: 'TN31' },
        { city: 'Ay', district: 'Om', postalCode: 'E1', line: ['Apt'] },
      ],
    };
    expect(sentEach(record, ['Rose Cottage, Lower Slaughter', 'Rye, Kent TN31 7AA', 'tn 31', 'Ay Om E1'])).toEqual([
      ['Rose Cottage, Lower Slaughter', '[ADDRESS-1]'],
      ['Rye, Kent TN31 7AA', '[CITY-1], [CITY-2] [POSTCODE-1] 7AA'],
      ['tn 31', '[postcode-1]'],
      ['Ay Om E1', 'Ay Om E1'],
    ]);
  });

  test('an identifier is found by its letters and digits whatever separates them, from four of them on', () => {
    const record = { identifier: [{ value: 'AB-1234' }, { value: '9876-CD' }, { value: '123' }, { system: 'urn:no-value' }, { value: ' X77-12345 ' }] };
    expect(sentEach(record, ['AB 1234', 'ab1234', 'CAB1234', 'AB12340', '9876 cd', '9876CDE', '19876CD', '123', 'X77 12345', '12345', '512345'])).toEqual([
      ['AB 1234', '[ID-1]'],
      ['ab1234', '[id-1]'],
      ['CAB1234', 'CAB1234'],
      ['AB12340', 'AB12340'],
      ['9876 cd', '[id-2]'],
      ['9876CDE', '9876CDE'],
      ['19876CD', '19876CD'],
      ['123', '123'],
      ['X77 12345', '[ID-3]'],
      ['12345', '[ID-4]'],
      ['512345', '512345'],
    ]);
    // What a pseudonym reads back as: the identifier as the record holds it, without its spaces.
    expect(new PatientTerms({ resourceType: 'Patient', ...record }).restore('[ID-3], [ID-4]')).toBe('X77-12345, 12345');
  });

  test("the Patient's id is found with or without its hyphens, as a word", () => {
    const record = { id: 'a1b2-c3d4' };
    expect(sentEach(record, ['Patient/a1b2-c3d4', 'A1B2C3D4', 'xa1b2c3d4', 'a1b2c3d45'])).toEqual([
      ['Patient/a1b2-c3d4', 'Patient/[PATIENT-1]'],
      ['A1B2C3D4', '[PATIENT-1]'],
      ['xa1b2c3d4', 'xa1b2c3d4'],
      ['a1b2c3d45', 'a1b2c3d45'],
    ]);
  });

  test('a value the record holds in lower case, or a match without letters, gets its pseudonym in upper case', () => {
    const record = {
      name: [{ given: ['rose'] }],
      telecom: [{ system: 'email' as const, value: 'rose@example.org' }, { system: 'phone' as const, value: '555-0142 (Mobile)' }],
      identifier: [{ value: 'MRN-12345' }],
    };
    const terms = new PatientTerms({ resourceType: 'Patient', ...record });
    const text = terms.replace('rose, rose@example.org, 12345, mrn 12345, 555 0142');
    expect(text).toBe('[GIVEN-1], [EMAIL-1], [ID-2], [id-1], [PHONE-1]');
    expect(terms.restore(text)).toBe('rose, rose@example.org, 12345, mrn-12345, 555-0142 (Mobile)');
  });

  test('a value held with spaces around it (or a comma after it) is found as without them, and reads back without them', () => {
    const record = { name: [{ given: [' Maria '], family: 'Lopez' }], telecom: [{ system: 'phone' as const, value: ' 555-0142 ' }], address: [{ city: ' Rye ' }] };
    const terms = new PatientTerms({ resourceType: 'Patient', ...record });
    expect(terms.replace('mlopez')).toBe('m[family-1]');
    // A name part held with a comma after it is found without one.
    expect(sent({ name: [{ family: 'Lopez,' }] }, 'Ms Lopez')).toBe('Ms [FAMILY-1]');
    expect(terms.restore(terms.replace('Maria, 555 0142, Rye'))).toBe('Maria, 555-0142, Rye');
  });

  test('an identifier of four letters and digits is a term', () => {
    expect(sent({ identifier: [{ value: 'A-123' }] }, 'A123')).toBe('[ID-1]');
  });

  test('a pseudonym of what the record does not hold stands for nothing: a contact point without a value, a name without given names, an address without lines', () => {
    const record = {
      name: [{ family: 'Lopez' }],
      identifier: [{ value: 'ABCDE' }],
      telecom: [{ system: 'phone' as const }, { system: 'email' as const, value: '  ' }],
      address: [{ city: 'Rye' }],
    };
    const terms = new PatientTerms({ resourceType: 'Patient', ...record });
    expect(terms.replace('Lopez of Rye, ABCDE; slopez')).toBe('[FAMILY-1] of [CITY-1], [ID-1]; slopez');
    expect(terms.restore('[GIVEN-1] [ID-2] [PHONE-1] [EMAIL-1] [ADDRESS-1] [NAME-1]')).toBe('[GIVEN-1] [ID-2] [PHONE-1] [EMAIL-1] [ADDRESS-1] [NAME-1]');
  });

  test('a record with nothing identifying changes nothing', () => {
    expect(sent({ name: [{ given: ['J'] }], telecom: [{ system: 'phone', value: '123' }] }, 'J. called 123')).toBe('J. called 123');
    expect(sent({}, 'Maria Lopez')).toBe('Maria Lopez');
  });

  test('pseudonyms read back as the values, in lower case where the pseudonym is, up to four digits; others stay', () => {
    const record = { name: [{ given: ['Maria'], family: 'O"Brien' }], identifier: Array.from({ length: 10 }, (_, index) => ({ value: `MRN-${1000 + index}` })) };
    const terms = new PatientTerms({ resourceType: 'Patient', ...record });
    expect(terms.restore('[GIVEN-1] [given-1] [Given-1] [FAMILY-1] [ID-10] [ID-11] [ID-00010] [UNKNOWN-1] [GIVEN1] GIVEN-1')).toBe(
      'Maria maria Maria O"Brien MRN-1009 [ID-11] [ID-00010] [UNKNOWN-1] [GIVEN1] GIVEN-1'
    );
    expect(terms.restore('{"name":"[FAMILY-1]"}', true)).toBe('{"name":"O\\"Brien"}');
    expect(terms.restore('no pseudonyms')).toBe('no pseudonyms');
  });

  test('where whole pseudonyms are, and what may still become one at the end of a stream', () => {
    const terms = new PatientTerms({ resourceType: 'Patient' });
    const text = 'a [GIVEN-1] b [x-1234] [given-12345] [ID-] [GIVEN-1';
    expect(terms.spans(text)).toEqual([
      [2, 11],
      [14, 22],
    ]);
    const maybe = ['[', '[GIVEN', '[given-', '[ID-1', '[ID-1234', '[ABCDEFGHIJKL', '[-1'];
    const never = ['', 'x[', '[GIVEN-1]', '[GIVEN-12345', '[ABCDEFGHIJKLM', '[GIVEN1', '[GIVEN-1 ', '[GIVEN-x', '[1', ' ['];
    expect(maybe.filter((tail) => !mayBeginPseudonym(tail))).toEqual([]);
    expect(never.filter((tail) => mayBeginPseudonym(tail))).toEqual([]);
  });

  test('folding keeps one UTF-16 unit for one: lower case, accents removed, other characters as they are', () => {
    expect(fold('MARÍA José')).toBe('maria jose');
    expect(fold('ABC')).toBe('abc');
    const odd = 'x\u0301 😀 ß İ';
    expect(fold(odd)).toHaveLength(odd.length);
    expect(fold(odd)).toBe('x\u0301 😀 ß i');
  });
});
