/**
 * Side requests: the title, tag and follow-up requests chat UIs and agent frameworks make about a conversation after
 * a turn. Each is recorded with the conversation it is about (`partOf` its root, second category `ai-side-request`),
 * never as a conversation of its own, and is no turn of it: not in its history, not its latest exchange. The shapes
 * are the ones these clients send: Open WebUI's task prompts (its chat history quoted between `<chat_history>`
 * markers as `USER:` and `ASSISTANT:` lines, sent by its Python backend as one user message), LibreChat's title
 * prompt (through LangChain's ChatOpenAI, as LibreChat runs it: `User:` and `AI:` after the instruction), and
 * follow-up calls of LangChain and the AI SDK that send the exchange as messages, or name it, with an instruction.
 * The prompt texts are written for these tests in the shape each client uses.
 */
import { createOpenAI } from '@ai-sdk/openai';
import type { MedplumClient } from '@medplum/core';
import type { Communication } from '@medplum/fhirtypes';
import { AIMessage, HumanMessage, SystemMessage, type BaseMessage } from '@langchain/core/messages';
import { ChatOpenAI } from '@langchain/openai';
import { generateText } from 'ai';
import OpenAI from 'openai';
import type { FhirgateCompletion } from '../support/chat-clients.ts';
import { CHAT_MODEL, describeTurn, useClientMatrix } from './client-matrix.ts';

/** Open WebUI's title task: its instruction, then the last two messages of the chat as `ROLE: text` lines. */
const openWebUiTitle = (history: string): string =>
  ['### Task:', 'Generate a concise title of 3-5 words for the chat history.', '### Output:', 'JSON format: { "title": "the title" }', '### Chat History:', '<chat_history>', history, '</chat_history>'].join('\n');
/** Open WebUI's tags task: the same shape, with the last six messages. */
const openWebUiTags = (history: string): string => ['### Task:', 'Generate 1-3 broad tags for the chat history.', '### Chat History:', '<chat_history>', history, '</chat_history>'].join('\n');
/** LibreChat's title prompt (its `completion` method): the instruction, then the exchange as `User:` and `AI:`. */
const libreChatTitle = (input: string, output: string): string => `Provide a concise, 5-word-or-less title for the conversation. Only return the title itself.\n\nConversation:\nUser: ${input}\nAI: ${output}`;

