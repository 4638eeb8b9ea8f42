/**
 * The conversation and the tools of a request in Anthropic's Messages shape, and the calls of its replies. The
 * port's messages are OpenAI-like (a `tool` message per result); Anthropic wants content blocks: an assistant's
 * calls are `tool_use` blocks after its text, and results are `tool_result` blocks at the start of the next user
 * message, all of one round's results in that one message, followed by the user's text if the user spoke next.
 */
import type { Anthropic } from '@anthropic-ai/sdk';
import type { ChatMessage, ChatModelRequest, ChatToolCall, ChatToolChoice } from './chat-model.ts';
import { toArgumentsObject } from './tool-arguments.ts';

type MessageParam = Anthropic.MessageParam;
type ContentBlockParam = Anthropic.ContentBlockParam;

/**
 * The request's system text (system and developer messages, joined; text parts as text blocks of their own) and
 * its other messages, as Anthropic takes them.
 */
export function toAnthropicConversation(messages: readonly ChatMessage[]): { system: string | Anthropic.TextBlockParam[] | undefined; messages: MessageParam[] } {
  const instructions = messages.filter((message): message is Extract<ChatMessage, { role: 'system' | 'developer' | 'user' }> => message.role === 'system' || message.role === 'developer');
  const system = instructions.some((message) => message.parts)
    ? instructions.flatMap((message) => message.parts ?? [message.content]).map((text): Anthropic.TextBlockParam => ({ type: 'text', text }))
    : instructions.map((message) => message.content).join('\n\n');
  const converted: MessageParam[] = [];
  // The user message being filled with tool results, while nothing else followed them.
  let results: ContentBlockParam[] | undefined;
  for (const message of messages) {
    switch (message.role) {
      case 'system':
      case 'developer':
        break;
      case 'tool': {
        const block: ContentBlockParam = { type: 'tool_result', tool_use_id: message.toolCallId, content: message.content };
        if (results) {
          results.push(block);
        } else {
          results = [block];
          converted.push({ role: 'user', content: results });
        }
        break;
      }
      case 'user': {
        // Text parts are text blocks, as Anthropic's own clients send them.
        const blocks = (message.parts?.length ? message.parts : [message.content]).map((text): ContentBlockParam => ({ type: 'text', text }));
        if (results) {
          // The user's text joins the results' message: the next message must be the assistant's.
          results.push(...blocks);
        } else {
          converted.push({ role: 'user', content: message.parts?.length ? blocks : message.content });
        }
        results = undefined;
        break;
      }
      case 'assistant':
        results = undefined;
        converted.push(toAssistantMessage(message));
        break;
    }
  }
  return { system: system === '' || system.length === 0 ? undefined : system, messages: converted };
}

function toAssistantMessage(message: Extract<ChatMessage, { role: 'assistant' }>): MessageParam {
  const calls = message.toolCalls ?? [];
  if (calls.length === 0) {
    return { role: 'assistant', content: message.content };
  }
  // Anthropic refuses an empty text block; a reply that only called has none.
  const text: ContentBlockParam[] = message.content === '' ? [] : [{ type: 'text', text: message.content }];
  const uses: ContentBlockParam[] = calls.map((call) => ({ type: 'tool_use', id: call.id, name: call.name, input: toArgumentsObject(call.arguments) }));
  return { role: 'assistant', content: [...text, ...uses] };
}

/** `tools` and `tool_choice`, or nothing when the request offers no tools. */
export function toAnthropicTools(request: ChatModelRequest): { tools?: Anthropic.Tool[]; tool_choice?: Anthropic.ToolChoice } {
  const tools = request.tools ?? [];
  if (tools.length === 0) {
    return {};
  }
  return {
    // Anthropic requires the schema's `type: 'object'`, which OpenAI lets a client leave out; arguments are an object anyway.
    tools: tools.map((tool) => ({
      name: tool.name,
      description: tool.description,
      input_schema: { ...tool.parameters, type: 'object' },
      ...(tool.strict === undefined ? {} : { strict: tool.strict }),
    })),
    tool_choice: toToolChoice(request.toolChoice, request.options?.parallelToolCalls === false),
  };
}

/** OpenAI's `parallel_tool_calls: false` is Anthropic's `disable_parallel_tool_use`, which lives in the tool choice. */
function toToolChoice(choice: ChatToolChoice | undefined, oneCallAtATime: boolean): Anthropic.ToolChoice | undefined {
  const parallel = oneCallAtATime ? { disable_parallel_tool_use: true } : {};
  switch (choice) {
    case undefined:
      return oneCallAtATime ? { type: 'auto', ...parallel } : undefined;
    case 'auto':
      return { type: 'auto', ...parallel };
    case 'none':
      return { type: 'none' };
    case 'required':
      return { type: 'any', ...parallel };
    default:
      return { type: 'tool', name: choice.name, ...parallel };
  }
}

/** The calls of a whole reply: its `tool_use` blocks, in order, their input as JSON text. */
export function readToolUses(content: readonly Anthropic.ContentBlock[]): ChatToolCall[] {
  const calls: ChatToolCall[] = [];
  for (const block of content) {
    if (block.type === 'tool_use') {
      calls.push({ id: block.id, name: block.name, arguments: JSON.stringify(block.input ?? {}) });
    }
  }
  return calls;
}
