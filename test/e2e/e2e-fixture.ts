/**
 * The people and charts one run of the end-to-end suite needs, made by the project administrator through the
 * server's public API (FHIR and Medplum's invite), with names unique to the run so runs never meet: two patients,
 * a chart for the first, and two practitioners who sign in with email and password as a chat client's user does
 * (MedplumClient's `startLogin` and `processCode`):
 * - the clinician: the ready-made care-team policy for the first patient, and her own conversations;
 * - the colleague: the same policies, for the second patient.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import type { WithId } from '@medplum/core';
import type { Condition, Observation, Patient, ProjectMembership, ProjectMembershipAccess } from '@medplum/fhirtypes';
import OpenAI from 'openai';
import { signInWithPassword } from '../support/password-sign-in.ts';
import { isOutcomeStatus } from '../../plugin/medplum-errors.ts';
import type { E2eTarget } from './e2e-target.ts';

/** A practitioner of the run, signed in. */
export interface E2ePractitioner {
  readonly membership: WithId<ProjectMembership>;
  readonly profileReference: string;
  /** The access token the chat client holds. */
  readonly accessToken: string;
  /** The openai SDK as a chat client configures it: this server's /v1, the Medplum token, the project header. */
  readonly openai: OpenAI;
}

/** What one run made. */
export interface E2eFixture {
  readonly run: string;
  readonly patient: WithId<Patient>;
  readonly otherPatient: WithId<Patient>;
  readonly condition: WithId<Condition>;
  readonly observation: WithId<Observation>;
  readonly clinician: E2ePractitioner;
  readonly colleague: E2ePractitioner;
}

/** Makes the run's fixture on `target`. */
export async function createE2eFixture(target: E2eTarget): Promise<E2eFixture> {
  const run = randomUUID().slice(0, 8);
  const { admin } = target;
  const patient = await admin.createResource<Patient>({ resourceType: 'Patient', name: [{ given: ['Erin'], family: `E2e-${run}` }], birthDate: '1958-07-14', gender: 'female' });
  const otherPatient = await admin.createResource<Patient>({ resourceType: 'Patient', name: [{ given: ['Omar'], family: `E2e-${run}` }] });
  const condition = await admin.createResource<Condition>({
    resourceType: 'Condition',
    subject: { reference: `Patient/${patient.id}` },
    clinicalStatus: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/condition-clinical', code: 'active' }] },
    code: { text: `Chronic kidney disease stage 3 (e2e ${run})` },
    onsetDateTime: '2022-02-02',
  });
  const observation = await admin.createResource<Observation>({
    resourceType: 'Observation',
    status: 'final',
    subject: { reference: `Patient/${patient.id}` },
    code: { text: 'Systolic blood pressure' },
    effectiveDateTime: new Date().toISOString(),
    valueQuantity: { value: 142, unit: 'mm[Hg]' },
  });
  const policies = target.provisioned.policies;
  const practitioner = async (name: string, carePatient: WithId<Patient>): Promise<E2ePractitioner> => {
    const invited = await invitePractitioner(target, run, name, [
      { policy: { reference: `AccessPolicy/${policies['policy-care-team-patient'].id}` }, parameter: [{ name: 'patient', valueReference: { reference: `Patient/${carePatient.id}` } }] },
      { policy: { reference: `AccessPolicy/${policies['policy-own-conversations'].id}` } },
    ]);
    const accessToken = await signIn(target.baseUrl, invited.email, invited.password, target.projectId);
    return {
      membership: invited.membership,
      profileReference: invited.profileReference,
      accessToken,
      openai: new OpenAI({ baseURL: `${target.baseUrl}v1`, apiKey: accessToken, defaultHeaders: { 'X-Project-ID': target.projectId }, maxRetries: 0 }),
    };
  };
  return {
    run,
    patient,
    otherPatient,
    condition,
    observation,
    clinician: await practitioner('Clinician', patient),
    colleague: await practitioner('Colleague', otherPatient),
  };
}

/** A practitioner invited for a run with an email and a password (Medplum's invite), not signed in yet. */
export interface E2eInvitee {
  readonly membership: WithId<ProjectMembership>;
  readonly profileReference: string;
  readonly email: string;
  readonly password: string;
}

/** Invites a practitioner of the run, named `<name> E2e-<run>`, with the given access. */
export async function invitePractitioner(target: E2eTarget, run: string, name: string, access: ProjectMembershipAccess[]): Promise<E2eInvitee> {
  const email = `fhirgate-e2e-${run}-${name}@example.com`;
  const password = randomBytes(18).toString('base64url');
  const membership = (await target.admin.invite(target.projectId, {
    resourceType: 'Practitioner',
    firstName: name,
    lastName: `E2e-${run}`,
    email,
    password,
    sendEmail: false,
    membership: { access },
  })) as WithId<ProjectMembership>;
  return { membership, profileReference: membership.profile.reference ?? '', email, password };
}

/** Email and password sign-in, as the Medplum app and MedplumClient do it; resolves the access token. */
async function signIn(baseUrl: string, email: string, password: string, projectId: string): Promise<string> {
  const client = await signInWithPassword(baseUrl, { email, password, projectId }).catch((error: unknown) => {
    if (isOutcomeStatus(error, 429)) {
      throw new Error(`The server refused the sign-in of ${email} with 429: Medplum allows 5 sign-ins a minute from one address by default; wait a minute before the next run`, { cause: error });
    }
    throw error;
  });
  const token = client.getAccessToken();
  if (!token) {
    throw new Error(`The sign-in of ${email} gave no access token`);
  }
  return token;
}
