/**
 * The messages a turn added to its conversation, as its prompt keeps them, so that every later turn's history holds
 * them as the client sent them: roles, names, text parts, tool calls and results.
 *
 * What a reviewer reads stays where Medplum's app shows it: the user's words and the tool results are the prompt's
 * `payload` (one item per text part; tool results marked with the call they answer, as before). Each message is
 * described, in order, by a `message` extension (fhir-vocabulary.ts): its `role`, its `name`, and its content, the
 * next `payload` items of the prompt for a user message or a tool result, or `text` pieces for a system, developer
 * or assistant message (few-shot examples, a client's own instructions), `part` counts for content sent as parts,
 * and an assistant's `tool-call`s. A prompt written before these extensions (fhirgate 0.x) has none: it is read as
 * it was written, its payload's tool results and then its user text (recorded-messages.ts).
 */
import type { CommunicationPayload, Extension } from '@medplum/fhirtypes';
import type { ChatMessage, ChatToolCall } from '../llm/chat-model.ts';
import { extensionsText, payloadItemText, textExtensions, textPayload } from './fhir-text.ts';
import { EXTENSION } from './fhir-vocabulary.ts';

/** A prompt's `payload` and `message` extensions for the turn's messages. */
export interface PromptContent {
  readonly payload: CommunicationPayload[];
  readonly extension: Extension[];
}

/** The turn's messages as its prompt records them (see the file's comment). */
export function promptContentOf(messages: readonly ChatMessage[]): PromptContent {
  const payload: CommunicationPayload[] = [];
  const extension: Extension[] = [];
  for (const message of messages) {
    const fields: Extension[] = [{ url: 'role', valueCode: message.role }];
    if ('name' in message && message.name !== undefined && message.name.trim()) {
      fields.push({ url: 'name', valueString: message.name });
    }
    switch (message.role) {
      case 'tool': {
        const marker: Extension[] = [{ url: EXTENSION.toolResult, valueString: message.toolCallId }];
        // An empty result still needs its item, to say which call it answers.
        const items = message.content ? textPayload(message.content, marker) : [{ extension: marker, contentAttachment: { contentType: 'text/plain' } }];
        payload.push(...items);
        fields.push({ url: 'tool-call-id', valueString: message.toolCallId }, { url: 'payload', valueInteger: items.length });
        break;
      }
      case 'user': {
        const parts = (message.parts ?? [message.content]).map((text) => textPayload(text));
        payload.push(...parts.flat());
        fields.push({ url: 'payload', valueInteger: parts.flat().length }, ...partCounts(message.parts ? parts : undefined));
        break;
      }
      case 'assistant':
        fields.push(...textExtensions('text', message.content), ...(message.toolCalls ?? []).map((call) => ({ url: 'tool-call', extension: callFields(call) })));
        break;
      default: {
        const parts = (message.parts ?? [message.content]).map((text) => textExtensions('text', text));
        fields.push(...parts.flat(), ...partCounts(message.parts ? parts : undefined));
      }
    }
    extension.push({ url: EXTENSION.message, extension: fields });
  }
  return { payload, extension };
}

/**
 * The messages a prompt recorded with `message` extensions, in order; undefined for a prompt without them (written
 * before them: read by its payload alone). A description it cannot read (a record edited by hand) is left out.
 */
export function recordedPromptMessages(prompt: { readonly payload?: readonly CommunicationPayload[]; readonly extension?: readonly Extension[] }): ChatMessage[] | undefined {
  const described = (prompt.extension ?? []).filter((extension) => extension.url === EXTENSION.message);
  if (described.length === 0) {
    return undefined;
  }
  const items = prompt.payload ?? [];
  let next = 0;
  const messages: ChatMessage[] = [];
  for (const description of described) {
    const fields = readFields(description.extension ?? []);
    const { role, name, counts } = fields;
    if (role === 'user' || role === 'tool') {
      const own = items.slice(next, next + Math.max(0, fields.payload ?? 0));
      next += own.length;
      const texts = own.map(payloadItemText);
      const content = texts.join('');
      if (role === 'tool') {
        const toolCallId = fields.toolCallId ?? own[0]?.extension?.find((extension) => extension.url === EXTENSION.toolResult)?.valueString;
        if (toolCallId) {
          messages.push({ role: 'tool', content, toolCallId });
        }
        continue;
      }
      messages.push({ role, content, ...(counts.length > 0 ? { parts: grouped(texts, counts) } : {}), ...named(name) });
    } else if (role === 'assistant') {
      const toolCalls = fields.toolCalls.map(callOf);
      messages.push({ role, content: extensionsText(fields.texts), ...(toolCalls.length > 0 ? { toolCalls } : {}), ...named(name) });
    } else if (role === 'system' || role === 'developer') {
      const texts = fields.texts.map((piece) => extensionsText([piece]));
      messages.push({ role, content: texts.join(''), ...(counts.length > 0 ? { parts: grouped(texts, counts) } : {}), ...named(name) });
    }
  }
  return messages;
}

/** A `message` extension's fields, read in one pass: the first of each single field, every one of the repeated. */
interface MessageFields {
  role?: string;
  name?: string;
  payload?: number;
  toolCallId?: string;
  readonly counts: number[];
  readonly texts: Extension[];
  readonly toolCalls: Extension[];
}

function readFields(fields: readonly Extension[]): MessageFields {
  const read: MessageFields = { counts: [], texts: [], toolCalls: [] };
  for (const field of fields) {
    switch (field.url) {
      case 'role':
        if (!('role' in read)) {
          read.role = field.valueCode;
        }
        break;
      case 'name':
        if (!('name' in read)) {
          read.name = field.valueString;
        }
        break;
      case 'payload':
        if (!('payload' in read)) {
          read.payload = field.valueInteger;
        }
        break;
      case 'tool-call-id':
        if (!('toolCallId' in read)) {
          read.toolCallId = field.valueString;
        }
        break;
      case 'part':
        read.counts.push(Math.max(0, field.valueInteger ?? 0));
        break;
      case 'text':
        read.texts.push(field);
        break;
      case 'tool-call':
        read.toolCalls.push(field);
        break;
    }
  }
  return read;
}

/** How many pieces each part took, in order: a `part` field each (none for content sent as one string). */
function partCounts(parts: readonly (readonly unknown[])[] | undefined): Extension[] {
  return (parts ?? []).map((pieces) => ({ url: 'part', valueInteger: pieces.length }));
}

/** The pieces joined back into the parts they were cut from. */
function grouped(pieces: readonly string[], counts: readonly number[]): string[] {
  let next = 0;
  return counts.map((count) => {
    const part = pieces.slice(next, next + count).join('');
    next += count;
    return part;
  });
}

function named(name: string | undefined): { name?: string } {
  return name === undefined ? {} : { name };
}

function callFields(call: ChatToolCall): Extension[] {
  return [
    { url: 'id', valueString: call.id },
    { url: 'name', valueString: call.name },
    ...(call.arguments.trim() ? [{ url: 'arguments', valueString: call.arguments }] : []),
  ];
}

function callOf(extension: Extension): ChatToolCall {
  const part = (url: string): string => extension.extension?.find((candidate) => candidate.url === url)?.valueString ?? '';
  return { id: part('id'), name: part('name'), arguments: part('arguments') };
}
