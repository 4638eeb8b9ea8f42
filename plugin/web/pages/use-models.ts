/** The models the signed-in user may chat with (`GET /v1/models`), or why they could not be listed. */
import { useMedplum } from '@medplum/react';
import { useEffect, useState } from 'react';
import { fhirgateFetch } from '../fhirgate-api.ts';

export interface ModelsState {
  readonly models: readonly string[] | undefined;
  readonly error: string | undefined;
}

export function useModels(): ModelsState {
  const medplum = useMedplum();
  const [state, setState] = useState<ModelsState>({ models: undefined, error: undefined });
  useEffect(() => {
    let current = true;
    fhirgateFetch(medplum, 'v1/models')
      .then((response) => response.json() as Promise<{ data: { id: string }[] }>)
      .then((list) => current && setState({ models: list.data.map((model) => model.id), error: undefined }))
      .catch((error: unknown) => current && setState({ models: [], error: (error as Error).message }));
    return () => {
      current = false;
    };
  }, [medplum]);
  return state;
}
