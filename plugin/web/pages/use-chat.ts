/** A conversation on the chat page: its messages, the reply streaming in, and sending the next prompt. */
import { useMedplum } from '@medplum/react';
import { useCallback, useState } from 'react';
import { streamChatReply } from './stream-chat-reply.ts';

export interface ChatMessage {
  readonly role: 'user' | 'assistant';
  readonly text: string;
}

export interface ChatState {
  readonly messages: readonly ChatMessage[];
  readonly sending: boolean;
  readonly error: string | undefined;
  send(model: string, prompt: string): Promise<void>;
}

export function useChat(): ChatState {
  const medplum = useMedplum();
  const [messages, setMessages] = useState<readonly ChatMessage[]>([]);
  const [conversationId, setConversationId] = useState<string>();
  const [sending, setSending] = useState(false);
  const [error, setError] = useState<string>();

  const send = useCallback(
    async (model: string, prompt: string) => {
      setSending(true);
      setError(undefined);
      setMessages((current) => [...current, { role: 'user', text: prompt }, { role: 'assistant', text: '' }]);
      const appendToReply = (text: string): void =>
        setMessages((current) => [...current.slice(0, -1), { role: 'assistant', text: current[current.length - 1].text + text }]);
      try {
        setConversationId(await streamChatReply(medplum, { model, prompt, conversationId }, appendToReply));
      } catch (caught) {
        setError((caught as Error).message);
      } finally {
        setSending(false);
      }
    },
    [medplum, conversationId]
  );

  return { messages, sending, error, send };
}
