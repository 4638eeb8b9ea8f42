/**
 * The standalone host's partial FHIR engine (`HostFhirEngine.createPartialRouter`): a second copy of Medplum's
 * `@medplum/core` and `@medplum/fhir-router` whose definitions index holds every data type and search parameter the
 * host's own index holds, but of the resource types only those asked for. Medplum's GraphQL schema is built over
 * every resource type the index lists, all at once (~30,900 types, about 4 s and 500 MB here); over Observation
 * alone Medplum's same code builds it in ~70 ms, with the same Observation types, inputs, root fields and resolvers.
 *
 * The second copy is the packages' CommonJS builds, which Node loads as modules of their own, with an index of
 * their own, beside the ES modules the host runs on. Nothing of the host's own index or engine changes. The copy
 * is made once per process, on first use (about 0.7 s: the definition bundles read again, and ~7 MB kept).
 */
import { createRequire } from 'node:module';
import type { FhirRouter } from '@medplum/fhir-router';
import { indexFhirDefinitions } from './fhir-definitions.ts';

type MedplumCore = typeof import('@medplum/core');
type MedplumFhirRouter = typeof import('@medplum/fhir-router');

/** The copy made in this process, and the resource types its index holds. */
let partialEngine: { readonly resourceTypes: string; readonly routerModule: MedplumFhirRouter } | undefined;

/** A router of the partial engine over `resourceTypes`; every call of a process must ask for the same types. */
export function createPartialRouter(resourceTypes: readonly string[]): FhirRouter {
  const key = [...new Set(resourceTypes)].sort().join(',');
  if (!partialEngine) {
    const require = createRequire(import.meta.url);
    const core = require('@medplum/core') as MedplumCore;
    const routerModule = require('@medplum/fhir-router') as MedplumFhirRouter;
    indexFhirDefinitions(core, new Set(resourceTypes));
    partialEngine = { resourceTypes: key, routerModule };
  } else if (partialEngine.resourceTypes !== key) {
    // Medplum keeps one schema per copy, built once: a second set of types would need a copy of its own.
    throw new Error(`The partial FHIR engine holds ${partialEngine.resourceTypes}, not ${key}`);
  }
  return new partialEngine.routerModule.FhirRouter({ introspectionEnabled: false });
}
