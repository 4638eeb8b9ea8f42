/**
 * A search of the patients the signed-in user may read, by name, birth date or identifier (`searchPatients`, run
 * by the server as the user), as Medplum's own autocomplete; one patient at a time.
 */
import { formatHumanName } from '@medplum/core';
import type { Patient } from '@medplum/fhirtypes';
import { Text } from '@mantine/core';
import { AsyncAutocomplete, useMedplum, type AsyncAutocompleteOption } from '@medplum/react';
import type { JSX, ReactNode } from 'react';
import { searchPatients } from './patient-search.ts';

export interface PatientPickerProps {
  readonly label: string;
  readonly description?: ReactNode;
  readonly onChange: (patient: Patient | undefined) => void;
  readonly disabled?: boolean;
}

export function PatientPicker({ label, description, onChange, disabled }: PatientPickerProps): JSX.Element {
  const medplum = useMedplum();
  return (
    <AsyncAutocomplete<Patient>
      label={label}
      // Mantine's dimmed description is too faint on white for WCAG AA.
      description={description && <Text span size="xs" c="gray.7">{description}</Text>}
      placeholder="Name, birth date or identifier"
      maxValues={1}
      clearable
      disabled={disabled}
      toOption={patientOption}
      loadOptions={(input, signal) => searchPatients(medplum, input, signal)}
      onChange={(patients) => onChange(patients[0])}
    />
  );
}

/** A patient as the picker lists them: their name, and their birth date to tell namesakes apart. */
function patientOption(patient: Patient): AsyncAutocompleteOption<Patient> {
  const name = patient.name?.[0] ? formatHumanName(patient.name[0]) : 'Unnamed patient';
  return { value: patient.id ?? '', label: patient.birthDate ? `${name}, born ${patient.birthDate}` : name, resource: patient };
}
