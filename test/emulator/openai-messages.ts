// Reads the conversation and the tools of an OpenAI chat request, and checks them as OpenAI does: a request the
// real API answers with a 400 gets a 400 here too (the message is OpenAI's), so a gateway that sends a malformed
// history (a tool result without its call, a call left unanswered) fails against the emulator as it would upstream.
import { isPlainObject } from './behaviour.ts';
import { readTextContent } from './provider-format.ts';
import type { NormalizedMessage, NormalizedTool, NormalizedToolCall, NormalizedToolChoice } from './provider-format.ts';

/** The tool part of a request. */
export interface OpenAiTools {
  tools: NormalizedTool[];
  toolChoice?: NormalizedToolChoice;
}

// OpenAI's function names: letters, digits, underscores and dashes, at most 64.
const FUNCTION_NAME = /^[a-zA-Z0-9_-]{1,64}$/;

/** Reads `messages`, with the calls of assistant messages and the ids of tool results; a string is the 400's message. */
export function readOpenAiMessages(value: unknown): NormalizedMessage[] | string {
  if (!Array.isArray(value)) {
    return 'messages must be an array';
  }
  const messages: NormalizedMessage[] = [];
  for (const [index, message] of value.entries()) {
    if (!isPlainObject(message) || typeof message.role !== 'string') {
      return 'each message needs a string role';
    }
    const normalized: NormalizedMessage = { role: message.role, content: readTextContent(message.content) };
    if (message.role === 'assistant' && message.tool_calls !== undefined && message.tool_calls !== null) {
      const calls = readToolCalls(message.tool_calls, `messages[${index}].tool_calls`);
      if (typeof calls === 'string') {
        return calls;
      }
      normalized.toolCalls = calls;
    }
    if (message.role === 'tool') {
      if (typeof message.tool_call_id !== 'string') {
        return `Missing required parameter: 'messages[${index}].tool_call_id'.`;
      }
      normalized.toolCallId = message.tool_call_id;
    }
    messages.push(normalized);
  }
  return checkToolResults(messages) ?? messages;
}

function readToolCalls(value: unknown, path: string): NormalizedToolCall[] | string {
  if (!Array.isArray(value)) {
    return `Invalid type for '${path}': expected an array.`;
  }
  if (value.length === 0) {
    return `Invalid '${path}': empty array. Expected an array with minimum length 1, but got an empty array instead.`;
  }
  const calls: NormalizedToolCall[] = [];
  for (const [index, call] of value.entries()) {
    const at = `${path}[${index}]`;
    if (!isPlainObject(call)) {
      return `Invalid type for '${at}': expected an object.`;
    }
    if (typeof call.id !== 'string') {
      return `Missing required parameter: '${at}.id'.`;
    }
    if (call.type !== 'function') {
      return `Invalid value for '${at}.type': expected 'function'.`;
    }
    if (!isPlainObject(call.function) || typeof call.function.name !== 'string') {
      return `Missing required parameter: '${at}.function.name'.`;
    }
    if (typeof call.function.arguments !== 'string') {
      return `Missing required parameter: '${at}.function.arguments'.`;
    }
    calls.push({ id: call.id, name: call.function.name, arguments: call.function.arguments });
  }
  return calls;
}

/**
 * A tool message must answer a call of the assistant message before it (other tool messages between them), and
 * every call of an assistant message must be answered before the next message that is not a tool result. A second
 * answer to the same call is refused too.
 */
function checkToolResults(messages: readonly NormalizedMessage[]): string | undefined {
  // The calls of the last assistant message with calls, while only tool messages followed it, and those unanswered.
  let open: ReadonlySet<string> | undefined;
  const unanswered = new Set<string>();
  const unansweredError = (): string =>
    "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. " +
    `The following tool_call_ids did not have response messages: ${[...unanswered].join(', ')}`;
  for (const message of messages) {
    if (message.role === 'tool') {
      if (open === undefined || message.toolCallId === undefined || !unanswered.delete(message.toolCallId)) {
        return "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.";
      }
      continue;
    }
    if (unanswered.size > 0) {
      return unansweredError();
    }
    open = undefined;
    if (message.toolCalls) {
      open = new Set(message.toolCalls.map((call) => call.id ?? ''));
      for (const id of open) {
        unanswered.add(id);
      }
    }
  }
  return unanswered.size > 0 ? unansweredError() : undefined;
}

