/**
 * The models the signed-in user may chat with (`GET /v1/models`), each with what a turn about a patient does on it
 * (`fhirgate.patient_data`: `cleared`, `de-identified` or `refused`), or why they could not be listed.
 */
import { useMedplum } from '@medplum/react';
import { useEffect, useState } from 'react';
import { fhirgateFetch } from '../fhirgate-api.ts';

export type PatientData = 'cleared' | 'de-identified' | 'refused';

export interface Model {
  readonly id: string;
  readonly patientData: PatientData | undefined;
}

export interface ModelsState {
  readonly models: readonly Model[] | undefined;
  readonly error: string | undefined;
}

interface ModelList {
  readonly data: readonly { readonly id: string; readonly fhirgate?: { readonly patient_data?: PatientData } }[];
}

export function useModels(): ModelsState {
  const medplum = useMedplum();
  const [state, setState] = useState<ModelsState>({ models: undefined, error: undefined });
  useEffect(() => {
    let current = true;
    fhirgateFetch(medplum, 'v1/models')
      .then((response) => response.json() as Promise<ModelList>)
      .then((list) => current && setState({ models: list.data.map((model) => ({ id: model.id, patientData: model.fhirgate?.patient_data })), error: undefined }))
      .catch((error: unknown) => current && setState({ models: [], error: (error as Error).message }));
    return () => {
      current = false;
    };
  }, [medplum]);
  return state;
}

/** What the picker says of a model, for a clinician. */
export const PATIENT_DATA_LABEL: Readonly<Record<PatientData, string>> = {
  cleared: 'patient data: sent as it is',
  'de-identified': 'patient data: de-identified first',
  refused: 'patient data: not allowed',
};
