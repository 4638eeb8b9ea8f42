/**
 * The patient an MCP tool call names, and the form the patient's data takes on its way to the client. Under
 * `allow` the client names a patient by its FHIR id and gets the records as the caller may read them. Under
 * `de-identify` it names the patient by an opaque handle (patient-handle.ts) and gets every text about the patient
 * through the patient's Pseudonymizer, as the chat sends it to a model not cleared for patient data: names and
 * identifiers become pseudonyms (`[GIVEN-1]`), the birth date the age, other dates move by a shift derived from the
 * server's key, the project, the caller and the patient, so every answer about a patient agrees with the others.
 * The client's arguments go the other way (pseudonyms and shifted dates put back) before the store is searched.
 */
import type { WithId } from '@medplum/core';
import type { FhirRepository } from '@medplum/fhir-router';
import type { Patient } from '@medplum/fhirtypes';
import type { CallerContext } from '../host.ts';
import { dateShiftDays } from '../governance/de-identify-dates.ts';
import { Pseudonymizer } from '../governance/de-identify-text.ts';
import { isOutcomeStatus } from '../medplum-errors.ts';
import type { McpPatientDataRule } from './mcp-patient-data.ts';
import { PatientHandles } from './patient-handle.ts';

/** How one patient's data reaches the client. */
export interface PatientForm {
  /** True when the data is de-identified. */
  readonly deIdentified: boolean;
  /** How the client names the patient (`patient_id`): the FHIR id, or the handle. */
  readonly patientId: string;
  /** A text about the patient as the client gets it (a tool's JSON result, the summary, an error). */
  readonly text: (text: string) => string;
  /** Every string of a value as the client gets it. */
  readonly strings: <T>(value: T) => T;
  /** The client's arguments as the store is searched with them. */
  readonly arguments: (input: Record<string, unknown>) => Record<string, unknown>;
}

/** A patient the caller may read, with the form its data takes. */
export interface NamedPatient {
  readonly patient: WithId<Patient>;
  readonly form: PatientForm;
}

/** The patients of one MCP request. */
export class McpPatients {
  readonly #caller: CallerContext;
  readonly #rule: McpPatientDataRule;
  readonly #key: string | undefined;
  readonly #systemRepo: () => Promise<FhirRepository>;
  readonly #handles: PatientHandles | undefined;

  /** `key`: the server's de-identification key (required under `de-identify`). */
  constructor(caller: CallerContext, rule: McpPatientDataRule, key: string | undefined, systemRepo: () => Promise<FhirRepository>) {
    this.#caller = caller;
    this.#rule = rule;
    this.#key = key;
    this.#systemRepo = systemRepo;
    this.#handles = rule === 'de-identify' && key !== undefined ? new PatientHandles(key, caller.project.id, this.#callerName()) : undefined;
  }

  /** The patient `patientId` names, as the caller may read it; a string says why not. */
  async resolve(patientId: unknown): Promise<NamedPatient | string> {
    const id = this.#idOf(patientId);
    if (id === undefined) {
      return this.#handles
        ? 'patient_id must be a patient handle this server gave (find_patients gives them); this project gives MCP clients patient data de-identified.'
        : 'patient_id must be the id of a Patient, e.g. from find_patients.';
    }
    let patient: WithId<Patient>;
    try {
      patient = await this.#caller.repo.readResource<Patient>('Patient', id);
    } catch (error) {
      if (isOutcomeStatus(error, 403, 404, 410)) {
        return `Patient/${this.#handles ? String(patientId) : id} is not a patient the requesting user may see.`;
      }
      throw error;
    }
    return { patient, form: await this.formOf(patient) };
  }

  /** The form of `patient`'s data (read as the caller). */
  async formOf(patient: WithId<Patient>): Promise<PatientForm> {
    if (!this.#handles || this.#key === undefined) {
      return { deIdentified: false, patientId: patient.id, text: (text) => text, strings: (value) => value, arguments: (input) => input };
    }
    // The patient's identifiers are read whole, whatever of them the caller's policy shows: what the caller may
    // read elsewhere (a note's text) may hold one the Patient it reads does not.
    const identified = await this.#identifiedPatient(patient);
    const pseudonyms = new Pseudonymizer(identified, dateShiftDays(this.#key, this.#caller.project.id, `mcp\n${this.#callerName()}\n${patient.id}`), new Date());
    return {
      deIdentified: true,
      patientId: this.#handles.handleOf(patient.id),
      text: (text) => pseudonyms.deIdentifyToolResult(text),
      strings: (value) => pseudonyms.deIdentifyStrings(value),
      arguments: (input) => JSON.parse(pseudonyms.reIdentify(JSON.stringify(input), true)) as Record<string, unknown>,
    };
  }

  #idOf(patientId: unknown): string | undefined {
    if (typeof patientId !== 'string') {
      return undefined;
    }
    if (this.#handles) {
      return this.#handles.patientIdOf(patientId);
    }
    return /^[A-Za-z0-9\-.]{1,64}$/.test(patientId) ? patientId : undefined;
  }

  async #identifiedPatient(patient: WithId<Patient>): Promise<WithId<Patient>> {
    try {
      return await (await this.#systemRepo()).readResource<Patient>('Patient', patient.id);
    } catch (error) {
      if (isOutcomeStatus(error, 404, 410)) {
        return patient;
      }
      throw error;
    }
  }

  #callerName(): string {
    return this.#caller.profile.reference ?? '';
  }
}
