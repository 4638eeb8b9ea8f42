/**
 * The patient a turn is about: everything the turn takes in that is recorded about a patient. The request's
 * `patient_id` (checked against the caller's AccessPolicy), the conversation it continues (its root, and what its
 * turns were about: conversation-subjects.ts) and the stored records it names (a Responses `item_reference`) each
 * bring their patient; the turn is about their union, decided before anything is stored, and a turn that would be
 * about two patients is refused (400 naming the field that brought the second). A turn about a patient gets the
 * governance of one (patient data egress, de-identification, the reply's `subject` and `about`, the disclosure's
 * AuditEvent), however its patient came in.
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

/** Something a turn takes in that is recorded about a patient, and the request field that brought it in. */
export interface SubjectSource {
  /** `Patient/<id>`. */
  readonly patient: string;
  /** The field, as the request names it: `conversation_id`, `input.2.id`. */
  readonly param: string;
  /** What it is, for the refusal's message: "the conversation", "the referenced item". */
  readonly what: string;
}

/**
 * The one patient the turn is about: `requested` (the request's `patient_id`, as `resolveSubject` checked it), else
 * the patient of the first source; undefined when nothing is about a patient. A source about another patient is a
 * 400 naming its field (`patient_id` when the request named one and the conversation is about another).
 */
export function unionSubject(requested: TurnSubject | undefined, sources: readonly SubjectSource[]): TurnSubject | undefined {
  let subject = requested;
  let first: SubjectSource | undefined;
  for (const source of sources) {
    if (subject === undefined) {
      subject = { reference: { reference: source.patient } };
      first = source;
      continue;
    }
    if (subject.reference.reference === source.patient) {
      continue;
    }
    if (first === undefined && source.param === 'conversation_id') {
      throw new AppError('invalid_request', 'patient_id names another patient than the conversation is about.', { details: { param: 'patient_id' } });
    }
    const conflict =
      first?.param === source.param ? 'is about more than one patient' : `is about another patient than ${first === undefined ? 'patient_id names' : `${first.what} is about`}`;
    throw new AppError(
      'invalid_request',
      `Invalid request: ${source.param}: ${source.what} ${conflict}; a turn is about one patient at most, so records about different patients are not taken into one turn.`,
      { details: { param: source.param } }
    );
  }
  return subject;
}
