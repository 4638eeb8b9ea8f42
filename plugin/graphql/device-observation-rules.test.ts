import { describe, expect, test } from '@jest/globals';
import { AppError } from '../errors.ts';
import { checkWhatItIsAbout } from './device-observation-rules.ts';
import type { DeviceCaller } from './device-write-guard.ts';

const assigned: DeviceCaller = { deviceId: 'device-001', deviceResourceId: 'dev-res-1', identifierSystem: 'urn:example:devices', assignedPatient: 'Patient/p-1' };
const unassigned: DeviceCaller = { ...assigned, assignedPatient: undefined };

function observation(fields: Record<string, unknown> = {}): Record<string, unknown> {
  return { status: 'final', code: { text: 'pulse' }, device: { identifier: { system: 'urn:example:devices', value: 'device-001' }, reference: 'Device/dev-res-1' }, ...fields };
}

function refusal(fields: Record<string, unknown>, device: DeviceCaller = assigned): string {
  try {
    checkWhatItIsAbout(observation(fields), device, 'ObservationCreate');
  } catch (error) {
    if (AppError.isInstance(error) && error.code === 'forbidden') {
      return error.message;
    }
    throw error;
  }
  throw new Error('expected a forbidden AppError');
}

describe('checkWhatItIsAbout: what a device may write about', () => {
  test.each([
    ['no subject', {}, assigned],
    ['a null subject', { subject: null }, assigned],
    ['its assigned patient', { subject: { reference: 'Patient/p-1' } }, assigned],
    ['its assigned patient, with type and display', { subject: { reference: 'Patient/p-1', type: 'Patient', display: 'Maria Lopez' } }, assigned],
    ['itself', { subject: { reference: 'Device/dev-res-1' } }, assigned],
    ['itself, with no patient assigned', { subject: { reference: 'Device/dev-res-1' } }, unassigned],
    ['no subject, with no patient assigned', {}, unassigned],
    ['the meta a client may set', { meta: { profile: ['http://hl7.org/fhir/StructureDefinition/heartrate'], tag: [{ code: 'x' }], security: [{ code: 'N' }], source: 'urn:monitor' } }, assigned],
    ['components, notes and extensions without references', { component: [{ code: { text: 'a' }, valueQuantity: { value: 1 } }], note: [{ text: 'calm' }], extension: [{ url: 'u', valueString: 'v' }] }, assigned],
  ])('%s is allowed', (_name, fields, device) => {
    expect(() => checkWhatItIsAbout(observation(fields), device, 'ObservationCreate')).not.toThrow();
  });
});

