/**
 * The patient a conversation is about, as Medplum shows a patient (`PatientHeader`): their name (a link to their
 * record in the app), birth date, age, gender and identifiers, read as the signed-in user.
 */
import type { Patient, Reference } from '@medplum/fhirtypes';
import { PatientHeader } from '@medplum/react';
import type { CSSProperties, JSX } from 'react';

// The header's labels are Mantine's gray 6, too faint on white for WCAG AA: here they take gray 7.
const READABLE_LABELS = { '--mantine-color-gray-6': 'var(--mantine-color-gray-7)' } as CSSProperties;

export function PatientBanner({ patient }: { readonly patient: Reference<Patient> }): JSX.Element {
  return (
    <section aria-label="Patient" style={READABLE_LABELS}>
      <PatientHeader patient={patient} />
    </section>
  );
}
