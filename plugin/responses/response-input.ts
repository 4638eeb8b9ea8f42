/**
 * The `input` of a Responses request: a string (one user message) or a list of items, read into the messages the
 * provider port takes. Items fhirgate reads:
 * - `message` (`type` may be left out): `user`, `system` and `developer` messages of text (`input_text` parts),
 *   `assistant` messages of `output_text` (and `refusal`) parts, as the API returned them;
 * - `function_call`, the model's call as the API returned it, and `function_call_output`, its result;
 * - `item_reference`, naming the message or a function call of a response fhirgate gave (read from its record).
 * Anything else is refused by name: images, files and audio (fhirgate sends and records text only), reasoning items
 * (fhirgate returns none), hosted tools' items, tool namespaces, programmatic and asynchronous calls.
 */
import { z } from 'zod';
import { AppError } from '../errors.ts';
import type { ChatMessage, ChatToolCall } from '../llm/chat-model.ts';
import { TOOL_NAME_PATTERN } from '../chat/chat-request.ts';

/** An input item, read; `index` is its place in `input`, for the errors that name it. */
export type InputItem =
  | { readonly kind: 'message'; readonly index: number; readonly role: 'user' | 'system' | 'developer'; readonly text: string; readonly parts?: readonly string[] }
  | { readonly kind: 'assistant'; readonly index: number; readonly text: string }
  | { readonly kind: 'function_call'; readonly index: number; readonly call: ChatToolCall }
  | { readonly kind: 'function_call_output'; readonly index: number; readonly callId: string; readonly output: string }
  | { readonly kind: 'reference'; readonly index: number; readonly id: string };

/** An input item with its references read. */
export type ResolvedInputItem = Exclude<InputItem, { readonly kind: 'reference' }>;

/** The messages the items stand for, and for each message the index of the item it starts at. */
export interface InputMessages {
  readonly messages: ChatMessage[];
  readonly itemIndex: number[];
}

const NON_TEXT = new Set(['input_image', 'input_file', 'input_audio']);
/** A call's id: FHIR keeps it in a string, which is never blank. */
const callId = z.string().max(256).regex(/\S/, 'must not be empty');
/** Fields the API puts on the items it returns, which clients send back as they got them; nothing to act on. */
const echoed = { id: z.string().nullish(), status: z.enum(['in_progress', 'completed', 'incomplete']).nullish() };
/** A schema that refuses its field with `message` when it is given (null counts as not given). */
const refused = (message: string) => z.unknown().refine(() => false, message).optional();
/**
 * Who made a call: `direct` (the model) is every call fhirgate knows; `program` (programmatic tool calling) is
 * refused, as `tools.N.allowed_callers` is.
 */
const caller = z
  .object({ type: z.string() })
  .passthrough()
  .refine((value) => value.type === 'direct', 'only direct calls are supported: programmatic tool calling is not')
  .optional();
/** Tool namespaces group tools fhirgate does not serve: its tools are flat function tools. */
const namespace = refused('tool namespaces are not supported: fhirgate serves flat function tools only');
/**
 * Whether a call runs asynchronously: `false` is every call fhirgate knows; `true` is refused, as `tools.N.async`
 * is: fhirgate's tools are never asynchronous, so such a call is not one it made.
 */
const asyncCall = z
  .boolean('must be a boolean')
  .refine((value) => !value, 'asynchronous function calls are not supported: fhirgate never makes one (its tools cannot be asynchronous)')
  .optional();

const functionCallSchema = z
  .object({
    type: z.literal('function_call'),
    call_id: callId,
    name: z.string().regex(TOOL_NAME_PATTERN, 'is not a valid function name'),
    arguments: z.string(),
    async: asyncCall,
    caller,
    namespace,
    ...echoed,
  })
  .strict();
const functionCallOutputSchema = z
  .object({
    type: z.literal('function_call_output'),
    call_id: callId,
    output: z.union([z.string(), z.array(z.object({ type: z.string() }).passthrough())]),
    // The tool's name, as the API returns it: the output answers its call by `call_id`, so it is not needed.
    name: z.string().regex(TOOL_NAME_PATTERN, 'is not a valid function name').optional(),
    caller,
    namespace,
    ...echoed,
  })
  .strict();
const itemReferenceSchema = z.object({ type: z.literal('item_reference').nullish(), id: z.string().min(1).max(128) }).strict();
const messageSchema = z
  .object({
    type: z.literal('message').optional(),
    role: z.enum(['user', 'system', 'developer', 'assistant'], 'must be user, system, developer or assistant'),
    content: z.union([z.string(), z.array(z.object({ type: z.string() }).passthrough())]),
    // The API's label of an assistant message (`commentary`, `final_answer`): chat providers have no such label.
    phase: z.enum(['commentary', 'final_answer'], 'must be commentary or final_answer').optional(),
    ...echoed,
  })
  .strict()
  .refine((message) => message.phase === undefined || message.role === 'assistant', { message: 'labels assistant messages only', path: ['phase'] });

/** Reads `input`; a bad item is a 400 naming it (`input.3.content.0.type`). */
export function readInputItems(input: string | readonly unknown[]): InputItem[] {
  if (typeof input === 'string') {
    return [{ kind: 'message', index: 0, role: 'user', text: input }];
  }
  return input.map((item, index) => readItem(item, index));
}

