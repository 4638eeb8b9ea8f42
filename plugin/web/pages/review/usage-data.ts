/**
 * The usage tab's data: the report of this month so far by user, model and day (`GET /v1/usage`, the replies the
 * signed-in user may read), and the display names of its users, each read with the user's own access (a name they
 * may not read stays the reference).
 */
import { formatHumanName } from '@medplum/core';
import type { HumanName, Reference } from '@medplum/fhirtypes';
import { useMedplum } from '@medplum/react';
import { useEffect, useState } from 'react';
import { fhirgateFetch } from '../../fhirgate-api.ts';
import type { UsageReport } from './usage-report.ts';

export interface UsageState {
  readonly report: UsageReport | undefined;
  readonly error: string | undefined;
}

export function useUsageReport(): UsageState {
  const medplum = useMedplum();
  const [state, setState] = useState<UsageState>({ report: undefined, error: undefined });
  useEffect(() => {
    let current = true;
    fhirgateFetch(medplum, 'v1/usage?group_by=user,model,day')
      .then((response) => response.json() as Promise<UsageReport>)
      .then((report) => current && setState({ report, error: undefined }))
      .catch((error: unknown) => current && setState({ report: undefined, error: (error as Error).message }));
    return () => {
      current = false;
    };
  }, [medplum]);
  return state;
}

/** The names of `references` (`Practitioner/…`, `ClientApplication/…`), read as the user; the reference itself until read, or when unreadable. */
export function useDisplayNames(references: readonly string[]): ReadonlyMap<string, string> {
  const medplum = useMedplum();
  const [names, setNames] = useState<ReadonlyMap<string, string>>(new Map());
  const key = [...new Set(references)].sort().join('\n');
  useEffect(() => {
    let current = true;
    const wanted = key === '' ? [] : key.split('\n');
    Promise.all(
      wanted.map(async (reference): Promise<[string, string]> => {
        try {
          const resource = (await medplum.readReference({ reference } as Reference)) as { name?: HumanName[] | string };
          const name = typeof resource.name === 'string' ? resource.name : resource.name?.[0] ? formatHumanName(resource.name[0]) : '';
          return [reference, name || reference];
        } catch {
          return [reference, reference];
        }
      })
    )
      .then((entries) => current && setNames(new Map(entries)))
      .catch(() => undefined);
    return () => {
      current = false;
    };
  }, [medplum, key]);
  return names;
}
