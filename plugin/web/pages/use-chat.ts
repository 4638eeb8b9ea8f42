/**
 * A conversation on the chat page: its messages (read from the store when an earlier one is opened), the reply
 * streaming in, sending the next prompt, and stopping a reply mid-way.
 */
import { useMedplum } from '@medplum/react';
import { useCallback, useEffect, useRef, useState } from 'react';
import { errorSentence, type ErrorSentence } from '../error-sentences.ts';
import { readConversation } from './read-conversation.ts';
import { streamChatReply } from './stream-chat-reply.ts';

export interface ChatMessage {
  readonly role: 'user' | 'assistant';
  readonly text: string;
  /** A reply stopped before it finished: its text is what was delivered. */
  readonly stopped?: boolean;
  /** A reply that failed. */
  readonly failed?: boolean;
}

export interface ChatState {
  readonly messages: readonly ChatMessage[];
  readonly conversationId: string | undefined;
  readonly loading: boolean;
  readonly sending: boolean;
  readonly error: ErrorSentence | undefined;
  send(model: string, prompt: string): Promise<string | undefined>;
  stop(): void;
}

/** `openId` is the conversation the page shows (from its address): read from the store when it is not the one on screen. */
export function useChat(openId: string | undefined): ChatState {
  const medplum = useMedplum();
  const [messages, setMessages] = useState<readonly ChatMessage[]>([]);
  const [conversationId, setConversationId] = useState<string>();
  const [loading, setLoading] = useState(false);
  const [sending, setSending] = useState(false);
  const [error, setError] = useState<ErrorSentence>();
  const controller = useRef<AbortController | undefined>(undefined);

  useEffect(() => {
    if (openId === conversationId) {
      return undefined;
    }
    controller.current?.abort();
    setError(undefined);
    setConversationId(openId);
    setMessages([]);
    if (!openId) {
      return undefined;
    }
    let current = true;
    setLoading(true);
    readConversation(medplum, openId)
      .then((thread) => current && setMessages(thread))
      .catch((caught: unknown) => current && setError(errorSentence(caught)))
      .finally(() => current && setLoading(false));
    return () => {
      current = false;
    };
    // Only a change of the address reads a thread; a new conversation's own id arriving does not.
  }, [medplum, openId]);

  const send = useCallback(
    async (model: string, prompt: string) => {
      const turn = new AbortController();
      controller.current = turn;
      setSending(true);
      setError(undefined);
      setMessages((current) => [...current, { role: 'user', text: prompt }, { role: 'assistant', text: '' }]);
      const updateReply = (update: (reply: ChatMessage) => ChatMessage): void =>
        setMessages((current) => [...current.slice(0, -1), update(current[current.length - 1])]);
      try {
        const id = await streamChatReply(medplum, { model, prompt, conversationId }, (text) => updateReply((reply) => ({ ...reply, text: reply.text + text })), turn.signal);
        if (turn.signal.aborted) {
          updateReply((reply) => ({ ...reply, stopped: true }));
        }
        setConversationId(id);
        return id;
      } catch (caught) {
        if (turn.signal.aborted) {
          updateReply((reply) => ({ ...reply, stopped: true }));
          return conversationId;
        }
        // A reply that never started is left out; one cut short keeps what came, marked as failed.
        setMessages((current) => (current[current.length - 1].text ? [...current.slice(0, -1), { ...current[current.length - 1], failed: true }] : current.slice(0, -1)));
        setError(errorSentence(caught));
        return conversationId;
      } finally {
        controller.current = undefined;
        setSending(false);
      }
    },
    [medplum, conversationId]
  );

  const stop = useCallback(() => controller.current?.abort(), []);

  return { messages, conversationId, loading, sending, error, send, stop };
}
