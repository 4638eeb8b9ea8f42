import type { ChatMessage } from '../llm/chat-model.ts';
import { asksForConversationLabel, quotedExchanges } from './side-requests.ts';
import { exchangeDigest, type ThreadScope } from './thread-digest.ts';

const scope: ThreadScope = ['project-1', 'Practitioner/p1'];
const user = (content: string): ChatMessage => ({ role: 'user', content });
const digest = (question: string, answer: string): string => exchangeDigest(scope, question, answer);

describe('side requests: the exchange a request quotes', () => {
  test("Open WebUI's task prompt: the chat history between <chat_history> markers, one USER: or ASSISTANT: line each", () => {
    const prompt = ['### Task:', 'Make a short title for the chat history.', '### Chat History:', '<chat_history>', 'USER: Remember 7.', 'ASSISTANT: Echo: Remember 7.', '</chat_history>'].join('\n');
    expect(quotedExchanges(scope, [user(prompt)])).toEqual([digest('Remember 7.', 'Echo: Remember 7.')]);
  });

  test('several exchanges, multi-line messages: each user message followed by a reply, newest last', () => {
    const prompt = '<chat_history>\nUSER: First\nline two\nASSISTANT: One\n\nTwo\nUSER: Second\nASSISTANT: Three\n</chat_history>';
    expect(quotedExchanges(scope, [user(prompt)])).toEqual([digest('First\nline two', 'One\n\nTwo'), digest('Second', 'Three')]);
  });

  test("LibreChat's title prompt (User: and AI: at its end) and LangChain's buffer (Human: and AI:)", () => {
    expect(quotedExchanges(scope, [user('Provide a concise title for the conversation.\n\nConversation:\nUser: Remember 7.\nAI: Echo: Remember 7.')])).toEqual([digest('Remember 7.', 'Echo: Remember 7.')]);
    expect(quotedExchanges(scope, [{ role: 'system', content: 'Summarise.' }, user('Human: Hi\nAI: Hello')])).toEqual([digest('Hi', 'Hello')]);
  });

  test('none for a request with an assistant message, a question quoting no reply, or plain text', () => {
    expect(quotedExchanges(scope, [user('USER: a\nASSISTANT: b'), { role: 'assistant', content: 'c' }, user('d')])).toBeUndefined();
    expect(quotedExchanges(scope, [user('USER: a question only')])).toBeUndefined();
    expect(quotedExchanges(scope, [user('Is the patient a user: of insulin?')])).toBeUndefined();
  });

  test('the digest is scoped to the caller and does not count the whitespace a UI strips', () => {
    expect(exchangeDigest(scope, ' Hi\n', 'Hello ')).toBe(digest('Hi', 'Hello'));
    expect(exchangeDigest(['project-1', 'Practitioner/p2'], 'Hi', 'Hello')).not.toBe(digest('Hi', 'Hello'));
  });
});

describe('side requests: a request that only asks for the conversation’s title or tags', () => {
  test.each([
    'Generate a concise title for this conversation.',
    'Write a short title for the chat above, 5 words or less.',
    'Provide a concise, 5-word-or-less title for the conversation.',
    'Suggest 3 tags for this discussion.',
  ])('%s', (text) => {
    expect(asksForConversationLabel([{ role: 'system', content: 'You name chats.' }, user(text)])).toBe(true);
  });

  test.each([
    ['a clinical question that mentions a title', [user('What is the title of the guideline on sepsis?')]],
    ['a question about a conversation with the patient', [user('How should I start the conversation with the family?')]],
    ['the instruction with another question', [user('Generate a title for this conversation.'), user('And what about sepsis?')]],
    ['a tool result', [{ role: 'tool', content: 'Generate a title for this chat', toolCallId: 'call_1' } as ChatMessage]],
  ])('not for %s', (_name, input) => {
    expect(asksForConversationLabel(input)).toBe(false);
  });
});
