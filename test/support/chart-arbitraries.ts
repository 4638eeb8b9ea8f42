/**
 * fast-check generators of chart records (the types a chat turn reads, and Communications) and of searches over
 * them, drawn from small pools so that filters, AccessPolicy criteria and records meet often: the demo patients,
 * a device, the demo practitioner, references without a searchable value (display only, identifier only), codes
 * in different cases and systems, dates of every precision, and the searches a chat turn makes.
 */
import fc from 'fast-check';
import type { Reference, Resource } from '@medplum/fhirtypes';

/** The references records point at. */
export interface ReferencePool {
  /** `Patient/<id>`: the first two are in the caller's care team, the others not. */
  readonly patients: readonly string[];
  /** `Practitioner/<id>` of the caller. */
  readonly practitioner: string;
  /** `Device/<id>` of a monitor. */
  readonly device: string;
}

const OTHER_REFERENCES = ['Practitioner/someone-else', 'Device/other-monitor', 'Group/ward-7'];
const LOINC = 'http://loinc.org';
const CATEGORY_SYSTEM = 'urn:fhirgate:communication-category';
const DATES = ['2024', '2024-03', '2024-03-05', '2024-03-05T10:00:00Z', '2024-03-05T10:00:00+05:00', '2024-03-06T00:00:00.000Z', '2025-01-01T12:30:00Z'];

function references(pool: ReferencePool): fc.Arbitrary<Reference | undefined> {
  return fc.oneof(
    // Most records are about the first two patients (the caller's care team), so that policies let many through.
    { weight: 6, arbitrary: fc.constantFrom(pool.patients[0], pool.patients[1]).map((reference) => ({ reference })) },
    { weight: 4, arbitrary: fc.constantFrom(...pool.patients, pool.practitioner, pool.device, ...OTHER_REFERENCES).map((reference) => ({ reference })) },
    // No searchable reference: a value for :missing, none for subject=.
    { weight: 1, arbitrary: fc.constant({ display: 'Someone' }) },
    { weight: 1, arbitrary: fc.constant({ identifier: { system: 'urn:mrn', value: '42' } }) },
    { weight: 3, arbitrary: fc.constant(undefined) }
  );
}

