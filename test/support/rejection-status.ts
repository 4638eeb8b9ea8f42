import { OperationOutcomeError, getStatus, normalizeOperationOutcome } from '@medplum/core';

/** The HTTP status FhirRouter would answer with for what `promise` rejects with; fails when it resolves. */
export async function statusOf(promise: Promise<unknown>): Promise<number> {
  try {
    await promise;
  } catch (error) {
    if (!(error instanceof OperationOutcomeError)) {
      throw error;
    }
    return getStatus(normalizeOperationOutcome(error));
  }
  throw new Error('expected a rejection');
}
