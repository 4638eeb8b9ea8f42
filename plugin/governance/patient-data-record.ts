/**
 * What a de-identified turn leaves on record. The prompt keeps what the user typed (it is the user's record) and
 * the reply's `payload` what the caller was shown (re-identified); what the model actually received and said is
 * recorded as sent:
 * - the `patient-context` extension holds the summary as the model got it, and each `fhir-tool-call` extension its
 *   arguments and result as the model saw them (de-identified), as they hold the text sent for any turn;
 * - the `de-identified` extension holds the conversation's date shift (`date-shift-days`), the request's messages as
 *   sent (`request`, JSON, repeated in pieces when long) and the reply as the model wrote it (`reply`, pieces).
 * The history sent is the conversation's earlier messages (the `history` extension says which) put through the same
 * de-identification, which is the same for every turn of a conversation.
 */
import type { Communication, Extension } from '@medplum/fhirtypes';
import type { ChatMessage } from '../llm/chat-model.ts';
import { buildReply, type ConversationParties, type FhirToolRecord, type ReplyRecord } from '../chat/communication-builders.ts';
import { textPieces } from '../chat/fhir-text.ts';
import { EXTENSION } from '../chat/fhir-vocabulary.ts';
import type { PatientContext } from '../chat/patient-context.ts';
import { deIdentifyMessages, ModelTranscript } from './de-identify-model.ts';
import type { Pseudonymizer } from './de-identify-text.ts';

/** One turn's de-identification: how its text was sent, and what the model wrote. */
export class TurnDeIdentification {
  readonly pseudonyms: Pseudonymizer;
  readonly transcript = new ModelTranscript();
  readonly #requestMessages: readonly ChatMessage[];

  /** `requestMessages`: the request's own messages (the client's), recorded as sent. */
  constructor(pseudonyms: Pseudonymizer, requestMessages: readonly ChatMessage[]) {
    this.pseudonyms = pseudonyms;
    this.#requestMessages = requestMessages;
  }

  /** The patient context as the model received it. */
  asSentContext<T extends PatientContext | undefined>(context: T): T {
    return (context && { ...context, text: this.pseudonyms.deIdentify(context.text) }) as T;
  }

  /** A FHIR tool call as the model made it and saw its result. */
  asSentCall(call: FhirToolRecord): FhirToolRecord {
    return { ...call, arguments: this.pseudonyms.deIdentify(call.arguments), result: this.pseudonyms.deIdentifyToolResult(call.result) };
  }

  /** The `de-identified` extension of the reply. */
  extension(): Extension {
    // In the request's own words (OpenAI's field names), as the model got them.
    const request = deIdentifyMessages(this.#requestMessages, this.pseudonyms).map((message) => ({
      role: message.role,
      content: 'parts' in message && message.parts ? message.parts.map((text) => ({ type: 'text', text })) : message.content,
      ...('name' in message && message.name !== undefined ? { name: message.name } : {}),
      ...(message.role === 'tool' ? { tool_call_id: message.toolCallId } : {}),
      ...(message.role === 'assistant' && message.toolCalls ? { tool_calls: message.toolCalls } : {}),
    }));
    return {
      url: EXTENSION.deIdentified,
      extension: [
        { url: 'date-shift-days', valueInteger: this.pseudonyms.dateShiftDays },
        ...pieces('request', JSON.stringify(request)),
        ...pieces('reply', this.transcript.text),
      ],
    };
  }
}

/** The reply's Communication; for a de-identified turn, with what the model received and said as sent. */
export function recordedReply(deIdentification: TurnDeIdentification | undefined, parties: ConversationParties, reply: ReplyRecord): Communication {
  if (!deIdentification) {
    return buildReply(parties, reply);
  }
  const resource = buildReply(parties, {
    ...reply,
    patientContext: deIdentification.asSentContext(reply.patientContext),
    fhirTools: reply.fhirTools?.map((call) => deIdentification.asSentCall(call)),
  });
  return { ...resource, extension: [...(resource.extension ?? []), deIdentification.extension()] };
}

/** Sub-extensions holding `text` in pieces a FHIR string takes (none for ''). */
function pieces(url: string, text: string): Extension[] {
  return text.trim() ? textPieces(text).map((valueString) => ({ url, valueString })) : [];
}
