/**
 * A conversation on the chat page: its messages (read from the store when an earlier one is opened), the patient it
 * is about, the reply streaming in, sending the next prompt, stopping a reply mid-way, and, under a reply about a
 * patient, the records of the chart it was given (read from the reply's record once it is written).
 */
import { useMedplum } from '@medplum/react';
import type { MedplumClient } from '@medplum/core';
import type { Communication, Patient, Reference } from '@medplum/fhirtypes';
import { useCallback, useEffect, useRef, useState } from 'react';
import { errorSentence, type ErrorSentence } from '../error-sentences.ts';
import { readConversation } from './read-conversation.ts';
import { sharedRecordsOf, type SharedRecord } from './shared-records.ts';
import { streamChatReply } from './stream-chat-reply.ts';

export interface ChatMessage {
  readonly role: 'user' | 'assistant';
  readonly text: string;
  /** A reply stopped before it finished: its text is what was delivered. */
  readonly stopped?: boolean;
  /** A reply that failed. */
  readonly failed?: boolean;
  /** The records of the patient's chart the model was given for this reply (its `about`). */
  readonly shared?: readonly SharedRecord[];
}

export interface SendOptions {
  /** The patient the turn is about (`patient_id`); a conversation about a patient stays about them. */
  readonly patientId?: string;
  /** The models the picker marks as taking patient data, for the sentence of a refusal. */
  readonly patientDataModels?: readonly string[];
}

export interface ChatState {
  readonly messages: readonly ChatMessage[];
  readonly conversationId: string | undefined;
  /** The patient the conversation is about: once a turn is about one, every later turn is. */
  readonly patient: Reference<Patient> | undefined;
  readonly loading: boolean;
  readonly sending: boolean;
  readonly error: ErrorSentence | undefined;
  send(model: string, prompt: string, options?: SendOptions): Promise<string | undefined>;
  stop(): void;
}

/** `openId` is the conversation the page shows (from its address): read from the store when it is not the one on screen. */
export function useChat(openId: string | undefined): ChatState {
  const medplum = useMedplum();
  const [messages, setMessages] = useState<readonly ChatMessage[]>([]);
  const [conversationId, setConversationId] = useState<string>();
  const [patient, setPatient] = useState<Reference<Patient>>();
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
    setPatient(undefined);
    if (!openId) {
      return undefined;
    }
    let current = true;
    setLoading(true);
    readConversation(medplum, openId)
      .then((thread) => {
        if (current) {
          setMessages(thread.messages);
          setPatient(thread.patient);
        }
      })
      .catch((caught: unknown) => current && setError(errorSentence(caught)))
      .finally(() => current && setLoading(false));
    return () => {
      current = false;
    };
    // Only a change of the address reads a thread; a new conversation's own id arriving does not.
  }, [medplum, openId]);

  const send = useCallback(
    async (model: string, prompt: string, options: SendOptions = {}) => {
      const turn = new AbortController();
      controller.current = turn;
      const startedAt = new Date().toISOString();
      const patientId = patient?.reference?.split('/')[1] ?? options.patientId;
      setSending(true);
      setError(undefined);
      setMessages((current) => [...current, { role: 'user', text: prompt }, { role: 'assistant', text: '' }]);
      const updateReply = (update: (reply: ChatMessage) => ChatMessage): void =>
        setMessages((current) => [...current.slice(0, -1), update(current[current.length - 1])]);
      try {
        const result = await streamChatReply(medplum, { model, prompt, conversationId, patientId }, (text) => updateReply((reply) => ({ ...reply, text: reply.text + text })), turn.signal);
        if (turn.signal.aborted) {
          updateReply((reply) => ({ ...reply, stopped: true }));
        }
        setConversationId(result.conversationId);
        if (patientId) {
          setPatient({ reference: `Patient/${patientId}` });
          // The reply's record is written before its last chunk; a reply stopped mid-way is recorded once the server
          // sees the stop, and named by no chunk: it is the conversation's newest reply since the turn began.
          const record = result.communicationId
            ? await medplum.readResource('Communication', result.communicationId, { cache: 'no-cache' }).catch(() => undefined)
            : turn.signal.aborted && result.conversationId
              ? await stoppedReply(medplum, result.conversationId, startedAt)
              : undefined;
          const shared = record ? sharedRecordsOf(record) : [];
          if (shared.length) {
            updateReply((reply) => ({ ...reply, shared }));
          }
        }
        return result.conversationId;
      } catch (caught) {
        if (turn.signal.aborted) {
          updateReply((reply) => ({ ...reply, stopped: true }));
          return conversationId;
        }
        // A reply that never started is left out; one cut short keeps what came, marked as failed.
        setMessages((current) => (current[current.length - 1].text ? [...current.slice(0, -1), { ...current[current.length - 1], failed: true }] : current.slice(0, -1)));
        setError(errorSentence(caught, { aboutPatient: Boolean(patientId), patientDataModels: options.patientDataModels }));
        return conversationId;
      } finally {
        controller.current = undefined;
        setSending(false);
      }
    },
    [medplum, conversationId, patient]
  );

  const stop = useCallback(() => controller.current?.abort(), []);

  return { messages, conversationId, patient, loading, sending, error, send, stop };
}

/** How long a stopped reply's record is waited for: the server records it once it sees the client go. */
const STOPPED_REPLY_WAIT_MS = 5000;

/** The conversation's newest stopped reply recorded since `since`, read as the user (up to a few seconds after a stop). */
async function stoppedReply(medplum: MedplumClient, conversationId: string, since: string): Promise<Communication | undefined> {
  const deadline = Date.now() + STOPPED_REPLY_WAIT_MS;
  for (;;) {
    const reply = await medplum
      .searchOne('Communication', { 'part-of': `Communication/${conversationId}`, category: 'ai-response', status: 'stopped', sent: `ge${since}`, _sort: '-sent' }, { cache: 'no-cache' })
      .catch(() => undefined);
    if (reply || Date.now() > deadline) {
      return reply;
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}
