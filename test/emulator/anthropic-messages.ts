// Reads the conversation and the tools of an Anthropic Messages request, and checks them as Anthropic does: every
// `tool_use` block must be answered by a `tool_result` block at the start of the next turn, and a `tool_result`
// must answer a `tool_use` of the turn just before it. Such requests get Anthropic's 400 (its messages), so a
// gateway that reloads a malformed history fails against the emulator as it would upstream.
import { isPlainObject } from './behaviour.ts';
import { readTextContent } from './provider-format.ts';
import type { NormalizedMessage, NormalizedTool, NormalizedToolCall, NormalizedToolChoice } from './provider-format.ts';

// Anthropic's tool names: letters, digits, underscores and dashes, at most 128.
const TOOL_NAME = /^[a-zA-Z0-9_-]{1,128}$/;

/** One message (or, joined, one turn) as sent, with what the tool checks need. */
interface Turn {
  readonly position: number;
  readonly role: string;
  /** Ids of the `tool_use` blocks of an assistant message. */
  readonly toolUses: readonly string[];
  /** Ids of the `tool_result` blocks of a user message, in order. */
  readonly toolResults: readonly string[];
  /** The kind of each content block in order (a string content is one `other`). */
  readonly kinds: readonly ('result' | 'other')[];
}

/**
 * Reads `messages` into normalized messages: an assistant message's `tool_use` blocks become its `toolCalls`
 * (arguments: the `input` object as JSON), a user message's `tool_result` blocks become `tool` messages before its
 * text. A string is the 400's message.
 */
export function readAnthropicMessages(value: unknown): NormalizedMessage[] | string {
  if (!Array.isArray(value)) {
    return 'messages: Input should be a valid list';
  }
  const messages: NormalizedMessage[] = [];
  const turns: Turn[] = [];
  for (const [position, message] of value.entries()) {
    if (!isPlainObject(message) || typeof message.role !== 'string') {
      return `messages.${position}: each message needs a string role`;
    }
    const blocks = Array.isArray(message.content) ? message.content : [];
    const toolUses: NormalizedToolCall[] = [];
    const toolResults: NormalizedMessage[] = [];
    const kinds: Turn['kinds'][number][] = typeof message.content === 'string' && message.content !== '' ? ['other'] : [];
    for (const [index, block] of blocks.entries()) {
      const at = `messages.${position}.content.${index}`;
      if (isPlainObject(block) && block.type === 'tool_use') {
        const call = readToolUse(block, at, message.role);
        if (typeof call === 'string') {
          return call;
        }
        toolUses.push(call);
      } else if (isPlainObject(block) && block.type === 'tool_result') {
        if (message.role !== 'user') {
          return `${at}: tool_result blocks are only allowed in user messages`;
        }
        if (typeof block.tool_use_id !== 'string') {
          return `${at}.tool_result.tool_use_id: Field required`;
        }
        kinds.push('result');
        toolResults.push({ role: 'tool', content: readTextContent(block.content), toolCallId: block.tool_use_id });
      } else {
        kinds.push('other');
      }
    }
    turns.push({
      position,
      role: message.role,
      toolUses: toolUses.map((call) => call.id ?? ''),
      toolResults: toolResults.map((result) => result.toolCallId ?? ''),
      kinds,
    });
    messages.push(...toolResults);
    const content = readTextContent(message.content);
    // A user message of tool results only is its tool messages; one with text also has its user message after them.
    if (toolResults.length === 0 || content !== '') {
      messages.push(toolUses.length > 0 ? { role: message.role, content, toolCalls: toolUses } : { role: message.role, content });
    }
  }
  return checkToolResults(turns) ?? messages;
}

function readToolUse(block: Record<string, unknown>, at: string, role: string): NormalizedToolCall | string {
  if (role !== 'assistant') {
    return `${at}: tool_use blocks are only allowed in assistant messages`;
  }
  for (const field of ['id', 'name'] as const) {
    if (typeof block[field] !== 'string') {
      return `${at}.tool_use.${field}: Field required`;
    }
  }
  if (!isPlainObject(block.input)) {
    return `${at}.tool_use.input: Input should be a valid dictionary`;
  }
  return { id: String(block.id), name: String(block.name), arguments: JSON.stringify(block.input) };
}

/**
 * Anthropic joins consecutive messages of one role into one turn, then: the turn after an assistant turn with
 * `tool_use` blocks must begin with a `tool_result` for each of them, and a `tool_result` must answer a `tool_use`
 * of the turn just before.
 */
