/**
 * A turn of a conversation, step by step in the spec's processing order, whichever API the client speaks
 * (`POST /v1/chat/completions` here; the Responses API reads its body and answers through the same steps, with its
 * own `TurnApi`, in plugin/responses/):
 *   -  wait for a place among the turns being prepared     (turn-admission.ts)
 *   1. authenticate the caller and check the project      (authenticate-caller.ts)
 *   -  validate the request, the model, the patient and the conversation (the one it names, or whose exchange it
 *      sends again or quotes: turn-conversation.ts; only its starter continues it, unless the project shares
 *      conversations: conversation-ownership.ts): nothing is stored for a bad request
 *   3. load the conversation's history, with those checks   (conversation.ts: the earlier turns, so read before
 *      the prompt is written; one search that also names the calls a request with tool results must answer and
 *      the latest reply a Responses request must continue from)
 *   -  the turn's patient: the union of what it takes in      (turn-subject.ts: `patient_id`, the conversation,
 *      the records the request names), decided before anything is stored
 *   -  patient data egress: a turn about a patient goes only to a cleared model, or de-identified (governance/)
 *   -  budgets: a turn past one of the project's or the caller's is refused (governance/)
 *   2. record the prompt (and the root of a new conversation): every message the turn adds (turn-input.ts); a side
 *      request about the conversation marked as one (side-requests.ts)
 *   4–6. call the provider, deliver the reply, record it    (deliver-json.ts, deliver-stream.ts, chat-turn.ts)
 * Every record is written through the caller's repository, so the caller's AccessPolicy decides.
 */
import type { Context } from '@opentelemetry/api';
import type { WithId } from '@medplum/core';
import type { Communication } from '@medplum/fhirtypes';
import type { Request, Response } from 'express';
import { AppError } from '../errors.ts';
import type { CallerContext, FhirgateHost } from '../host.ts';
import type { ChatMessage } from '../llm/chat-model.ts';
import type { ModelRegistry, ResolvedModel } from '../llm/model-registry.ts';
import { withRetriesAndFallbacks } from '../llm/resilient-chat-model.ts';
import { annotateRequest, annotateRequestAtEnd, requestContextOf } from '../telemetry/request-telemetry.ts';
import { countingOperations, RepositoryOperations } from '../telemetry/repository-operations.ts';
import { observeChatModel } from '../telemetry/observe-chat-model.ts';
import type { Telemetry } from '../telemetry/telemetry.ts';
import type { AgentDevices } from './agent-device.ts';
import { authenticateCaller } from './authenticate-caller.ts';
import { parseChatRequest, type ChatRequest, type ChatRequestLimits } from './chat-request.ts';
import type { CallerSlots } from './caller-slots.ts';
import type { TurnAdmission } from './turn-admission.ts';
import {
  buildPatientContext,
  patientContextOptionsFor,
  readChartPatient,
  sharingFor,
  type PatientContext,
  type PatientContextMode,
  type PatientContextOptions,
} from './patient-context.ts';
import { buildDisclosureEvent, type Disclosure, type DisclosureAccess } from './disclosure-audit.ts';
import { FhirToolbox, withFhirTools } from './fhir-tool-loop.ts';
import type { FhirToolsOptions } from './fhir-tools.ts';
import { modelCatalogFor } from './project-models.ts';
import { recordFailure, type ChatTurn } from './chat-turn.ts';
import type { CommunicationParty, ConversationParties } from './communication-builders.ts';
import { historyRecordOf, loadConversation, type ConversationHistory, type ConversationReader, type ConversationState, type HistoryLimits } from './conversation.ts';
import { deliverJson } from './deliver-json.ts';
import { deliverStream } from './deliver-stream.ts';
import type { InFlightTurns } from './in-flight-turns.ts';
import { withAnsweredCallsOnly } from './recorded-messages.ts';
import { communicationExists, requireStored, type ReplyRecords } from './reply-records.ts';
import { idempotencyKeyOf, inProgress, REPLAYED_HEADER, resolveIdempotentTurn, type TurnIds } from './idempotency.ts';
import { replayTurn } from './replay-turn.ts';
import { callerParty } from './caller-reference.ts';
import { checkBudgets, checkModelAccess, type Governance } from '../governance/governance.ts';
import { estimatePromptTokens } from '../governance/usage-estimate.ts';
import { applyPatientDataEgress, type PatientDataOptions } from '../governance/patient-data-egress.ts';
import { resolveSubject, unionSubject } from './turn-subject.ts';
import { conversationSubjects, readOfRepeated } from './conversation-subjects.ts';
import { recordPrompt } from './record-prompt.ts';
import type { ThreadScope } from './thread-digest.ts';
import { withoutRepeated } from './repeated-exchange.ts';
import { placeTurn } from './turn-conversation.ts';
import { openingInstructions, requestMessagesOf, turnInputOf } from './turn-input.ts';
import { asksForConversationLabel } from './side-requests.ts';

