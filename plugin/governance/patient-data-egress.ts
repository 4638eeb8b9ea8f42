/**
 * The egress rule of a chat turn: a turn that carries patient data (it names a patient, or continues a
 * conversation whose subject is one: its summary, its FHIR tools, its history and the user's own words are about
 * that patient) goes only to a model cleared for patient data (patient-data-settings.ts). On a model that is not
 * cleared, the project's policy decides: refused (403 `patient_data_not_allowed`, before anything is stored or
 * sent), or sent de-identified and answered re-identified (de-identify-model.ts).
 *
 * The whole turn takes the form the requested model decides: a cleared model's turn keeps only cleared fallbacks
 * (the patient's data never reaches another through a fallback), and a de-identified turn sends de-identified text
 * to every model of its chain, so the disclosure's AuditEvent, written before the call, states the one form the
 * data left in.
 */
import type { WithId } from '@medplum/core';
import type { FhirRepository } from '@medplum/fhir-router';
import type { Patient, Project, Reference } from '@medplum/fhirtypes';
import { AppError } from '../errors.ts';
import { isOutcomeStatus } from '../medplum-errors.ts';
import type { ChatGenerationOptions, ChatMessage, ChatTool } from '../llm/chat-model.ts';
import type { ModelCatalog, ResolvedModel } from '../llm/model-registry.ts';
import type { Telemetry } from '../telemetry/telemetry.ts';
import { dateShiftDays } from './de-identify-dates.ts';
import { deIdentifiedModel } from './de-identify-model.ts';
import { Pseudonymizer } from './de-identify-text.ts';
import { TurnDeIdentification } from './patient-data-record.ts';
import { isCleared, patientDataRefusal, readProjectPatientData, treatmentOf, type PatientDataTreatment } from './patient-data-settings.ts';

/** The refusal rule's name in the `fhirgate.governance.refusals` metric. */
export const PATIENT_DATA_RULE = 'patient_data';

/** The server's side of the rule, built once. */
export interface PatientDataOptions {
  /** The models the operator cleared (`llm.patientDataModels`). */
  readonly operatorModels: readonly string[];
  /** How a refusal names the operator's list (`operatorSettingOf`); default the plugin option. */
  readonly operatorSetting?: string;
  /** The key date shifts are derived with (`deIdentification.dateShiftKey`); without it nothing can be de-identified. */
  readonly dateShiftKey?: string;
  readonly telemetry: Telemetry;
}

/** One turn, as far as the rule needs it. */
export interface EgressTurn {
  readonly project: WithId<Project>;
  /** The model the request asked for, with its fallbacks. */
  readonly model: ResolvedModel;
  /** The patient the turn is about; undefined: the turn carries no patient data. */
  readonly subject?: { readonly reference: Reference<Patient>; readonly patient?: WithId<Patient> };
  /** The conversation (new or continued): de-identified dates move by its shift. */
  readonly conversationId: string;
  /** The request's messages, recorded as the model was sent them. */
  readonly messages: readonly ChatMessage[];
  /** The request's options (a de-identified turn cannot give log probabilities). */
  readonly options?: ChatGenerationOptions;
  /** The request's own tools (the client's): a de-identified turn gives their calls' arguments back pseudonymised, unless the project allows otherwise. */
  readonly tools?: readonly ChatTool[];
  /** The project's system repository: the patient's identifiers are read to be removed, whatever the caller may read. */
  readonly systemRepo: () => Promise<FhirRepository>;
}

/** How the turn goes out. */
export interface PatientDataEgress {
  /** The model to call, with the fallbacks the rule allows, de-identifying where it must. */
  readonly target: ResolvedModel;
  /** Present when the turn is sent de-identified. */
  readonly deIdentification?: TurnDeIdentification;
}