/** Reads `tools`, `tool_choice` and `parallel_tool_calls`; a string is the 400's message. */
export function readOpenAiTools(body: Record<string, unknown>): OpenAiTools | string {
  const tools: NormalizedTool[] = [];
  if (body.tools !== undefined && body.tools !== null) {
    if (!Array.isArray(body.tools)) {
      return "Invalid type for 'tools': expected an array.";
    }
    for (const [index, tool] of body.tools.entries()) {
      const read = readTool(tool, `tools[${index}]`);
      if (typeof read === 'string') {
        return read;
      }
      tools.push(read);
    }
  }
  if (tools.length === 0) {
    for (const field of ['tool_choice', 'parallel_tool_calls']) {
      if (body[field] !== undefined && body[field] !== null) {
        return `Invalid value for '${field}': '${field}' is only allowed when 'tools' are specified.`;
      }
    }
    return { tools };
  }
  if (body.parallel_tool_calls !== undefined && typeof body.parallel_tool_calls !== 'boolean') {
    return "Invalid type for 'parallel_tool_calls': expected a boolean.";
  }
  if (body.tool_choice === undefined || body.tool_choice === null) {
    return { tools };
  }
  const toolChoice = readToolChoice(body.tool_choice, tools);
  // A choice is itself a string ('auto', ...): the reader's error comes wrapped.
  return 'error' in toolChoice ? toolChoice.error : { tools, toolChoice: toolChoice.choice };
}

function readTool(value: unknown, path: string): NormalizedTool | string {
  if (!isPlainObject(value)) {
    return `Invalid type for '${path}': expected an object.`;
  }
  if (value.type !== 'function') {
    return `Invalid value for '${path}.type': expected 'function'.`;
  }
  const definition = value.function;
  if (!isPlainObject(definition)) {
    return `Missing required parameter: '${path}.function'.`;
  }
  if (typeof definition.name !== 'string') {
    return `Missing required parameter: '${path}.function.name'.`;
  }
  if (!FUNCTION_NAME.test(definition.name)) {
    return `Invalid '${path}.function.name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.`;
  }
  if (definition.description !== undefined && typeof definition.description !== 'string') {
    return `Invalid type for '${path}.function.description': expected a string.`;
  }
  if (definition.parameters !== undefined && !isPlainObject(definition.parameters)) {
    return `Invalid type for '${path}.function.parameters': expected an object.`;
  }
  if (definition.strict !== undefined && definition.strict !== null && typeof definition.strict !== 'boolean') {
    return `Invalid type for '${path}.function.strict': expected a boolean.`;
  }
  const tool: NormalizedTool = { name: definition.name, parameters: definition.parameters ?? {} };
  if (definition.description !== undefined) {
    tool.description = definition.description;
  }
  if (typeof definition.strict === 'boolean') {
    tool.strict = definition.strict;
  }
  return tool;
}

function readToolChoice(value: unknown, tools: readonly NormalizedTool[]): { choice: NormalizedToolChoice } | { error: string } {
  if (value === 'auto' || value === 'none' || value === 'required') {
    return { choice: value };
  }
  if (!isPlainObject(value) || value.type !== 'function' || !isPlainObject(value.function) || typeof value.function.name !== 'string') {
    return { error: "Invalid value for 'tool_choice': expected 'none', 'auto', 'required' or {type: 'function', function: {name}}." };
  }
  const name = value.function.name;
  if (!tools.some((tool) => tool.name === name)) {
    return { error: `Invalid value for 'tool_choice': function '${name}' is not among the 'tools'.` };
  }
  return { choice: { name } };
}
