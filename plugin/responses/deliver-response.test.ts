/**
 * A streamed Responses turn whose provider call ends in an abort the turn did not ask for (the provider's own, its
 * client still connected): a provider failure, told in-band as `response.failed` and on record `not-done`, never a
 * client that left. The route is real HTTP (supertest); the provider call is the test's.
 */
import express from 'express';
import request from 'supertest';
import type { Communication } from '@medplum/fhirtypes';
import type { ChatTurn } from '../chat/chat-turn.ts';
import type { ChatStreamEvent } from '../llm/chat-model.ts';
import { deliveryTurnFields } from '../../test/support/delivery-turn.ts';
import { deliverResponse } from './deliver-response.ts';

const MESSAGES = [{ role: 'user' as const, content: 'Latest glucose?' }];

/** A streamed Responses turn whose provider sends `text`, then fails with `failure`. */
function turnFailingAfter(text: string, failure: Error): { turn: ChatTurn; recorded: Communication[] } {
  const recorded: Communication[] = [];
  const turn = {
    projectId: 'project-1',
    records: {
      record: async (_projectId: string, resource: Communication) => {
        recorded.push(resource);
        return 'stored';
      },
      delivered: () => undefined,
      whenWritten: () => false,
      writeWaiting: () => undefined,
    },
    chat: { messages: MESSAGES, stream: true, includeUsage: false, body: { model: 'openai/gpt-4o', input: 'Latest glucose?', stream: true } },
    target: {
      id: 'openai/gpt-4o',
      model: {
        provider: 'test',
        complete: () => Promise.reject(new Error('not asked whole')),
        stream: async function* (): AsyncGenerator<ChatStreamEvent> {
          yield { type: 'text', text };
          throw failure;
        },
      },
    },
    ...deliveryTurnFields(MESSAGES),
  } as unknown as ChatTurn;
  return { turn, recorded };
}

test("a stream cut by the provider's own abort, its client still there: response.failed with upstream_error, the reply not-done with the text sent", async () => {
  const { turn, recorded } = turnFailingAfter('Glucose is ', Object.assign(new Error('The operation was aborted.'), { name: 'AbortError' }));
  const app = express().post('/v1/responses', async (_incoming, response) => {
    await deliverResponse(turn, response);
  });

  const response = await request(app).post('/v1/responses').expect(200);

  const events = response.text
    .split('\n\n')
    .filter((frame) => frame.includes('data: '))
    .map((frame) => JSON.parse(frame.slice(frame.indexOf('data: ') + 'data: '.length)) as { type: string; response?: { status: string; error?: { code: string; message: string } } });
  const failed = events.at(-1);
  expect(failed?.type).toBe('response.failed');
  expect(failed?.response?.error?.message).toMatch(/^The call to the LLM provider '.+' failed\.$/);
  expect(recorded).toHaveLength(1);
  expect(recorded[0]).toMatchObject({ status: 'not-done', statusReason: { coding: [{ code: 'upstream_error' }] }, payload: [{ contentString: 'Glucose is ' }] });
  expect(turn.controller.signal.aborted).toBe(false);
});