/** What the chat route works with, built once when the plugin is created. */
export interface ChatServices {
  readonly host: FhirgateHost;
  readonly models: ModelRegistry;
  readonly agents: AgentDevices;
  readonly categorySystem: string;
  readonly history: HistoryLimits;
  /** Reply length when the request gives no `max_tokens`. */
  readonly defaultMaxTokens: number;
  readonly telemetry: Telemetry;
  /** Turns running now, drained by the plugin's close hook. */
  readonly inFlight: InFlightTurns;
  /** The reply journal and outbox: one reply record per accepted turn, whatever the store or the process does. */
  readonly records: ReplyRecords;
  /** Bounds on each request. */
  readonly limits: ChatRequestLimits;
  /** Open streams per caller. */
  readonly streamSlots: CallerSlots;
  /** Non-streaming turns running per caller. */
  readonly turnSlots: CallerSlots;
  /** Turns prepared at once on this instance. */
  readonly admission: TurnAdmission;
  /** Whether non-streaming answers carry the turn's repository operations (the `reportRepositoryOperations` option). */
  readonly reportRepositoryOperations: boolean;
  /** What a turn about a patient shares with the model, and how. */
  readonly patientContext: PatientContextOptions & { readonly enabled: boolean; readonly mode: PatientContextMode; readonly tools: FhirToolsOptions };
  /** Who may use which model, and the budgets (plugin/governance/). */
  readonly governance: Governance;
  /** Which models may see patient data, and how the others get it (governance/patient-data-egress.ts). */
  readonly patientData: PatientDataOptions;
}

/**
 * What one API makes of a turn: how its request body is read, and how the reply is answered. The steps between
 * (the model, the checks, the records, the journal) are the same for every API.
 */
export interface TurnApi<R extends ChatRequest = ChatRequest> {
  /** Validates the body (a 400 naming the field); may read the caller's records the request refers to. */
  readRequest(body: unknown, services: ChatServices, caller: CallerContext): R | Promise<R>;
  /**
   * Checks against the conversation being continued, from what step 3 read of it (`reader` for what that page
   * cannot answer), made once the turn is known to run (not a replay under its Idempotency-Key) and before anything
   * is stored. `repeatsLatest`: the request sends the conversation's latest exchange again (thread-digest.ts), so it
   * continues from there.
   */
  checkConversation?(request: R, conversation: ConversationState, repeatsLatest: boolean, reader: ConversationReader): void | Promise<void>;
  /** Steps 4–6 in the API's wire format: JSON or streamed, as `turn.chat.stream` says. */
  deliver(turn: ChatTurn, response: Response): Promise<void>;
  /** Answers a request repeated under the same Idempotency-Key again, from the records of its completed turn. */
  replay(request: R, prompt: WithId<Communication>, reply: WithId<Communication>, response: Response): Promise<void>;
}

/** `POST /v1/chat/completions`. */
const CHAT_COMPLETIONS: TurnApi = {
  readRequest: (body, services) => parseChatRequest(body, services.limits),
  deliver: (turn, response) => (turn.chat.stream ? deliverStream(turn, response) : deliverJson(turn, response)),
  replay: replayTurn,
};