function readItem(item: unknown, index: number): InputItem {
  if (typeof item !== 'object' || item === null || Array.isArray(item)) {
    throw invalid(`input.${index}`, 'must be an object');
  }
  const fields = withoutNulls(item as Record<string, unknown>);
  const type = fields.type;
  if (type === 'message' || (type === undefined && 'role' in fields)) {
    const message = parse(messageSchema, fields, index);
    return message.role === 'assistant'
      ? { kind: 'assistant', index, text: assistantText(message.content, index) }
      : { kind: 'message', index, role: message.role, ...userText(message.content, index) };
  }
  if (type === 'function_call') {
    const call = parse(functionCallSchema, fields, index);
    return { kind: 'function_call', index, call: { id: call.call_id, name: call.name, arguments: call.arguments } };
  }
  if (type === 'function_call_output') {
    const result = parse(functionCallOutputSchema, fields, index);
    const output = typeof result.output === 'string' ? result.output : textOfParts(result.output, ['input_text'], `input.${index}.output`).text;
    return { kind: 'function_call_output', index, callId: result.call_id, output };
  }
  if (type === 'item_reference' || (type === undefined && 'id' in fields)) {
    return { kind: 'reference', index, id: parse(itemReferenceSchema, fields, index).id };
  }
  if (type === undefined) {
    throw invalid(`input.${index}.type`, 'is required: an item is a message (with a role), a function_call, a function_call_output or an item_reference');
  }
  const why = type === 'reasoning' ? 'fhirgate returns no reasoning items: leave them out' : 'is not an item fhirgate accepts: messages, function_call, function_call_output and item_reference are';
  throw invalid(`input.${index}.type`, `'${String(type).slice(0, 64)}' ${type === 'reasoning' ? `is not supported: ${why}` : why}`);
}

function userText(content: string | readonly Record<string, unknown>[], index: number): { text: string; parts?: readonly string[] } {
  return typeof content === 'string' ? { text: content } : textOfParts(content, ['input_text'], `input.${index}.content`);
}

function assistantText(content: string | readonly Record<string, unknown>[], index: number): string {
  return typeof content === 'string' ? content : textOfParts(content, ['output_text', 'refusal'], `input.${index}.content`).text;
}

/**
 * The text of content parts of the `accepted` types, joined with nothing between them (as the provider port keeps
 * text parts), and the parts as sent. A part may carry only its text, and on `output_text` what the API returned
 * with it (`annotations`, which fhirgate never gives, so only empty; `logprobs`, reports of a past reply).
 */
function textOfParts(parts: readonly Record<string, unknown>[], accepted: readonly string[], path: string): { text: string; parts: string[] } {
  const texts = parts.map((part, index) => {
    const at = `${path}.${index}`;
    const type = String(part.type);
    if (!accepted.includes(type)) {
      const why = NON_TEXT.has(type) ? 'parts are not supported: fhirgate sends and records text only' : `is not a content part fhirgate accepts here (${accepted.join(', ')})`;
      throw invalid(`${at}.type`, `${type.slice(0, 32)} ${why}`);
    }
    const field = type === 'refusal' ? 'refusal' : 'text';
    if (typeof part[field] !== 'string') {
      throw invalid(`${at}.${field}`, 'must be a string');
    }
    const allowed = type === 'output_text' ? [field, 'type', 'annotations', 'logprobs'] : [field, 'type'];
    const other = Object.keys(part).find((key) => !allowed.includes(key) && part[key] !== null && part[key] !== undefined);
    if (other !== undefined) {
      throw invalid(`${at}.${other.slice(0, 64)}`, 'is not supported on content parts');
    }
    if (Array.isArray(part.annotations) && part.annotations.length > 0) {
      throw invalid(`${at}.annotations`, 'are not supported: fhirgate gives no annotations');
    }
    return part[field] as string;
  });
  return { text: texts.join(''), parts: texts };
}

/**
 * The items as messages: a `function_call` joins the assistant message before it (or opens one), as a chat
 * completion's assistant message holds its text and its calls; each output is a tool message.
 */
export function toInputMessages(items: readonly ResolvedInputItem[]): InputMessages {
  const messages: ChatMessage[] = [];
  const itemIndex: number[] = [];
  const push = (message: ChatMessage, index: number): void => {
    messages.push(message);
    itemIndex.push(index);
  };
  for (const item of items) {
    const last = messages.at(-1);
    switch (item.kind) {
      case 'message':
        push({ role: item.role, content: item.text, ...(item.parts && item.parts.length > 1 ? { parts: item.parts } : {}) }, item.index);
        break;
      case 'assistant':
        push({ role: 'assistant', content: item.text }, item.index);
        break;
      case 'function_call':
        if (last?.role === 'assistant') {
          messages[messages.length - 1] = { ...last, toolCalls: [...(last.toolCalls ?? []), item.call] };
        } else {
          push({ role: 'assistant', content: '', toolCalls: [item.call] }, item.index);
        }
        break;
      case 'function_call_output':
        push({ role: 'tool', content: item.output, toolCallId: item.callId }, item.index);
        break;
    }
  }
  return { messages, itemIndex };
}

function parse<T>(schema: z.ZodType<T>, fields: Record<string, unknown>, index: number): T {
  const result = schema.safeParse(fields);
  if (result.success) {
    return result.data;
  }
  const issue = result.error.issues[0];
  const path = ['input', index, ...issue.path, ...(issue.code === 'unrecognized_keys' ? [issue.keys[0]] : [])].map(String).join('.');
  throw invalid(path, issue.code === 'unrecognized_keys' ? 'is not a field fhirgate knows on this item; see the Responses fields in docs/api.md' : issue.message);
}

/** OpenAI takes null for "not given". */
function withoutNulls(fields: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(fields).filter(([, value]) => value !== null));
}

function invalid(param: string, message: string): AppError {
  return new AppError('invalid_request', `Invalid request: ${param}: ${message}.`, { details: { param } });
}
