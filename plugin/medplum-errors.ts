/**
 * Medplum's errors, recognised by their shape. Inside a Medplum server a repository refuses with the server's own
 * copy of `@medplum/core`'s `OperationOutcomeError`, never fhirgate's, so nothing here (or anywhere in the plugin)
 * asks `instanceof`: an error is Medplum's when it carries an `OperationOutcome` as its `outcome`.
 */
import { getStatus, isOperationOutcome } from '@medplum/core';
import type { OperationOutcome } from '@medplum/fhirtypes';

// What Medplum's FHIR quota waits by default before a used-up budget refills (its window is one minute).
const QUOTA_WINDOW_SECONDS = 60;

/** The OperationOutcome a Medplum error carries, or undefined for anything else. */
export function outcomeOf(error: unknown): OperationOutcome | undefined {
  if (typeof error !== 'object' || error === null || !('outcome' in error)) {
    return undefined;
  }
  const { outcome } = error as { outcome: unknown };
  return isOperationOutcome(outcome) ? outcome : undefined;
}

/** The HTTP status of a Medplum error (e.g. 403 for a policy refusal), or undefined for anything else. */
export function outcomeStatusOf(error: unknown): number | undefined {
  const outcome = outcomeOf(error);
  return outcome ? getStatus(outcome) : undefined;
}

/** True when `error` is Medplum's refusal with one of `statuses`. */
export function isOutcomeStatus(error: unknown, ...statuses: readonly number[]): boolean {
  const status = outcomeStatusOf(error);
  return status !== undefined && statuses.includes(status);
}

/**
 * Seconds until Medplum's FHIR quota lets the caller in again, read from its 429: the server puts the rate
 * limiter's state (`msBeforeNext`, as `_msBeforeNext`) into the issue's diagnostics as JSON. A whole quota window
 * when the outcome does not say.
 */
export function quotaRetryAfterSeconds(outcome: OperationOutcome): number {
  for (const issue of outcome.issue ?? []) {
    const waitMs = readWaitMs(issue.diagnostics);
    if (waitMs !== undefined) {
      return Math.max(1, Math.ceil(waitMs / 1000));
    }
  }
  return QUOTA_WINDOW_SECONDS;
}

function readWaitMs(diagnostics: string | undefined): number | undefined {
  if (!diagnostics?.startsWith('{')) {
    return undefined;
  }
  try {
    const state = JSON.parse(diagnostics) as Record<string, unknown>;
    const waitMs = state._msBeforeNext ?? state.msBeforeNext;
    return typeof waitMs === 'number' && Number.isFinite(waitMs) && waitMs >= 0 ? waitMs : undefined;
  } catch {
    return undefined;
  }
}