describe('side requests: title, tags and follow-up calls are recorded with the conversation they are about', () => {
  const matrix = useClientMatrix();

  /** The records of the conversation `rootId`, in order, each by its first line; a side request's marked `(side)`. */
  const recordsOf = async (medplum: MedplumClient, rootId: string | undefined): Promise<string[]> =>
    (await medplum.searchResources('Communication', { 'part-of': `Communication/${rootId}`, _sort: 'sent' }, { cache: 'no-cache' })).map(
      (record) => `${describeTurn(record).split('\n')[0]}${isSide(record) ? ' (side)' : ''}`
    );
  const isSide = (record: Communication): boolean => (record.category ?? []).some((concept) => concept.coding?.some((coding) => coding.code === 'ai-side-request'));
  /** The project's conversation roots. */
  const roots = async (): Promise<Communication[]> => matrix.session.medplum.searchResources('Communication', { category: 'ai-conversation' }, { cache: 'no-cache' });

  test("Open WebUI: its title and tags tasks after the first turn, then the next turn: one conversation, the tasks beside its turns", async () => {
    const openai = new OpenAI({ baseURL: matrix.session.baseURL, apiKey: matrix.session.apiKey, defaultHeaders: matrix.session.headers, maxRetries: 0 });
    // Open WebUI keeps the chat itself and sends it whole with each turn.
    const chat: OpenAI.ChatCompletionMessageParam[] = [{ role: 'user', content: 'Remember 7.' }];
    const first = (await openai.chat.completions.create({ model: CHAT_MODEL, messages: chat })) as FhirgateCompletion;
    chat.push({ role: 'assistant', content: first.choices[0].message.content });
    // Its backend then posts each task as one user message, as its Python code does (metadata stripped), with fetch.
    const task = async (content: string): Promise<{ conversation_id: string }> => {
      const response = await fetch(`${matrix.session.baseURL}/chat/completions`, {
        method: 'POST',
        headers: { ...matrix.session.headers, Authorization: `Bearer ${await matrix.session.apiKey()}`, 'Content-Type': 'application/json' },
        body: JSON.stringify({ model: CHAT_MODEL, messages: [{ role: 'user', content }], stream: false }),
      });
      expect(response.status).toBe(200);
      return (await response.json()) as { conversation_id: string };
    };
    const title = await task(openWebUiTitle('USER: Remember 7.\nASSISTANT: Echo: Remember 7.'));
    const tags = await task(openWebUiTags('USER: Remember 7.\nASSISTANT: Echo: Remember 7.'));
    chat.push({ role: 'user', content: 'And 8?' });
    const second = (await openai.chat.completions.create({ model: CHAT_MODEL, messages: chat })) as FhirgateCompletion;

    expect([title.conversation_id, tags.conversation_id, second.conversation_id]).toEqual([first.conversation_id, first.conversation_id, first.conversation_id]);
    expect((await roots()).map((root) => root.id)).toEqual([first.conversation_id]);
    expect(await recordsOf(matrix.session.medplum, first.conversation_id)).toEqual([
      'prompt: Remember 7.',
      'reply: Echo: Remember 7.',
      'prompt: ### Task: (side)',
      'reply: Echo: ### Task: (side)',
      'prompt: ### Task: (side)',
      'reply: Echo: ### Task: (side)',
      'prompt: And 8?',
      'reply: Echo: And 8?',
    ]);
    // The conversation continued by name: its history holds its turns, none of the tasks.
    await openai.chat.completions.create({ model: CHAT_MODEL, conversation_id: first.conversation_id, messages: [{ role: 'user', content: 'Sum them.' }] } as never);
    expect(matrix.emulator.received.at(-1)?.messages.map((message) => message.content)).toEqual(['Remember 7.', 'Echo: Remember 7.', 'And 8?', 'Echo: And 8?', 'Sum them.']);
    // What a reviewer searches: the conversation's side requests.
    const side = await matrix.session.medplum.searchResources('Communication', { 'part-of': `Communication/${first.conversation_id}`, category: 'ai-side-request' }, { cache: 'no-cache' });
    expect(side).toHaveLength(4);
  });

  test("LibreChat's title prompt through LangChain's ChatOpenAI, after a turn: a side request of that conversation", async () => {
    const model = new ChatOpenAI({ model: CHAT_MODEL, apiKey: matrix.session.apiKey, configuration: { baseURL: matrix.session.baseURL, defaultHeaders: matrix.session.headers }, maxRetries: 0 });
    const messages: BaseMessage[] = [new SystemMessage('You are a helpful assistant.'), new HumanMessage('Remember 7.')];
    const answer = await model.invoke(messages);
    await model.invoke([new HumanMessage(libreChatTitle('Remember 7.', String(answer.content)))]);

    const [root] = await roots();
    expect(await roots()).toHaveLength(1);
    expect(await recordsOf(matrix.session.medplum, root.id)).toEqual([
      'prompt: Remember 7.',
      'reply: Echo: Remember 7.',
      'prompt: Provide a concise, 5-word-or-less title for the conversation. Only return the title itself. (side)',
      'reply: Echo: Provide a concise, 5-word-or-less title for the conversation. Only return the title itself. (side)',
    ]);
  });

  test('a LangChain follow-up that sends the exchange again with "Generate a concise title": a side request; the next turn continues the conversation', async () => {
    const model = new ChatOpenAI({ model: CHAT_MODEL, apiKey: matrix.session.apiKey, configuration: { baseURL: matrix.session.baseURL, defaultHeaders: matrix.session.headers }, maxRetries: 0 });
    const messages: BaseMessage[] = [new HumanMessage('Remember 7.')];
    messages.push(new AIMessage(String((await model.invoke(messages)).content)));
    const titled = await model.invoke([...messages, new HumanMessage('Generate a concise title for this conversation.')]);
    messages.push(new HumanMessage('And 8?'));
    await model.invoke(messages);

    expect(titled.content).toBe('Echo: Generate a concise title for this conversation.');
    const [root] = await roots();
    expect(await roots()).toHaveLength(1);
    expect(await recordsOf(matrix.session.medplum, root.id)).toEqual([
      'prompt: Remember 7.',
      'reply: Echo: Remember 7.',
      'prompt: Generate a concise title for this conversation. (side)',
      'reply: Echo: Generate a concise title for this conversation. (side)',
      'prompt: And 8?',
      'reply: Echo: And 8?',
    ]);
  });

  test('an AI SDK follow-up naming the response (previousResponseId): a side request; the chain goes on from the same response', async () => {
    const provider = createOpenAI({ baseURL: matrix.session.baseURL, apiKey: matrix.session.apiKey, headers: matrix.session.headers });
    const first = await generateText({ model: provider(CHAT_MODEL), prompt: 'Remember 7.', maxRetries: 0 });
    const previousResponseId = String(first.providerMetadata?.openai?.responseId);
    const title = await generateText({ model: provider(CHAT_MODEL), prompt: 'Write a short title for this conversation.', providerOptions: { openai: { previousResponseId } }, maxRetries: 0 });
    // The model was given the conversation to title.
    expect(matrix.emulator.received.at(-1)?.messages.map((message) => message.content)).toEqual(['Remember 7.', 'Echo: Remember 7.', 'Write a short title for this conversation.']);
    // The next turn continues from the same response: the title request did not move the conversation on.
    const second = await generateText({ model: provider(CHAT_MODEL), prompt: 'And 8?', providerOptions: { openai: { previousResponseId } }, maxRetries: 0 });

    expect(second.text).toBe('Echo: And 8?');
    expect(matrix.emulator.received.at(-1)?.messages.map((message) => message.content)).toEqual(['Remember 7.', 'Echo: Remember 7.', 'And 8?']);
    const [root] = await roots();
    expect(await recordsOf(matrix.session.medplum, root.id)).toEqual([
      'prompt: Remember 7.',
      'reply: Echo: Remember 7.',
      'prompt: Write a short title for this conversation. (side)',
      'reply: Echo: Write a short title for this conversation. (side)',
      'prompt: And 8?',
      'reply: Echo: And 8?',
    ]);
    // The side request's response is still the caller's to read back.
    const titleId = String(title.providerMetadata?.openai?.responseId);
    const openai = new OpenAI({ baseURL: matrix.session.baseURL, apiKey: matrix.session.apiKey, defaultHeaders: matrix.session.headers, maxRetries: 0 });
    expect(await openai.responses.retrieve(titleId)).toMatchObject({ id: titleId, output_text: 'Echo: Write a short title for this conversation.' });
  });

  test("a title task quoting a conversation about a patient is about that patient, as the conversation's turns are", async () => {
    const openai = new OpenAI({ baseURL: matrix.session.baseURL, apiKey: matrix.session.apiKey, defaultHeaders: matrix.session.headers, maxRetries: 0 });
    const patientId = matrix.session.project.ids['patient-in-care-team-1'];
    const first = (await openai.chat.completions.create({ model: CHAT_MODEL, patient_id: patientId, patient_context: 'none', messages: [{ role: 'user', content: 'Remember 7.' }] } as never)) as FhirgateCompletion;
    const title = (await openai.chat.completions.create({ model: CHAT_MODEL, messages: [{ role: 'user', content: openWebUiTitle('USER: Remember 7.\nASSISTANT: Echo: Remember 7.') }] })) as FhirgateCompletion;

    expect(title.conversation_id).toBe(first.conversation_id);
    const reply = await matrix.session.medplum.readResource('Communication', title.communication_id, { cache: 'no-cache' });
    expect(reply.subject?.reference).toBe(`Patient/${patientId}`);
  });

  test('a request that quotes no exchange of the caller, or asks something else, is what it was: a conversation or a turn', async () => {
    const openai = new OpenAI({ baseURL: matrix.session.baseURL, apiKey: matrix.session.apiKey, defaultHeaders: matrix.session.headers, maxRetries: 0 });
    const first = (await openai.chat.completions.create({ model: CHAT_MODEL, messages: [{ role: 'user', content: 'Remember 7.' }] })) as FhirgateCompletion;
    // Another exchange quoted (an answer the model never gave): a conversation of its own.
    const other = (await openai.chat.completions.create({ model: CHAT_MODEL, messages: [{ role: 'user', content: openWebUiTitle('USER: Remember 7.\nASSISTANT: Nine.') }] })) as FhirgateCompletion;
    // A question that mentions a title, in the conversation: a turn of it.
    const turn = (await openai.chat.completions.create({ model: CHAT_MODEL, conversation_id: first.conversation_id, messages: [{ role: 'user', content: 'What is the title of the sepsis guideline?' }] } as never)) as FhirgateCompletion;

    expect(other.conversation_id).not.toBe(first.conversation_id);
    expect(turn.conversation_id).toBe(first.conversation_id);
    expect(await recordsOf(matrix.session.medplum, first.conversation_id)).toEqual([
      'prompt: Remember 7.',
      'reply: Echo: Remember 7.',
      'prompt: What is the title of the sepsis guideline?',
      'reply: Echo: What is the title of the sepsis guideline?',
    ]);
  });
});