function checkToolResults(messages: readonly Turn[]): string | undefined {
  const turns: Turn[] = [];
  for (const message of messages) {
    const last = turns.at(-1);
    if (last && last.role === message.role) {
      turns[turns.length - 1] = {
        position: last.position,
        role: last.role,
        toolUses: [...last.toolUses, ...message.toolUses],
        toolResults: [...last.toolResults, ...message.toolResults],
        kinds: [...last.kinds, ...message.kinds],
      };
    } else {
      turns.push(message);
    }
  }
  for (const [index, turn] of turns.entries()) {
    const previous = index > 0 ? turns[index - 1] : undefined;
    const expected = new Set(previous?.toolUses ?? []);
    for (const id of turn.toolResults) {
      if (!expected.delete(id)) {
        return (
          `messages.${turn.position}.content.0: unexpected \`tool_use_id\` found in \`tool_result\` blocks: ${id}. ` +
          'Each `tool_result` block must have a corresponding `tool_use` block in the previous message.'
        );
      }
    }
    const firstOther = turn.kinds.indexOf('other');
    if (previous && previous.toolUses.length > 0 && firstOther !== -1 && turn.kinds.lastIndexOf('result') > firstOther) {
      return (
        `messages.${turn.position}: Did not find ${previous.toolUses.length} \`tool_result\` block(s) at the beginning of this message. ` +
        'Messages following `tool_use` blocks must begin with a matching number of `tool_result` blocks.'
      );
    }
    if (expected.size > 0) {
      return toolUseWithoutResult(previous?.position ?? 0, expected);
    }
  }
  const last = turns.at(-1);
  if (last && last.toolUses.length > 0) {
    return toolUseWithoutResult(last.position, new Set(last.toolUses));
  }
  return undefined;
}

function toolUseWithoutResult(position: number, ids: ReadonlySet<string>): string {
  return (
    `messages.${position}: \`tool_use\` ids were found without \`tool_result\` blocks immediately after: ${[...ids].join(', ')}. ` +
    'Each `tool_use` block must have a corresponding `tool_result` block in the next message.'
  );
}

/** Reads `tools` and `tool_choice`; a string is the 400's message. */
export function readAnthropicTools(body: Record<string, unknown>): { tools: NormalizedTool[]; toolChoice?: NormalizedToolChoice } | string {
  const tools: NormalizedTool[] = [];
  if (body.tools !== undefined) {
    if (!Array.isArray(body.tools)) {
      return 'tools: Input should be a valid list';
    }
    for (const [index, tool] of body.tools.entries()) {
      const read = readTool(tool, `tools.${index}`);
      if (typeof read === 'string') {
        return read;
      }
      tools.push(read);
    }
  }
  if (body.tool_choice === undefined) {
    return { tools };
  }
  const toolChoice = readToolChoice(body.tool_choice);
  // A choice is itself a string ('auto', ...): the reader's error comes wrapped.
  return 'error' in toolChoice ? toolChoice.error : { tools, toolChoice: toolChoice.choice };
}

function readTool(value: unknown, path: string): NormalizedTool | string {
  if (!isPlainObject(value)) {
    return `${path}: Input should be a valid dictionary`;
  }
  if (typeof value.name !== 'string') {
    return `${path}.name: Field required`;
  }
  if (!TOOL_NAME.test(value.name)) {
    return `${path}.name: String should match pattern '^[a-zA-Z0-9_-]{1,128}$'`;
  }
  if (value.description !== undefined && typeof value.description !== 'string') {
    return `${path}.description: Input should be a valid string`;
  }
  if (value.input_schema === undefined) {
    return `${path}.input_schema: Field required`;
  }
  if (!isPlainObject(value.input_schema)) {
    return `${path}.input_schema: Input should be a valid dictionary`;
  }
  if (value.input_schema.type !== 'object') {
    return `${path}.input_schema.type: Input should be 'object'`;
  }
  if (value.strict !== undefined && typeof value.strict !== 'boolean') {
    return `${path}.strict: Input should be a valid boolean`;
  }
  const tool: NormalizedTool = { name: value.name, parameters: value.input_schema };
  if (value.description !== undefined) {
    tool.description = value.description;
  }
  if (typeof value.strict === 'boolean') {
    tool.strict = value.strict;
  }
  return tool;
}

function readToolChoice(value: unknown): { choice: NormalizedToolChoice } | { error: string } {
  if (!isPlainObject(value)) {
    return { error: 'tool_choice: Input should be a valid dictionary' };
  }
  switch (value.type) {
    case 'auto':
    case 'none':
      return { choice: value.type };
    case 'any':
      return { choice: 'required' };
    case 'tool':
      return typeof value.name === 'string' ? { choice: { name: value.name } } : { error: 'tool_choice.tool.name: Field required' };
    default:
      return { error: "tool_choice: Input tag does not match any of the expected tags: 'auto', 'any', 'tool', 'none'" };
  }
}
