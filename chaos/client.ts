/**
 * One chaos request through the openai SDK, as a client would send it, and what that client saw: its status or
 * error, the text it received, and the ids fhirgate gave it. A client that "leaves" aborts its own request.
 */
import OpenAI, { APIConnectionError, APIError } from 'openai';
import type { FaultKind } from './faults.ts';

/** How a request ended, from the client's side. */
export type ClientEnd =
  | 'answered' // a JSON 200
  | 'streamed' // a stream that reached [DONE]
  | 'in-band-error' // a stream that started and then carried an error event
  | 'http-error' // an error status before any byte of the answer
  | 'left' // the client aborted its own request
  | 'broken'; // the connection failed (refused, reset: the host was killed)

export interface ClientSeen {
  readonly index: number;
  readonly marker: string;
  readonly fault: FaultKind;
  readonly stream: boolean;
  end: ClientEnd;
  status?: number;
  text: string;
  conversationId?: string;
  communicationId?: string;
  completionTokens?: number;
}

export interface ChaosRequest {
  readonly index: number;
  readonly marker: string;
  readonly fault: FaultKind;
  readonly stream: boolean;
  /** The emulator's behaviour for this request, written into its message. */
  readonly behaviour?: unknown;
  /** For `client-leaves-*`: abort after this many text chunks (mid-stream) or milliseconds (early). */
  readonly leaveAfter: number;
}

/** What the run does when a client leaves: `client-leaves-during-stall` stalls the host right after it. */
export interface ChaosHooks {
  readonly onLeave?: (request: ChaosRequest) => void;
}

/** Sends the request to the host at `baseUrl` and records what came back. */
export async function sendChaosRequest(baseUrl: string, token: string, projectId: string, request: ChaosRequest, hooks: ChaosHooks = {}): Promise<ClientSeen> {
  const openai = new OpenAI({ baseURL: `${baseUrl}v1`, apiKey: token, defaultHeaders: { 'X-Project-ID': projectId }, maxRetries: 0, timeout: 60_000 });
  const seen: ClientSeen = { index: request.index, marker: request.marker, fault: request.fault, stream: request.stream, end: 'broken', text: '' };
  const controller = new AbortController();
  const content = `${request.marker} Tell me about the last visit.${request.behaviour ? ` [emulator-behaviour ${JSON.stringify(request.behaviour)}]` : ''}`;
  const body = { model: 'openai-compatible/echo', messages: [{ role: 'user' as const, content }] };
  let timer: NodeJS.Timeout | undefined;
  if (request.fault === 'client-leaves-early') {
    timer = setTimeout(() => controller.abort(), request.leaveAfter);
  }
  try {
    if (!request.stream) {
      const completion = (await openai.chat.completions.create(body, { signal: controller.signal })) as OpenAI.ChatCompletion & {
        conversation_id?: string;
        communication_id?: string;
      };
      seen.end = 'answered';
      seen.status = 200;
      seen.text = completion.choices[0]?.message.content ?? '';
      seen.conversationId = completion.conversation_id;
      seen.communicationId = completion.communication_id;
      seen.completionTokens = completion.usage?.completion_tokens;
      return seen;
    }
    const stream = await openai.chat.completions.create({ ...body, stream: true }, { signal: controller.signal });
    seen.status = 200;
    let chunks = 0;
    for await (const chunk of stream) {
      const extra = chunk as unknown as { conversation_id?: string; communication_id?: string };
      seen.conversationId ??= extra.conversation_id;
      seen.communicationId ??= extra.communication_id;
      const text = chunk.choices[0]?.delta.content ?? '';
      seen.text += text;
      if (text) {
        chunks++;
      }
      if ((request.fault === 'client-leaves-mid-stream' || request.fault === 'client-leaves-during-stall') && chunks >= request.leaveAfter) {
        controller.abort();
        hooks.onLeave?.(request);
      }
    }
    // The SDK ends a stream quietly when its signal aborts: that is the client leaving, not the end of the answer.
    seen.end = controller.signal.aborted ? 'left' : 'streamed';
  } catch (error) {
    if (controller.signal.aborted) {
      seen.end = 'left';
    } else if (error instanceof APIConnectionError || !(error instanceof APIError)) {
      seen.end = 'broken';
    } else if (seen.status === 200) {
      seen.end = 'in-band-error';
    } else {
      seen.end = 'http-error';
      seen.status = error.status;
    }
  } finally {
    clearTimeout(timer);
  }
  return seen;
}
