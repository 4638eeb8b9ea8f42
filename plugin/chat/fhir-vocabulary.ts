/**
 * The codes and extension URLs fhirgate writes on Communications. The category system is configurable
 * (`categorySystem` option); the rest is fixed so that every deployment's audit trail reads the same.
 */

/** Category codes and displays of the three kinds of stored message. */
export const CATEGORY = {
  conversation: { code: 'ai-conversation', display: 'AI Conversation' },
  prompt: { code: 'ai-prompt', display: 'AI Prompt' },
  response: { code: 'ai-response', display: 'AI Response' },
} as const;

/**
 * The second category of the prompt and reply of a side request (side-requests.ts): a request about a conversation
 * (its title, its tags, follow-up suggestions), recorded with it but no turn of it.
 */
export const SIDE_REQUEST_CATEGORY = { code: 'ai-side-request', display: 'AI Side Request' } as const;

/** Default system of the category codes. */
export const DEFAULT_CATEGORY_SYSTEM = 'urn:fhirgate:communication-category';

/** Extensions fhirgate writes. */
export const EXTENSION = {
  /** On a prompt: the request body exactly as the client sent it (JSON), messages and parameters included. */
  chatRequest: 'urn:fhirgate:extension:chat-request',
  /**
   * On a prompt, one per message the turn added to its conversation, in order (prompt-messages.ts): `role`, `name`,
   * and its content: the next `payload` items of the prompt (user messages and tool results, which a reviewer reads
   * there), or `text` pieces (system, developer and assistant messages), with `part` counts when it was sent as
   * parts, and an assistant's `tool-call`s.
   */
  message: 'urn:fhirgate:extension:message',
  /** On a reply: the model that answered, `provider/model`. */
  model: 'urn:fhirgate:extension:model',
  /** On a completed reply: why the model stopped (`stop`, `length`, `content_filter`), as `finish_reason` said. */
  finishReason: 'urn:fhirgate:extension:finish-reason',
  /**
   * On a reply: token usage reported by the provider (`prompt-tokens`, `completion-tokens`, `total-tokens`, and
   * `cost` for a priced model), or estimated by fhirgate where the provider reported none (`estimated`: true).
   */
  usage: 'urn:fhirgate:extension:usage',
  /** On a reply: the patient context sent to the model with it, exactly as sent (its records are in `about`). */
  patientContext: 'urn:fhirgate:extension:patient-context',
  /**
   * On a reply: the earlier messages sent with it as history (`count`, `oldest`), and `instructions`: the prompt whose
   * opening instructions were sent with them (a turn that brought none of its own: conversation.ts).
   */
  history: 'urn:fhirgate:extension:history',
  /** On a reply, one per call: a function call the model asked the client to make (`id`, `name`, `arguments`). */
  toolCall: 'urn:fhirgate:extension:tool-call',
  /** On an item of a prompt's `payload`: the id of the call whose result the item is (the item is a tool result). */
  toolResult: 'urn:fhirgate:extension:tool-result',
  /**
   * On a reply, one per call: a FHIR tool fhirgate ran for the model while answering (`id`, `name`, `arguments`,
   * `result`: the text the model was given); the records the result came from are in the reply's `about`.
   */
  fhirToolCall: 'urn:fhirgate:extension:fhir-tool-call',
  /**
   * On the reply of a turn sent de-identified to a model not cleared for patient data: `date-shift-days`, the request's
   * messages as sent (`request`, JSON) and the reply as the model wrote it (`reply`); see governance/patient-data-record.ts.
   */
  deIdentified: 'urn:fhirgate:extension:de-identified',
} as const;

/**
 * System of the code in a `not-done` reply's `statusReason`: the error code its client was answered with
 * (`upstream_error`, `upstream_timeout`, ...; plugin/errors.ts), so that a request repeated under the same
 * Idempotency-Key is answered with the same error.
 */
export const ERROR_CODE_SYSTEM = 'urn:fhirgate:error-code';

/**
 * System of the code in a reply's `medium`: the model that answered (`provider/model`), so replies can be searched
 * by model with the R4 `medium` search parameter on any FHIR server (`Communication?medium=urn:fhirgate:ai-model|...`):
 * a Medplum server does not search by SearchParameters a project adds.
 */
export const MODEL_MEDIUM_SYSTEM = 'urn:fhirgate:ai-model';

/** How an MCP client's disclosure names the client in its recipient agent's display: this, then its name and version. */
export const MCP_CLIENT_PREFIX = 'MCP client: ';
/** The MCP tool (and resource) that gives a patient's summary. */
export const MCP_SUMMARY_TOOL = 'get_patient_summary';
/** The observer (`source.observer.display`) of an MCP client's disclosure. */
export const MCP_SERVER_OBSERVER = 'fhirgate MCP server';

/** Identifier of the AI agent's Device in each project. */
export const AGENT_DEVICE_IDENTIFIER = { system: 'urn:fhirgate:agent', value: 'fhirgate-ai-agent' } as const;
