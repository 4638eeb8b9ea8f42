/**
 * The usage tab's data: the report of this month so far by user, model and day (`GET /v1/usage`, the replies the
 * signed-in user may read), and the display names of its users, read with the user's own access (a name they may
 * not read stays the reference).
 */
import { formatHumanName, type MedplumClient } from '@medplum/core';
import type { HumanName, ResourceType } from '@medplum/fhirtypes';
import { useMedplum } from '@medplum/react';
import { useEffect, useState } from 'react';
import type { Period } from './review-searches.ts';
import { fhirgateFetch } from '../../fhirgate-api.ts';
import type { UsageReport } from './usage-report.ts';

export interface UsageState {
  readonly report: UsageReport | undefined;
  readonly error: string | undefined;
}

export function useUsageReport(period: Period = {}): UsageState {
  const medplum = useMedplum();
  const [state, setState] = useState<UsageState>({ report: undefined, error: undefined });
  const path = usagePath(period);
  useEffect(() => {
    let current = true;
    setState({ report: undefined, error: undefined });
    fhirgateFetch(medplum, path)
      .then((response) => response.json() as Promise<UsageReport>)
      .then((report) => current && setState({ report, error: undefined }))
      .catch((error: unknown) => current && setState({ report: undefined, error: (error as Error).message }));
    return () => {
      current = false;
    };
  }, [medplum, path]);
  return state;
}

/** The usage report's address for a period (UTC days, both included); without one, this month so far. */
export function usagePath(period: Period): string {
  const query = new URLSearchParams({ group_by: 'user,model,day' });
  if (period.from) {
    query.set('start', period.from);
  }
  if (period.to) {
    query.set('end', period.to);
  }
  return `v1/usage?${query.toString()}`;
}

/**
 * The names of `references` (`Practitioner/…`, `ClientApplication/…`), read as the user: one search per type and
 * 100 users (`_id=…`), so the server's access rules decide which names come back; a name the user may not read
 * stays the reference.
 */
export function useDisplayNames(references: readonly string[]): ReadonlyMap<string, string> {
  const medplum = useMedplum();
  const [names, setNames] = useState<ReadonlyMap<string, string>>(new Map());
  const key = [...new Set(references)].sort().join('\n');
  useEffect(() => {
    let current = true;
    const wanted = key === '' ? [] : key.split('\n');
    Promise.all(batchesOf(wanted).map(async ([resourceType, ids]) => readNames(medplum, resourceType, ids)))
      .then((found) => current && setNames(new Map(found.flat())))
      .catch(() => undefined);
    return () => {
      current = false;
    };
  }, [medplum, key]);
  return names;
}

const BATCH = 100;

/** The references' ids grouped by type, at most 100 a group. */
function batchesOf(references: readonly string[]): [string, string[]][] {
  const byType = new Map<string, string[]>();
  for (const reference of references) {
    const [resourceType, id] = reference.split('/');
    if (resourceType && id) {
      byType.set(resourceType, [...(byType.get(resourceType) ?? []), id]);
    }
  }
  return [...byType].flatMap(([resourceType, ids]) => Array.from({ length: Math.ceil(ids.length / BATCH) }, (_, index): [string, string[]] => [resourceType, ids.slice(index * BATCH, (index + 1) * BATCH)]));
}

async function readNames(medplum: MedplumClient, resourceType: string, ids: readonly string[]): Promise<[string, string][]> {
  try {
    const found = await medplum.searchResources(resourceType as ResourceType, { _id: ids.join(','), _count: String(ids.length) });
    return found.flatMap((resource): [string, string][] => {
      const name = (resource as { name?: HumanName[] | string }).name;
      const text = typeof name === 'string' ? name : name?.[0] ? formatHumanName(name[0]) : '';
      return text ? [[`${resourceType}/${resource.id ?? ''}`, text]] : [];
    });
  } catch {
    // A type the user may not search: the references stay as they are.
    return [];
  }
}
