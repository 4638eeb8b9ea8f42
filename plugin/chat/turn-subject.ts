/**
 * The patient a turn is about: the request's `patient_id`, checked against the caller's AccessPolicy, or the
 * subject of the conversation being continued.
 */
import type { WithId } from '@medplum/core';
import type { FhirRepository } from '@medplum/fhir-router';
import type { Communication, Patient, Reference } from '@medplum/fhirtypes';
import { AppError } from '../errors.ts';
import { isOutcomeStatus } from '../medplum-errors.ts';

/** The patient a turn is about, and the Patient itself when the turn has already read it. */
export interface TurnSubject {
  readonly reference: Reference<Patient>;
  readonly patient?: WithId<Patient>;
}

/**
 * The patient the conversation is about: the request's `patient_id`, which the caller must be able to read, or the
 * subject of the conversation being continued. A patient of the project that the caller's AccessPolicy does not
 * allow (outside the care team, or no Patient access at all) is a failed RBAC check, 403; one the project does not
 * have is 404. A request may not switch a conversation to another patient.
 */
export async function resolveSubject(
  repo: FhirRepository,
  systemRepo: () => Promise<FhirRepository>,
  patientId: string | undefined,
  root: Communication | undefined
): Promise<TurnSubject | undefined> {
  const conversationSubject = root?.subject?.reference;
  if (!patientId) {
    return conversationSubject ? { reference: { reference: conversationSubject } } : undefined;
  }
  if (conversationSubject && conversationSubject !== `Patient/${patientId}`) {
    throw new AppError('invalid_request', 'patient_id names another patient than the conversation is about.', { details: { param: 'patient_id' } });
  }
  try {
    const patient: WithId<Patient> = await repo.readResource('Patient', patientId);
    return { reference: { reference: `Patient/${patient.id}` }, patient };
  } catch (error) {
    if (!isOutcomeStatus(error, 404)) {
      throw error;
    }
  }
  // Hidden from the caller: whether the project has this patient decides between 403 and 404.
  if (await findPatient(await systemRepo(), patientId)) {
    throw new AppError('forbidden', `Forbidden: the AccessPolicy of the caller does not allow Patient '${patientId}'.`, { details: { param: 'patient_id' } });
  }
  throw new AppError('not_found', `Patient '${patientId}' not found.`, { details: { param: 'patient_id' } });
}

async function findPatient(repo: FhirRepository, id: string): Promise<boolean> {
  try {
    await repo.readResource('Patient', id);
    return true;
  } catch (error) {
    if (isOutcomeStatus(error, 404)) {
      return false;
    }
    throw error;
  }
}
