/**
 * The output items of a streamed response, as their events go out: the message (`output_item.added`,
 * `content_part.added`, `output_text.delta`s) from the reply's first text, each function call (`output_item.added`,
 * `function_call_arguments.delta`s) from its first fragment, in the order they begin. Items stay open until the
 * reply ends (text may follow a call), then each is closed in order with its `.done` events.
 */
import type { ChatTokenLogprob, ChatToolCall } from '../llm/chat-model.ts';
import { toWireLogprobs } from '../chat/wire-format.ts';
import { functionCallItem, messageItem, outputTextPart, type ItemStatus } from './response-object.ts';
import type { ResponseEventWriter } from './response-event-writer.ts';

interface OpenMessage {
  readonly outputIndex: number;
  text: string;
  readonly logprobs: ChatTokenLogprob[];
}

interface OpenCall {
  readonly outputIndex: number;
  /** Its place among the reply's calls: the `<index>` of its item id, and of the call's record. */
  readonly callIndex: number;
  readonly call: { id: string; name: string; arguments: string };
}

/** The items of one streamed reply. */
export class StreamedOutput {
  readonly #events: ResponseEventWriter;
  readonly #replyId: string;
  readonly #withLogprobs: boolean;
  #message: OpenMessage | undefined;
  readonly #calls = new Map<number, OpenCall>();
  #items = 0;

  /** `withLogprobs`: the request asked for log probabilities, so the text part carries them. */
  constructor(events: ResponseEventWriter, replyId: string, withLogprobs: boolean) {
    this.#events = events;
    this.#replyId = replyId;
    this.#withLogprobs = withLogprobs;
  }

  /** The text streamed so far. */
  get text(): string {
    return this.#message?.text ?? '';
  }

  /** The calls streamed so far, in order, as the reply's record keeps them. */
  get toolCalls(): ChatToolCall[] {
    return [...this.#calls.values()].map(({ call }) => ({ ...call }));
  }

  /** A piece of the reply's text. */
  async addText(text: string, logprobs?: readonly ChatTokenLogprob[]): Promise<void> {
    const message = this.#message ?? (await this.#openMessage());
    message.text += text;
    message.logprobs.push(...(logprobs ?? []));
    await this.#events.send({
      type: 'response.output_text.delta',
      item_id: `msg_${this.#replyId}`,
      output_index: message.outputIndex,
      content_index: 0,
      delta: text,
      logprobs: logprobs ? toWireLogprobs(logprobs).content : [],
    });
  }

  /** A fragment of the call at `index` (the first carries its id and name, every one more arguments). */
  async addToolCall(fragment: { readonly index: number; readonly id?: string; readonly name?: string; readonly arguments: string }): Promise<void> {
    let open = this.#calls.get(fragment.index);
    if (!open) {
      open = { outputIndex: this.#items++, callIndex: this.#calls.size, call: { id: fragment.id ?? '', name: fragment.name ?? '', arguments: '' } };
      this.#calls.set(fragment.index, open);
      await this.#events.send({ type: 'response.output_item.added', output_index: open.outputIndex, item: functionCallItem(this.#replyId, open.callIndex, open.call, 'in_progress') });
    }
    if (fragment.arguments) {
      open.call.arguments += fragment.arguments;
      await this.#events.send({
        type: 'response.function_call_arguments.delta',
        item_id: `fc_${this.#replyId}_${open.callIndex}`,
        output_index: open.outputIndex,
        delta: fragment.arguments,
      });
    }
  }

  /** Closes every item, in order: `output_text.done`, `content_part.done`, `function_call_arguments.done`, `output_item.done`. */
  async close(): Promise<void> {
    for (const item of this.#ordered()) {
      if ('message' in item) {
        const itemId = `msg_${this.#replyId}`;
        const part = this.#part(item.message);
        const logprobs = this.#withLogprobs ? toWireLogprobs(item.message.logprobs).content : [];
        await this.#events.send({ type: 'response.output_text.done', item_id: itemId, output_index: item.outputIndex, content_index: 0, text: item.message.text, logprobs });
        await this.#events.send({ type: 'response.content_part.done', item_id: itemId, output_index: item.outputIndex, content_index: 0, part });
      } else {
        const itemId = `fc_${this.#replyId}_${item.callIndex}`;
        await this.#events.send({ type: 'response.function_call_arguments.done', item_id: itemId, output_index: item.outputIndex, name: item.call.name, arguments: item.call.arguments });
      }
      await this.#events.send({ type: 'response.output_item.done', output_index: item.outputIndex, item: this.#item(item, 'completed') });
    }
  }

  /** The items as the Response object lists them, in order. */
  items(status: ItemStatus): Record<string, unknown>[] {
    return this.#ordered().map((item) => this.#item(item, status));
  }

  #ordered(): (OpenCall | { outputIndex: number; message: OpenMessage })[] {
    const message = this.#message;
    return [...(message ? [{ outputIndex: message.outputIndex, message }] : []), ...this.#calls.values()].sort((a, b) => a.outputIndex - b.outputIndex);
  }

  #item(item: OpenCall | { outputIndex: number; message: OpenMessage }, status: ItemStatus): Record<string, unknown> {
    return 'message' in item ? messageItem(this.#replyId, status, [this.#part(item.message)]) : functionCallItem(this.#replyId, item.callIndex, item.call, status);
  }

  #part(message: OpenMessage): Record<string, unknown> {
    return outputTextPart(message.text, this.#withLogprobs ? message.logprobs : undefined);
  }

  async #openMessage(): Promise<OpenMessage> {
    const message: OpenMessage = { outputIndex: this.#items++, text: '', logprobs: [] };
    this.#message = message;
    const itemId = `msg_${this.#replyId}`;
    await this.#events.send({ type: 'response.output_item.added', output_index: message.outputIndex, item: messageItem(this.#replyId, 'in_progress', []) });
    await this.#events.send({ type: 'response.content_part.added', item_id: itemId, output_index: message.outputIndex, content_index: 0, part: this.#part(message) });
    return message;
  }
}