/** Handles one chat completion request. */
export async function handleChatCompletion(services: ChatServices, request: Request, response: Response): Promise<void> {
  await handleTurn(services, CHAT_COMPLETIONS, request, response);
}

/**
 * Handles one request of `api`: a turn of a conversation, from authentication to the reply's record, counting the
 * repository operations it asks of the server.
 */
export async function handleTurn<R extends ChatRequest>(services: ChatServices, api: TurnApi<R>, request: Request, response: Response): Promise<void> {
  const operations = new RepositoryOperations();
  annotateRequestAtEnd(response, () => ({ fhirReads: operations.reads, fhirSearches: operations.searches, fhirWrites: operations.writes }));
  try {
    await countingOperations(operations, () => admitTurn(services, api, request, response, operations));
  } finally {
    const counter = services.telemetry.repositoryOperations;
    counter.add(operations.reads, { 'fhirgate.operation': 'read' });
    counter.add(operations.searches, { 'fhirgate.operation': 'search' });
    counter.add(operations.writes, { 'fhirgate.operation': 'write' });
  }
}

/** Admission, authentication, the request and the caller's slot, then the turn. */
async function admitTurn<R extends ChatRequest>(services: ChatServices, api: TurnApi<R>, request: Request, response: Response, operations: RepositoryOperations): Promise<void> {
  // Given back when the provider call starts, or when the request ends before it.
  const leavePreparation = await services.admission.enter();
  try {
    const caller = await authenticateCaller(services.host, request);
    const chat = await api.readRequest(request.body, services, caller);
    const idempotencyKey = idempotencyKeyOf(request);
    // Held from here to the end of the turn: a caller over the limit is refused before anything is stored.
    const releaseSlot = (chat.stream ? services.streamSlots : services.turnSlots).take(`${caller.project.id} ${caller.profile.reference}`);
    try {
      await runTurn(services, api, response, caller, chat, idempotencyKey, leavePreparation, services.reportRepositoryOperations ? operations : undefined);
    } finally {
      releaseSlot();
    }
  } finally {
    leavePreparation();
  }
}