const code = fc.oneof(
  fc.constantFrom('8867-4', '8480-6', '4548-4').map((value) => ({ coding: [{ system: LOINC, code: value }] })),
  fc.constant({ coding: [{ code: '8867-4' }], text: 'Heart rate' }),
  fc.constant({ text: 'Penicillin' })
);
const date = fc.option(fc.constantFrom(...DATES), { nil: undefined });
const status = (values: readonly string[]): fc.Arbitrary<string> => fc.constantFrom(...values);
const clinicalStatus = fc.option(
  fc.constantFrom('active', 'resolved', 'ACTIVE').map((value) => ({ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/condition-clinical', code: value }] })),
  { nil: undefined }
);
const communicationCategory = fc.oneof(
  fc.constantFrom('ai-prompt', 'ai-response', 'ai-conversation', 'AI-Prompt').map((value) => [{ coding: [{ system: CATEGORY_SYSTEM, code: value }] }]),
  fc.constant([{ coding: [{ code: 'ai-prompt' }] }]),
  fc.constant(undefined)
);

/** A record of one of the chart types or a Communication, without id or meta (the repository sets them). */
export function chartRecord(pool: ReferencePool): fc.Arbitrary<Resource> {
  const reference = references(pool);
  return fc.oneof(
    fc.record({
      resourceType: fc.constant('Observation' as const),
      status: status(['final', 'preliminary', 'amended']) as fc.Arbitrary<'final'>,
      code,
      subject: reference,
      performer: fc.option(fc.array(reference.filter((value): value is Reference => value !== undefined), { minLength: 1, maxLength: 2 }), { nil: undefined, freq: 2 }),
      device: fc.option(fc.constantFrom(pool.device, 'Device/other-monitor').map((value) => ({ reference: value })), { nil: undefined }),
      category: fc.option(fc.constant([{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/observation-category', code: 'vital-signs' }] }]), { nil: undefined }),
      effectiveDateTime: date,
    }),
    fc.record({ resourceType: fc.constant('Condition' as const), subject: reference.map((value) => value ?? { reference: pool.patients[0] }), clinicalStatus, recordedDate: date, code }),
    fc.record({
      resourceType: fc.constant('MedicationRequest' as const),
      status: status(['active', 'stopped', 'ACTIVE']) as fc.Arbitrary<'active'>,
      intent: fc.constant('order' as const),
      medicationCodeableConcept: fc.constant({ text: 'Lisinopril 10 mg' }),
      subject: reference.map((value) => value ?? { reference: pool.patients[1] }),
      authoredOn: date,
    }),
    fc.record({ resourceType: fc.constant('MedicationStatement' as const), status: status(['active', 'completed']) as fc.Arbitrary<'active'>, medicationCodeableConcept: fc.constant({ text: 'Metformin' }), subject: reference.map((value) => value ?? { reference: pool.patients[0] }), effectiveDateTime: date }),
    fc.record({
      resourceType: fc.constant('AllergyIntolerance' as const),
      patient: reference.map((value) => value ?? { reference: pool.patients[2] }),
      // Required unless entered in error (constraint ait-1).
      clinicalStatus: fc.constantFrom('active', 'inactive').map((value) => ({ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/allergyintolerance-clinical', code: value }] })),
      recordedDate: date,
    }),
    fc.record({
      resourceType: fc.constant('Communication' as const),
      status: status(['completed', 'in-progress', 'stopped']) as fc.Arbitrary<'completed'>,
      category: communicationCategory,
      subject: reference,
      sender: reference,
      recipient: fc.option(fc.array(reference.filter((value): value is Reference => value !== undefined), { minLength: 1, maxLength: 2 }), { nil: undefined }),
      partOf: fc.option(fc.constantFrom('Communication/c1', 'Communication/c2').map((value) => [{ reference: value }]), { nil: undefined }),
      sent: date,
    })
  ).map((record) => withoutUndefined(record) as Resource);
}

/** Searches: those a chat turn makes about a patient (patient-context.ts), and others drawn from the same pools. */
export function chartSearch(pool: ReferencePool): fc.Arbitrary<string> {
  const patient = fc.oneof({ weight: 4, arbitrary: fc.constantFrom(pool.patients[0], pool.patients[1]) }, { weight: 1, arbitrary: fc.constantFrom(...pool.patients, pool.patients[0].replace('Patient/', '')) });
  const anyReference = fc.constantFrom(...pool.patients, pool.practitioner, pool.device, ...OTHER_REFERENCES, `${pool.patients[0]},${pool.patients[1]}`);
  const window = fc.record({
    count: fc.option(fc.integer({ min: 0, max: 12 }), { nil: undefined }),
    offset: fc.option(fc.integer({ min: 0, max: 4 }), { nil: undefined, freq: 3 }),
    total: fc.boolean(),
  });
  const turn = fc.tuple(
    patient,
    fc.constantFrom(
      'Condition?clinical-status=active&_sort=-recorded-date',
      'MedicationRequest?status=active&_sort=-authoredon',
      'MedicationStatement?status=active',
      'AllergyIntolerance?',
      'Observation?_sort=-date',
      'Observation?code=http://loinc.org|8867-4&date=ge2024-03-05&_sort=-date'
    )
  ).map(([reference, query]) => `${query}${query.endsWith('?') ? '' : '&'}patient=${reference}`);
  const observation = searchOf(
    'Observation',
    fc.oneof(
      anyReference.map((value) => `subject=${value}`),
      patient.map((value) => `patient=${value}`),
      anyReference.map((value) => `performer=${value}`),
      fc.constantFrom('subject:missing=true', 'subject:missing=false', 'performer:missing=true', 'device:present=true', 'subject:not=' + pool.patients[0]),
      fc.constantFrom('status=final', 'status=FINAL,amended', 'status:not=final', 'code=8867-4', `code=${LOINC}|8480-6`, 'code=|8867-4', `code=${LOINC}|`, 'code=heart rate', 'category=vital-signs'),
      fc.constantFrom(...DATES).chain((value) => fc.constantFrom('', 'ge', 'le', 'gt', 'lt', 'sa', 'eb', 'ap').map((prefix) => `date=${prefix}${encodeURIComponent(value)}`)),
      fc.constantFrom('_id=abc', '_lastUpdated=ge2000-01-01')
    )
  );
  const communication = searchOf(
    'Communication',
    fc.oneof(
      anyReference.map((value) => `subject=${value}`),
      anyReference.map((value) => `sender=${value}`),
      anyReference.map((value) => `recipient=${value}`),
      fc.constantFrom('part-of=Communication/c1', 'subject:missing=true', 'category=ai-prompt', `category=${CATEGORY_SYSTEM}|ai-response`, 'category:not=ai-conversation', 'status=completed', 'sent=ge2024-03-05')
    )
  );
  const sort = fc.constantFrom('', '_sort=-_lastUpdated', '_sort=_id', '_sort=status', '_sort=-date', '_sort=date,-_lastUpdated');
  return fc.tuple(fc.oneof({ weight: 3, arbitrary: turn }, { weight: 2, arbitrary: observation }, { weight: 2, arbitrary: communication }), sort, window).map(([query, sortRule, { count, offset, total }]) => {
    const type = query.split('?')[0];
    // `date` sorts Observations only; other types keep their own sort or none.
    const extra = [type === 'Observation' || !sortRule.includes('date') ? sortRule : '', count === undefined ? '' : `_count=${count}`, offset === undefined ? '' : `_offset=${offset}`, total ? '_total=accurate' : ''];
    const own = query.includes('_sort=') ? extra.filter((part) => !part.startsWith('_sort=')) : extra;
    return [query, ...own.filter((part) => part !== '')].join('&').replace('?&', '?');
  });
}

/** A search of `resourceType` with up to two of `filter`. */
function searchOf(resourceType: string, filter: fc.Arbitrary<string>): fc.Arbitrary<string> {
  return fc.array(filter, { maxLength: 2 }).map((filters) => `${resourceType}?${filters.join('&')}`);
}

function withoutUndefined(record: object): object {
  return Object.fromEntries(Object.entries(record).filter(([, value]) => value !== undefined));
}
