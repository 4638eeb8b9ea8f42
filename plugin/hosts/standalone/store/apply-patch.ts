/** Applies a PATCH body to a resource the way Medplum's server does. */
import {
  OperationOutcomeError,
  applyPatch,
  badRequest,
  fhirpathPatchTypedValue,
  normalizeOperationOutcome,
  parseFhirPathPatchParameters,
  toTypedValue,
} from '@medplum/core';
import type { FhirRepository } from '@medplum/fhir-router';
import type { Resource } from '@medplum/fhirtypes';

/** A PATCH body: JSON Patch operations, or a FHIRPath Patch `Parameters` resource. */
export type PatchOperations = Parameters<FhirRepository['patchResource']>[2];

/**
 * Changes `resource` in place: JSON Patch (RFC 6902, through @medplum/core's `applyPatch`) or FHIRPath Patch.
 * Any failed operation, including a failed `test`, is a 400 OperationOutcomeError.
 */
export function applyResourcePatch(resource: Resource, patch: PatchOperations): void {
  try {
    if (Array.isArray(patch)) {
      const errors = applyPatch(resource, patch).filter((result) => result !== null);
      if (errors.length > 0) {
        throw new OperationOutcomeError(badRequest(errors.map((error) => error.message).join('\n')));
      }
    } else if (patch.parameter) {
      fhirpathPatchTypedValue(toTypedValue(resource), parseFhirPathPatchParameters(patch));
    }
  } catch (error) {
    throw new OperationOutcomeError(normalizeOperationOutcome(error), { cause: error });
  }
}