/** Everything after authentication and validation: the model, the checks, the records and the delivery. */
async function runTurn<R extends ChatRequest>(
  services: ChatServices,
  api: TurnApi<R>,
  response: Response,
  caller: CallerContext,
  chat: R,
  idempotencyKey: string | undefined,
  leavePreparation: () => void,
  reportedOperations: RepositoryOperations | undefined
): Promise<void> {
  // Model access comes first: a model the caller may not use is refused before any other rule looks at the turn.
  const requested = await checkModelAccess(services.governance, caller, chat.model, modelCatalogFor(services.models, caller.project).resolve(chat.model));
  annotateRequest(response, { projectId: caller.project.id, model: requested.id, stream: chat.stream });
  // A field the provider cannot honour is a 400 before anything is stored, never a field dropped on the way.
  requested.model.checkRequest?.({ ...chat, maxTokens: chat.maxTokens ?? services.defaultMaxTokens });
  const agent = await requireStored(() => services.agents.referenceFor(caller.project.id));
  const reader: ConversationReader = {
    repo: caller.repo,
    agent,
    systemRepo: once(() => services.host.getSystemRepo(caller.project.id)),
    authors: services.agents.authors,
    caller: callerParty(caller.profile),
  };
  // The conversation it names, or whose exchange it sends again or quotes (turn-conversation.ts), before anything is stored.
  const threadScope: ThreadScope = [caller.project.id, caller.profile.reference ?? ''];
  const place = await placeTurn(reader, chat, threadScope, caller);
  const { root, repeated, found } = place;
  const requestedSubject = await resolveSubject(caller.repo, reader.systemRepo, chat.patientId, root);
  let ids: TurnIds & { readonly rootId: string } = { rootId: root?.id ?? caller.repo.generateId(), promptId: caller.repo.generateId(), replyId: caller.repo.generateId() };
  if (idempotencyKey) {
    const decision = await resolveIdempotentTurn(caller.repo, [caller.project.id, caller.profile.reference ?? '', idempotencyKey], chat.body);
    if (decision.kind === 'replay') {
      await api.replay(chat, decision.prompt, decision.reply, response);
      return;
    }
    if (decision.kind === 'failed') {
      // The same error as the first time, from the record: the provider is not called again.
      response.setHeader(REPLAYED_HEADER, 'true');
      throw decision.error;
    }
    ids = { ...ids, ...decision.ids };
  }
  // Step 3, read with the checks, before anything is stored: one search gives the history, the calls a request
  // with tool results must answer and what the API checks (so a wrong id is a 400 with nothing written).
  const conversation = root && !place.bringsHistory ? await loadConversation(reader, root.id, services.history, { hasOwnInstructions: openingInstructions(requestMessagesOf(chat)).length > 0 }) : undefined;
  // A named conversation's request that sends its latest exchange again (a client's tool loop) gets it once.
  const repeatsLatest = conversation !== undefined && repeated !== undefined && conversation.latestReplyDigest === repeated.digest;
  if (conversation) {
    checkAnsweredCalls(chat, conversation);
    await api.checkConversation?.(chat, conversation, repeatsLatest, reader);
  }
  // What the turn adds to its conversation (turn-input.ts); a request about the conversation rather than a turn of it
  // (its title, its tags) is recorded with it as a side request (side-requests.ts).
  const input = turnInputOf(chat, place.bringsHistory || repeatsLatest);
  const sideRequest = place.quotes || (root !== undefined && asksForConversationLabel(input));
  // The turn is about every patient of what it takes in: one at most (400 naming the field that brings a second).
  const subject = unionSubject(requestedSubject, [
    ...(root ? (await conversationSubjects(reader, root, conversation ?? (found && readOfRepeated(found.reply)))).map((patient) => ({ patient, param: 'conversation_id', what: 'the conversation' })) : []),
    ...(chat.referenced ?? []).flatMap((record) => record.subjects.map((patient) => ({ patient, param: record.param, what: 'the referenced item' }))),
  ]);
  // The stored records the turn takes in that are about its patient: on the reply's `about`, and disclosed.
  const takenIn = subject ? (chat.referenced ?? []).filter((record) => record.subjects.length > 0).map((record) => ({ reference: record.reference })) : [];
  const history = conversation && repeatsLatest ? withoutRepeated(conversation.history, repeated.messageCount) : (conversation?.history ?? { messages: [] });
  // The two rules below refuse a new turn before anything is stored; a replay above sends nothing, so they never refuse it.
  // Patient data egress: refused here (nothing stored, nothing sent), or the model wrapped to de-identify.
  const egress = await applyPatientDataEgress(services.patientData, { project: caller.project, model: requested, subject, conversationId: ids.rootId, messages: chat.messages, options: chat.options, tools: chat.tools, systemRepo: reader.systemRepo });
  const target = observed(egress.target, services.telemetry, caller.project.id, requestContextOf(response));
  // Budgets: 429 when one of the project's or the caller's is used up, or held by turns still running; otherwise
  // what holds the turn's likely cost while it runs (reserved just before the prompt is stored) and settles it.
  const maxTokens = chat.maxTokens ?? services.defaultMaxTokens;
  const budget = await checkBudgets(services.governance, caller, { modelId: target.id, promptTokens: estimatePromptTokens([...chat.messages, ...(history.instructions ?? []), ...history.messages], chat.tools), maxTokens });
  const parties: ConversationParties = {
    categorySystem: services.categorySystem,
    caller: callerParty(caller.profile) as CommunicationParty,
    agent,
    subject: subject?.reference,
  };
  // Read before anything is stored, with the caller's permissions: what the model may see of the chart.
  const sharingOptions = patientContextOptionsFor(caller.project, services.patientContext);
  const sharing = subject ? sharingFor(caller.project, sharingOptions, { mode: chat.patientContext, hasOwnTools: (chat.tools?.length ?? 0) > 0 }) : undefined;
  const patient = subject && (sharing?.summary || sharing?.tools) ? await readChartPatient(caller.repo, subject) : undefined;
  const patientContext = patient && sharing?.summary ? await buildPatientContext(caller.repo, patient, sharingOptions) : undefined;

  // The same key's turn running here already (a request sent twice at once): refused before it is journaled again,
  // with no await between this check and `records.open` below, so two such requests never both pass it.
  if (services.records.isOpen(ids.replyId)) {
    throw inProgress();
  }
  // Registered before anything is stored: a server that is shutting down refuses the turn with nothing written.
  const controller = services.inFlight.begin();
  // The records' ids are fixed first and the turn journaled before its prompt is written, so a process killed at
  // any point after the prompt's record leaves what the next start needs to record the reply (reply-records.ts).
  const { rootId, promptId, replyId } = ids;
  const sent = new Date();
  services.records.open({
    projectId: caller.project.id,
    parties,
    // The history is known already (step 3 ran above): journaled with the turn, not in a line of its own.
    reply: { id: replyId, rootId, promptId, modelId: target.id, history: historyRecordOf(history), takenIn, sideRequest },
    promptSent: sent.toISOString(),
    // What a reply recovered after this process stopped is charged (reply-records.ts).
    charge: { promptTokens: estimatePromptTokens(modelMessages(chat, history, patientContext), chat.tools), price: budget.priceOf(target.id) },
  });
  let accepted = false;
  try {
    // The budgets' second look, and the turn's holding until its reply settles it (or the finally below gives it back).
    budget.reserve();
    try {
      await recordPrompt(services, caller, parties, chat, { rootId, promptId, isNew: !root, sent: sent.toISOString(), input, sideRequest });
    } catch (error) {
      // Another request with the same Idempotency-Key wrote its prompt first.
      if (idempotencyKey && (await communicationExists(caller.repo, promptId))) {
        throw inProgress();
      }
      throw error;
    }
    accepted = true;
    annotateRequest(response, { conversationId: rootId, promptId });
    // Each disclosure of the patient's records is on record before the model is given them.
    const disclose = async (shared: Disclosure['shared'], access: DisclosureAccess): Promise<void> => {
      const system = await reader.systemRepo();
      const deIdentified = egress.deIdentification !== undefined;
      const event = buildDisclosureEvent({ caller: callerParty(caller.profile) as Disclosure['caller'], agent: parties.agent, patient: { reference: subject?.reference.reference }, shared, replyId, access, deIdentified });
      await requireStored(() => system.createResource(event));
    };
    const toolbox =
      patient && sharing?.tools
        ? new FhirToolbox(
            { repo: caller.repo, patient, types: sharingOptions.resourceTypes, options: sharingOptions.tools },
            (call, result) => disclose(result.shared, result.access?.kind === 'query' ? { kind: 'query', query: result.access.query, toolCallId: call.id } : { kind: 'read', toolCallId: call.id }),
            (call) => services.records.toolCall(replyId, egress.deIdentification?.asSentCall(call) ?? call)
          )
        : undefined;
    const draft: ChatTurn = {
      repo: caller.repo,
      projectId: caller.project.id,
      records: services.records,
      chat,
      target: toolbox ? withFhirTools(target, toolbox) : target,
      toolbox,
      parties,
      rootId,
      promptId,
      replyId,
      history: { messages: [] },
      patientContext,
      takenIn,
      deIdentification: egress.deIdentification,
      controller,
      reportedOperations,
      budget,
      usageWaitMs: services.governance.usageWaitMs,
      threadScope,
      sideRequest,
      completionId: `chatcmpl-${replyId}`,
      created: Math.floor(sent.getTime() / 1000),
      modelRequest: {
        model: target.modelName,
        messages: [],
        maxTokens,
        temperature: chat.temperature,
        tools: chat.tools,
        toolChoice: chat.toolChoice,
        options: chat.options,
      },
    };
    let turn: ChatTurn;
    try {
      if (patientContext) {
        // The chart summary is journaled as shared just before its disclosure is recorded, as the reply will state it.
        services.records.history(replyId, historyRecordOf(history), egress.deIdentification?.asSentContext(patientContext) ?? patientContext);
        await disclose(patientContext.shared, { kind: 'summary' });
      }
      if (takenIn.length > 0) {
        await disclose(takenIn, { kind: 'input' });
      }
      turn = { ...draft, history, modelRequest: { ...draft.modelRequest, messages: modelMessages(chat, history, patientContext) } };
    } catch (error) {
      // The prompt is on record, so the turn ends with its reply now, even though the provider was never called
      // (and saw nothing of the patient).
      throw await recordFailure({ ...draft, patientContext: undefined }, '', error);
    }
    leavePreparation();
    await deliver(services, api, turn, response);
  } finally {
    if (!accepted) {
      services.records.abandon(replyId);
    }
    budget.release();
    services.inFlight.end(controller);
  }
}