describe('checkWhatItIsAbout: refusals, each naming what to change', () => {
  test('another patient, or a patient when none is assigned, names what the device may write about', () => {
    expect(refusal({ subject: { reference: 'Patient/p-2' } })).toBe(
      'ObservationCreate: subject must be the patient this device is assigned to (its Device.patient), the device itself (Device/dev-res-1), or absent.',
    );
    expect(refusal({ subject: { reference: 'Patient/p-1' } }, unassigned)).toBe(
      'ObservationCreate: this device is assigned to no patient of its project (Device.patient), so subject must be the device itself (Device/dev-res-1) or absent.',
    );
  });

  test.each([
    ['a Group', { reference: 'Group/g-1' }],
    ['a Location', { reference: 'Location/l-1' }],
    ['another Device', { reference: 'Device/dev-res-2' }],
    ['an absolute URL of the assigned patient', { reference: 'http://example.org/fhir/R4/Patient/p-1' }],
    ['a version of the assigned patient', { reference: 'Patient/p-1/_history/1' }],
    ['a search', { reference: 'Patient?identifier=urn:mrn|1' }],
  ])('a subject that is %s is refused', (_name, subject) => {
    expect(refusal({ subject })).toMatch(/^ObservationCreate: subject must be the patient this device is assigned to/);
  });

  test.each([
    ['an identifier only', { identifier: { system: 'urn:mrn', value: '1' } }],
    ['the assigned patient plus an identifier', { reference: 'Patient/p-1', identifier: { system: 'urn:mrn', value: '2' } }],
    ['an extension beside the reference', { reference: 'Patient/p-1', extension: [{ url: 'u', valueReference: { reference: 'Patient/p-2' } }] }],
    ['a string', 'Patient/p-1'],
    ['a display and no reference', { display: 'Maria Lopez' }],
    ['a reference that is not a string', { reference: 42 }],
    ['a list', [{ reference: 'Patient/p-1' }]],
  ])('a subject with %s is refused as not a plain reference', (_name, subject) => {
    expect(refusal({ subject })).toMatch(/^ObservationCreate: subject must be a reference \(subject.reference\) with nothing beside it but type and display; /);
  });

  test('a subject whose type contradicts its reference is refused', () => {
    expect(refusal({ subject: { reference: 'Patient/p-1', type: 'Group' } })).toBe('ObservationCreate: subject.type must be the type subject.reference names.');
  });

  test.each(['project', 'author', 'account', 'accounts', 'compartment', 'onBehalfOf', 'versionId', 'lastUpdated', 'deleted', 'extension'])(
    'meta.%s is refused by name',
    (field) => {
      expect(refusal({ meta: { [field]: field === 'accounts' || field === 'compartment' ? [{ reference: 'Patient/p-2' }] : { reference: 'Patient/p-2' } } })).toBe(
        `ObservationCreate: a device may not set meta.${field}; of meta it may set only profile, tag, security and source, the server sets the rest.`,
      );
    },
  );

  test.each(['performer', 'focus', 'encounter', 'basedOn', 'partOf', 'specimen', 'hasMember', 'derivedFrom', 'contained'])('%s is refused by name, whatever it holds', (field) => {
    expect(refusal({ subject: { reference: 'Patient/p-1' }, [field]: [{ identifier: { value: 'x' } }] })).toBe(
      `ObservationCreate: a device may not set ${field}; its Observations refer only to their device and their subject.`,
    );
  });

  test('a reference anywhere else is refused with its path', () => {
    expect(refusal({ note: [{ text: 'x', authorReference: { reference: 'Patient/p-2' } }] })).toBe(
      "ObservationCreate: note[0].authorReference is a reference; a device's Observation refers only to its device and its subject.",
    );
    expect(refusal({ extension: [{ url: 'u', extension: [{ url: 'v', valueReference: { display: 'someone' } }] }] })).toMatch(/extension\[0\]\.extension\[0\]\.valueReference is a reference/);
    expect(refusal({ identifier: [{ value: '1', assigner: { reference: 'Organization/o-1' } }] })).toMatch(/identifier\[0\]\.assigner\.reference is a reference/);
  });

  test('a value nested 100,000 levels deep is walked without overflowing the stack, its path kept short', () => {
    let deep: unknown = { reference: 'Patient/p-2' };
    for (let level = 0; level < 100_000; level += 1) {
      deep = { extension: [deep] };
    }
    const message = refusal({ extension: [deep] });
    expect(message).toMatch(/is a reference; a device's Observation refers only/);
    expect(message.length).toBeLessThan(400);
  });
});

describe('checkWhatItIsAbout: what is not a reference, and how refusals are quoted', () => {
  test.each([
    ['reference fields left empty (null)', { performer: null, focus: null, note: [{ text: 'x', authorReference: null }], extension: [{ url: 'u', valueReference: null }] }],
    ['meta fields the server sets, left empty (null)', { meta: { versionId: null, project: null, profile: ['p'] } }],
    ['a null meta', { meta: null }],
    ['a subject whose type names what its reference names', { subject: { reference: 'Device/dev-res-1', type: 'Device' } }],
    ['a field whose name only contains "Reference"', { extension: [{ url: 'u', valueString: 'referenceRange', Referenced: { text: 'x' } }], referenceRange: [{ text: 'normal' }] }],
  ])('%s is allowed', (_name, fields) => {
    expect(() => checkWhatItIsAbout(observation(fields), assigned, 'ObservationCreate')).not.toThrow();
  });

  test.each([
    ['a string', 'x'],
    ['a list', [{ profile: ['p'] }]],
  ])('a meta that is %s is refused', (_name, meta) => {
    expect(refusal({ meta })).toBe('ObservationCreate: meta must be an object.');
  });

  test('a long field name is quoted as its first 64 characters, in meta and in a path', () => {
    const long = 'x'.repeat(100);
    const metaRefusal = refusal({ meta: { [long]: 'v' } });
    expect(metaRefusal).toContain(`meta.${long.slice(0, 64)};`);
    const pathRefusal = refusal({ [long]: { [`${long}Reference`]: { display: 'someone' } } });
    expect(pathRefusal).toContain(`: ${long.slice(0, 64)}.${long.slice(0, 64)} is a reference`);
  });

  test('a path is written out to 120 characters and no further', () => {
    let deep: unknown = { valueReference: { display: 'someone' } };
    for (let level = 0; level < 40; level += 1) {
      deep = { extension: [deep] };
    }
    const message = refusal({ extension: [deep] });
    const path = message.slice('ObservationCreate: '.length, message.indexOf(' is a reference'));
    expect(path.startsWith('extension[0].extension[0]')).toBe(true);
    expect(path.length).toBeGreaterThanOrEqual(120);
    expect(path.length).toBeLessThan(120 + 'extension'.length + 2);
  });
});
