import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { OperationOutcomeError, forbidden, notFound, tooManyRequests } from '@medplum/core';
import type { OperationOutcome } from '@medplum/fhirtypes';
import { toAppError } from './errors.ts';
import { isOutcomeStatus, outcomeOf, outcomeStatusOf, quotaRetryAfterSeconds } from './medplum-errors.ts';

/** `OperationOutcomeError` as another copy of @medplum/core defines it: same shape, another class. */
class ServersOperationOutcomeError extends Error {
  readonly outcome: OperationOutcome;

  constructor(outcome: OperationOutcome) {
    super(outcome.issue?.[0]?.details?.text);
    this.outcome = outcome;
  }
}

/** Medplum's FHIR quota refusal (fhir/fhirquota.ts): the limiter's state as JSON in the diagnostics. */
function quotaRefusal(msBeforeNext: number): ServersOperationOutcomeError {
  const diagnostics = JSON.stringify({ _remainingPoints: 0, _msBeforeNext: msBeforeNext, _consumedPoints: 50_120, _isFirstInDuration: false, limit: 50_000 });
  return new ServersOperationOutcomeError({ ...tooManyRequests, issue: [{ ...tooManyRequests.issue[0], diagnostics }] });
}

describe("Medplum's errors, by shape", () => {
  test("another copy's OperationOutcomeError is recognised like our own", () => {
    for (const error of [new ServersOperationOutcomeError(forbidden), new OperationOutcomeError(forbidden)]) {
      expect(outcomeOf(error)).toBe(forbidden);
      expect(outcomeStatusOf(error)).toBe(403);
      expect(isOutcomeStatus(error, 404, 403)).toBe(true);
      expect(isOutcomeStatus(error, 404)).toBe(false);
    }
  });

  test('anything without an OperationOutcome is not one', () => {
    for (const value of [new Error('x'), { outcome: { resourceType: 'Patient' } }, { outcome: 'forbidden' }, null, 'not-found', undefined]) {
      expect(outcomeOf(value)).toBeUndefined();
      expect(outcomeStatusOf(value)).toBeUndefined();
    }
  });

  test.each([
    [forbidden, 403, 'forbidden'],
    [notFound, 404, 'not_found'],
    [{ resourceType: 'OperationOutcome', issue: [{ severity: 'error', code: 'invalid', details: { text: 'Invalid id' } }] }, 400, 'invalid_request'],
    [{ resourceType: 'OperationOutcome', id: 'conflict', issue: [{ severity: 'error', code: 'conflict' }] }, 409, 'conflict'],
    [{ resourceType: 'OperationOutcome', id: 'gone', issue: [{ severity: 'error', code: 'deleted' }] }, 410, 'gone'],
    [{ resourceType: 'OperationOutcome', id: 'precondition-failed', issue: [{ severity: 'error', code: 'processing' }] }, 412, 'precondition_failed'],
    [{ resourceType: 'OperationOutcome', id: 'business-rule', issue: [{ severity: 'error', code: 'business-rule' }] }, 422, 'unprocessable'],
    [{ resourceType: 'OperationOutcome', id: 'content-too-large', issue: [{ severity: 'error', code: 'too-long' }] }, 413, 'payload_too_large'],
    [{ resourceType: 'OperationOutcome', id: 'unauthorized', issue: [{ severity: 'error', code: 'login' }] }, 401, 'unauthenticated'],
  ] as const)('a refusal of the server with %j keeps its status (%i, %s)', (outcome, status, code) => {
    const error = toAppError(new ServersOperationOutcomeError(outcome as OperationOutcome));
    expect({ status: error.status, code: error.code }).toEqual({ status, code });
    expect(error.message).not.toContain('Invalid id');
  });

  test("Medplum's FHIR quota is a 429 with Retry-After from the limiter's state", () => {
    const error = toAppError(quotaRefusal(12_300));
    expect({ status: error.status, code: error.code, retryAfterSeconds: error.retryAfterSeconds, isRetryable: error.isRetryable }).toEqual({
      status: 429,
      code: 'rate_limited',
      retryAfterSeconds: 13,
      isRetryable: true,
    });
    expect(quotaRetryAfterSeconds(tooManyRequests)).toBe(60);
  });

  test('a server fault stays an internal error that does not repeat its text', () => {
    const error = toAppError(new ServersOperationOutcomeError({ resourceType: 'OperationOutcome', issue: [{ severity: 'error', code: 'exception', details: { text: 'pg: password authentication failed' } }] }));
    expect(error.code).toBe('internal_error');
    expect(error.message).not.toContain('password');
  });
});

describe('the plugin never asks a Medplum class for identity', () => {
  /** Source files of the plugin (not its tests): a Medplum error or object comes from the server's copy there. */
  function pluginSources(folder: string): string[] {
    return readdirSync(folder, { withFileTypes: true }).flatMap((entry) => {
      const path = join(folder, entry.name);
      return entry.isDirectory() ? pluginSources(path) : entry.name.endsWith('.ts') && !entry.name.endsWith('.test.ts') ? [path] : [];
    });
  }

  test('no `instanceof` names anything imported from a @medplum package', () => {
    const root = fileURLToPath(new URL('.', import.meta.url));
    const offences: string[] = [];
    for (const file of pluginSources(root)) {
      const source = readFileSync(file, 'utf8');
      const imported = [...source.matchAll(/import\s+(?:type\s+)?\{([^}]*)\}\s+from\s+'@medplum\/[^']+'/g)].flatMap(([, names]) =>
        names.split(',').map((name) => name.replace(/^\s*type\s+/, '').split(/\s+as\s+/).pop()?.trim() ?? '').filter(Boolean)
      );
      for (const name of imported) {
        if (new RegExp(`instanceof\\s+${name}\\b`).test(source)) {
          offences.push(`${relative(root, file)}: instanceof ${name}`);
        }
      }
    }
    expect(offences).toEqual([]);
  });
});
