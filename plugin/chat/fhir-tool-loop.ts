/**
 * The model with FHIR tools: each call to it becomes a loop of steps. The model is given the tools; when it calls
 * them, fhirgate runs the calls (fhir-tools.ts), puts each disclosure on record before the model sees its result
 * (an AuditEvent, and the reply journal), gives the model the results and asks again, until it answers without
 * calling, or `maxSteps` rounds of calls were made (then it is asked once more with tools not allowed). For the
 * delivery steps this is still one model: a JSON call returns the text of every step, a stream yields every
 * step's text as it comes (the final answer streams) and one `finish` with the usage of all steps.
 */
import type { ChatCompletion, ChatMessage, ChatModel, ChatModelRequest, ChatStreamEvent, ChatTokenLogprob, ChatTool, ChatToolCall, ChatUsage } from '../llm/chat-model.ts';
import type { ResolvedModel } from '../llm/model-registry.ts';
import type { FhirToolRecord } from './communication-builders.ts';
import { fhirToolDefinitions, runFhirTool, type FhirToolResult, type FhirToolScope } from './fhir-tools.ts';

/** Puts a call's disclosure on record: resolves once the records may be given to the model. */
export type RecordDisclosure = (call: ChatToolCall, result: FhirToolResult) => Promise<void>;

/** The FHIR tools of one turn, and the calls run so far (for the reply's record). */
export class FhirToolbox {
  readonly tools: readonly ChatTool[];
  readonly #scope: FhirToolScope;
  readonly #recordDisclosure: RecordDisclosure;
  readonly #onCall: (call: FhirToolRecord) => void;
  readonly #calls: FhirToolRecord[] = [];

  /** `onCall` is told each call before the model is given its result (the reply journal keeps it). */
  constructor(scope: FhirToolScope, recordDisclosure: RecordDisclosure, onCall: (call: FhirToolRecord) => void = () => undefined) {
    this.#scope = scope;
    this.#recordDisclosure = recordDisclosure;
    this.#onCall = onCall;
    this.tools = fhirToolDefinitions(scope.types, scope.options);
  }

  get maxSteps(): number {
    return this.#scope.options.maxSteps;
  }

  /** The calls run so far, in order. */
  get calls(): readonly FhirToolRecord[] {
    return this.#calls;
  }

  /** Runs a call; a result with records is on record before this resolves. */
  async run(call: ChatToolCall): Promise<FhirToolRecord> {
    const result = await runFhirTool(this.#scope, call);
    if (result.shared.length > 0) {
      await this.#recordDisclosure(call, result);
    }
    const record: FhirToolRecord = { id: call.id, name: call.name, arguments: call.arguments, result: result.text, shared: result.shared };
    this.#calls.push(record);
    this.#onCall(record);
    return record;
  }
}

/** `target` with the toolbox's tools: the same model, id and fallbacks, each call run as a loop of steps. */
export function withFhirTools(target: ResolvedModel, toolbox: FhirToolbox): ResolvedModel {
  const model: ChatModel = {
    provider: target.model.provider,
    checkRequest: (request) => target.model.checkRequest?.(request),
    complete: (request) => completeWithTools(target.model, toolbox, request),
    stream: (request) => streamWithTools(target.model, toolbox, request),
  };
  return {
    ...target,
    model,
    get id() {
      return target.id;
    },
  };
}

async function completeWithTools(model: ChatModel, toolbox: FhirToolbox, request: ChatModelRequest): Promise<ChatCompletion> {
  let messages = request.messages;
  let text = '';
  let usage: ChatUsage | undefined;
  // The answer's text is every step's: so are its tokens' log probabilities.
  const logprobs: ChatTokenLogprob[] = [];
  for (let step = 0; ; step++) {
    const last = step >= toolbox.maxSteps;
    const completion = await model.complete(stepRequest(request, toolbox, messages, last));
    text += completion.text;
    usage = addUsage(usage, completion.usage);
    logprobs.push(...(completion.logprobs ?? []));
    const calls = completion.toolCalls ?? [];
    if (calls.length === 0 || last) {
      return { text, finishReason: finishReasonOf(completion.finishReason, calls), usage, ...(request.options?.logprobs ? { logprobs } : {}) };
    }
    messages = await runStep(toolbox, messages, completion.text, calls);
  }
}

async function* streamWithTools(model: ChatModel, toolbox: FhirToolbox, request: ChatModelRequest): AsyncGenerator<ChatStreamEvent> {
  let messages = request.messages;
  let usage: ChatUsage | undefined;
  for (let step = 0; ; step++) {
    const last = step >= toolbox.maxSteps;
    const calls: { id: string; name: string; arguments: string }[] = [];
    let text = '';
    let finish: Extract<ChatStreamEvent, { type: 'finish' }> | undefined;
    for await (const event of model.stream(stepRequest(request, toolbox, messages, last))) {
      if (event.type === 'text') {
        text += event.text;
        yield event;
      } else if (event.type === 'tool_call') {
        const call = (calls[event.index] ??= { id: '', name: '', arguments: '' });
        call.id ||= event.id ?? '';
        call.name ||= event.name ?? '';
        call.arguments += event.arguments;
      } else {
        finish = event;
      }
    }
    usage = addUsage(usage, finish?.usage);
    const made = calls.filter((call) => call !== undefined);
    if (made.length === 0 || last) {
      yield { type: 'finish', finishReason: finishReasonOf(finish?.finishReason ?? 'stop', made), usage };
      return;
    }
    messages = await runStep(toolbox, messages, text, made);
  }
}

/** One step's request: the conversation so far, the tools, and on the last step no calls allowed. */
function stepRequest(request: ChatModelRequest, toolbox: FhirToolbox, messages: readonly ChatMessage[], last: boolean): ChatModelRequest {
  return { ...request, messages, tools: toolbox.tools, toolChoice: last ? 'none' : 'auto' };
}

/** Runs a step's calls in order; the conversation grows by the model's calls and their results. */
async function runStep(toolbox: FhirToolbox, messages: readonly ChatMessage[], text: string, calls: readonly ChatToolCall[]): Promise<ChatMessage[]> {
  const next: ChatMessage[] = [...messages, { role: 'assistant', content: text, toolCalls: calls }];
  for (const call of calls) {
    const record = await toolbox.run(call);
    next.push({ role: 'tool', content: record.result, toolCallId: call.id });
  }
  return next;
}

/** A model still calling tools after the last step was stopped by the bound: its answer ends as `length`. */
function finishReasonOf(reason: ChatCompletion['finishReason'], calls: readonly ChatToolCall[]): ChatCompletion['finishReason'] {
  return calls.length > 0 || reason === 'tool_calls' ? 'length' : reason;
}

function addUsage(total: ChatUsage | undefined, usage: ChatUsage | undefined): ChatUsage | undefined {
  if (!usage) {
    return total;
  }
  return { promptTokens: (total?.promptTokens ?? 0) + usage.promptTokens, completionTokens: (total?.completionTokens ?? 0) + usage.completionTokens };
}