/** Applies the rule: the target as it may be called, or a refusal (AppError) before anything is stored. */
export async function applyPatientDataEgress(options: PatientDataOptions, turn: EgressTurn): Promise<PatientDataEgress> {
  if (!turn.subject) {
    return { target: turn.model };
  }
  const settings = readProjectPatientData(turn.project);
  const treatment = treatmentOf(options.operatorModels, settings, turn.model);
  if (treatment === 'cleared') {
    return { target: { ...turn.model, fallbacks: turn.model.fallbacks.filter((fallback) => isCleared(options.operatorModels, settings, fallback)) } };
  }
  if (treatment === 'refused') {
    options.telemetry.governanceRefusals.add(1, { 'fhirgate.governance.rule': PATIENT_DATA_RULE, 'fhirgate.project.id': turn.project.id });
    throw patientDataRefusal(options.operatorModels, settings, turn.model, options.operatorSetting);
  }
  if (turn.options?.logprobs) {
    // The model's tokens are those of the de-identified text: they cannot stand beside the re-identified reply.
    throw new AppError('invalid_request', `Invalid request: logprobs cannot be given for a turn about a patient sent de-identified to '${turn.model.id}', which is not cleared for patient data.`, {
      details: { param: 'logprobs' },
    });
  }
  if (options.dateShiftKey === undefined) {
    throw new AppError(
      'not_configured',
      "This project sends turns about a patient de-identified, but the server has no key for date shifts (FHIRGATE_DATE_SHIFT_KEY in the server's environment, or the plugin option deIdentification.dateShiftKey).",
      {
        details: { setting: 'deIdentification.dateShiftKey' },
      }
    );
  }
  const patient = turn.subject.patient ?? (await readPatient(await turn.systemRepo(), turn.subject.reference));
  // The turn's time: dates near it reach the model relative to it, never on the shifted calendar (de-identify-present.ts).
  const pseudonyms = new Pseudonymizer(patient, dateShiftDays(options.dateShiftKey, turn.project.id, turn.conversationId), new Date());
  const deIdentification = new TurnDeIdentification(pseudonyms, turn.messages);
  // Counted once the turn's first request goes out: a turn refused by a later step never sent anything.
  let counted = false;
  const countTurn = (): void => {
    if (!counted) {
      counted = true;
      options.telemetry.deIdentifiedTurns.add(1, { 'fhirgate.project.id': turn.project.id, 'gen_ai.request.model': turn.model.id });
    }
  };
  const toolCalls = { clientTools: (turn.tools?.length ?? 0) > 0, reIdentifyClientArguments: settings.toolArguments === 're-identify' };
  const wrap = (model: ResolvedModel): ResolvedModel => ({ ...model, model: deIdentifiedModel(model.model, pseudonyms, deIdentification.transcript, { toolCalls, onSend: countTurn }) });
  return { target: { ...wrap(turn.model), fallbacks: turn.model.fallbacks.map(wrap) }, deIdentification };
}

/**
 * The `fhirgate` field of each `/v1/models` entry: what a turn about a patient on that model does in the caller's
 * project (`cleared`, `refused` or `de-identified`).
 */
export function patientDataFieldsFor(options: PatientDataOptions, project: Project, catalog: ModelCatalog): (modelId: string) => { readonly patient_data: PatientDataTreatment } {
  const settings = readProjectPatientData(project);
  return (modelId) => {
    let usesProjectKey = false;
    try {
      usesProjectKey = catalog.resolve(modelId).usesProjectKey === true;
    } catch {
      // A model the project has no key for yet is judged as on the server's account.
    }
    return { patient_data: treatmentOf(options.operatorModels, settings, { id: modelId, usesProjectKey }) };
  };
}

/** The Patient whose identifiers a de-identified turn removes; a patient gone from the store cannot be de-identified. */
async function readPatient(systemRepo: FhirRepository, reference: Reference<Patient>): Promise<WithId<Patient>> {
  try {
    return await systemRepo.readReference(reference);
  } catch (error) {
    if (isOutcomeStatus(error, 404, 410)) {
      throw new AppError('patient_data_not_allowed', "The patient's record cannot be read, so the turn cannot be de-identified; it is not sent.", { cause: error });
    }
    throw error;
  }
}
