/**
 * The same `ObservationCreate` in the two dialects: the spec's (`resource: $input`, `ObservationInput!`) that a
 * device posts to fhirgate's `/graphql`, and Medplum's (`res: $res`, `ObservationCreate!`, with `resourceType` and
 * the `device.reference` fhirgate's guard adds) posted to Medplum's `/fhir/R4/$graphql`. Both must store the same
 * Observation and answer the same data; `compareResults` checks that on one request each.
 */
import { isDeepStrictEqual } from 'node:util';
import type { Observation } from '@medplum/fhirtypes';
import { DEMO_DEVICE_ID, DEMO_DEVICE_RESOURCE_ID, DEMO_IDENTIFIER_SYSTEM, type DeviceHost } from './device-host.ts';

const SELECTION = '{ id status code { coding { system code } } valueQuantity { value unit } device { identifier { system value } } }';

/** The spec's mutation, as a device sends it. */
export const SPEC_MUTATION = `mutation CreateObservation($input: ObservationInput!) { ObservationCreate(resource: $input) ${SELECTION} }`;
/** The same mutation in Medplum's dialect. */
export const MEDPLUM_MUTATION = `mutation CreateObservation($res: ObservationCreate!) { ObservationCreate(res: $res) ${SELECTION} }`;

function observationInput(): Record<string, unknown> {
  return {
    status: 'final',
    code: { coding: [{ system: 'http://loinc.org', code: '8867-4' }] },
    valueQuantity: { value: 72, unit: 'beats/minute' },
    device: { identifier: { system: DEMO_IDENTIFIER_SYSTEM, value: DEMO_DEVICE_ID } },
  };
}

/** The JSON body of fhirgate's request. */
export function specBody(): string {
  return JSON.stringify({ query: SPEC_MUTATION, variables: { input: observationInput() } });
}

/** The JSON body of Medplum's request: what fhirgate's guard hands Medplum, written by hand. */
export function medplumBody(): string {
  const input = observationInput();
  const device = input.device as Record<string, unknown>;
  return JSON.stringify({
    query: MEDPLUM_MUTATION,
    variables: { res: { resourceType: 'Observation', ...input, device: { ...device, reference: `Device/${DEMO_DEVICE_RESOURCE_ID}` } } },
  });
}

/** What the comparison found. */
export interface ResultComparison {
  readonly identical: boolean;
  readonly detail: string;
}

/** Posts each body once, then reads both stored Observations back; compares them without `id` and `meta`. */
export async function compareResults(host: DeviceHost, deviceToken: string): Promise<ResultComparison> {
  const fhirgate = await postGraphql(`${host.url}graphql`, deviceToken, specBody());
  const medplum = await postGraphql(`${host.url}fhir/R4/$graphql`, host.clientToken, medplumBody());
  const fhirgateStored = await readObservation(host, fhirgate.id);
  const medplumStored = await readObservation(host, medplum.id);
  const sameData = isDeepStrictEqual(withoutIds(fhirgate.data), withoutIds(medplum.data));
  const sameStored = isDeepStrictEqual(withoutIds(fhirgateStored), withoutIds(medplumStored));
  const authors = `${fhirgateStored.meta?.author?.reference} / ${medplumStored.meta?.author?.reference}`;
  return {
    identical: sameData && sameStored,
    detail:
      `response data ${sameData ? 'identical' : 'DIFFERENT'} apart from the id; stored Observations ${sameStored ? 'identical' : 'DIFFERENT'} apart from ` +
      `id and meta (authors, fhirgate / Medplum: ${authors})`,
  };
}

async function postGraphql(url: string, token: string, body: string): Promise<{ id: string; data: Record<string, unknown> }> {
  const response = await fetch(url, { method: 'POST', headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${token}` }, body });
  const result = (await response.json()) as { data?: { ObservationCreate?: Record<string, unknown> }; errors?: unknown };
  const created = result.data?.ObservationCreate;
  if (!response.ok || result.errors || typeof created?.id !== 'string') {
    throw new Error(`${url}: HTTP ${response.status} ${JSON.stringify(result).slice(0, 500)}`);
  }
  return { id: created.id, data: created };
}

async function readObservation(host: DeviceHost, id: string): Promise<Observation> {
  const response = await fetch(`${host.url}fhir/R4/Observation/${id}`, { headers: { Authorization: `Bearer ${host.clientToken}` } });
  if (!response.ok) {
    throw new Error(`read Observation/${id}: HTTP ${response.status}`);
  }
  return (await response.json()) as Observation;
}

function withoutIds<T extends object>(value: T): Omit<T, 'id' | 'meta'> {
  const { id: _id, meta: _meta, ...rest } = value as T & { id?: unknown; meta?: unknown };
  return rest;
}