/** Steps 4–6, JSON or streamed; an open stream counts in the active-streams gauge. */
async function deliver<R extends ChatRequest>(services: ChatServices, api: TurnApi<R>, turn: ChatTurn, response: Response): Promise<void> {
  annotateRequest(response, { replyId: turn.replyId });
  if (!turn.chat.stream) {
    await api.deliver(turn, response);
    return;
  }
  services.telemetry.activeStreams.add(1);
  try {
    await api.deliver(turn, response);
  } finally {
    services.telemetry.activeStreams.add(-1);
  }
}

/** `create` called at most once, on first use. */
function once<T>(create: () => Promise<T>): () => Promise<T> {
  let made: Promise<T> | undefined;
  return () => (made ??= create());
}

/** The resolved model and its fallbacks, each provider call measured and traced, with retries and fallbacks around them. */
function observed(target: ResolvedModel, telemetry: Telemetry, projectId: string, parent: Context): ResolvedModel {
  const observe = (model: ResolvedModel): ResolvedModel => ({
    ...model,
    model: observeChatModel(model.model, telemetry, { projectId, modelName: model.modelName, parent }),
  });
  return withRetriesAndFallbacks({ ...observe(target), fallbacks: target.fallbacks.map(observe) });
}

/**
 * Tool results that open a continued conversation's request must answer calls of its last reply: checked before
 * anything is stored, so a wrong id is a 400 with nothing written, not a provider's refusal after the prompt.
 */
