import { OperationOutcomeError, getStatus, normalizeOperationOutcome } from '@medplum/core';
import type { OperationOutcome } from '@medplum/fhirtypes';

/** The HTTP status FhirRouter would answer with for what `promise` rejects with; fails when it resolves. */
export async function statusOf(promise: Promise<unknown>): Promise<number> {
  return getStatus(await rejectionOutcome(promise));
}

/** A refusal as a FHIR client reads it: the status, and the first issue's text and expression. */
export interface Refusal {
  readonly status: number;
  readonly text: string | undefined;
  readonly expression?: string[];
}

/** What `promise` rejects with, as FhirRouter would answer it; fails when it resolves. */
export async function refusalOf(promise: Promise<unknown>): Promise<Refusal> {
  const outcome = await rejectionOutcome(promise);
  const issue = outcome.issue?.[0];
  return { status: getStatus(outcome), text: issue?.details?.text, ...(issue?.expression ? { expression: issue.expression } : undefined) };
}

async function rejectionOutcome(promise: Promise<unknown>): Promise<OperationOutcome> {
  try {
    await promise;
  } catch (error) {
    if (!(error instanceof OperationOutcomeError)) {
      throw error;
    }
    return normalizeOperationOutcome(error);
  }
  throw new Error('expected a rejection');
}