function checkAnsweredCalls(chat: ChatRequest, conversation: ConversationState): void {
  if (chat.answersEarlierCalls.length === 0) {
    return;
  }
  const unknown = chat.answersEarlierCalls.find((id) => !conversation.pendingCalls.has(id));
  if (unknown !== undefined) {
    throw new AppError('invalid_request', `Invalid request: a tool message answers '${unknown.slice(0, 64)}', which is not a call of the conversation's last reply.`, {
      details: { param: 'messages' },
    });
  }
}

/**
 * What the model is sent: the instructions the request's API sends apart from its messages, the instructions the
 * request opens with (or, when it brings none, those its history carries), the patient context, then the history,
 * then the request's other messages, in their order; tool calls nobody answered, and results of calls that are not
 * there, are left out (providers refuse them).
 */
function modelMessages(chat: ChatRequest, history: ConversationHistory, patientContext: PatientContext | undefined): ChatMessage[] {
  const own = requestMessagesOf(chat);
  const opening = openingInstructions(own);
  const context: ChatMessage[] = patientContext ? [{ role: 'system', content: patientContext.text }] : [];
  return [
    ...chat.messages.slice(0, chat.messages.length - own.length),
    ...opening,
    ...(history.instructions ?? []),
    ...context,
    ...withAnsweredCallsOnly([...history.messages, ...own.slice(opening.length)]),
  ];
}
