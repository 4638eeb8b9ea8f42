/**
 * The chat completion request of the spec, validated. Known fields are checked strictly; other OpenAI fields
 * (`top_p`, `stop`, `seed`, `user`, ...) are kept and passed to the provider where it supports them.
 */
import { z } from 'zod';
import { AppError } from '../errors.ts';

const messageSchema = z.object({
  role: z.enum(['system', 'user', 'assistant']),
  content: z.string(),
});

const chatRequestSchema = z
  .object({
    messages: z.array(messageSchema).min(1, 'messages must not be empty'),
    stream: z.boolean().optional(),
    model: z.string().min(1).optional(),
    conversation_id: z.string().regex(/^[A-Za-z0-9\-.]{1,64}$/, 'conversation_id is not a valid id').optional(),
    patient_id: z.string().regex(/^[A-Za-z0-9\-.]{1,64}$/, 'patient_id is not a valid id').optional(),
    max_tokens: z.number().int().positive().optional(),
    temperature: z.number().min(0).max(2).optional(),
    stream_options: z.object({ include_usage: z.boolean().optional() }).nullish(),
  })
  .catchall(z.unknown());

/** A validated chat completion request. */
export interface ChatRequest {
  readonly messages: readonly { readonly role: 'system' | 'user' | 'assistant'; readonly content: string }[];
  readonly stream: boolean;
  readonly model?: string;
  readonly conversationId?: string;
  readonly patientId?: string;
  readonly maxTokens?: number;
  readonly temperature?: number;
  readonly includeUsage: boolean;
  /** Other OpenAI fields, passed on to the provider. */
  readonly extra: Readonly<Record<string, unknown>>;
  /** The body as the client sent it: recorded on the prompt, so an auditor sees exactly what was asked. */
  readonly body: Readonly<Record<string, unknown>>;
}

const KNOWN_FIELDS = new Set(['messages', 'stream', 'model', 'conversation_id', 'patient_id', 'max_tokens', 'temperature', 'stream_options']);

/** Bounds on one request, so a single caller cannot make fhirgate or the provider do unbounded work. */
export interface ChatRequestLimits {
  /** Most messages in a request. */
  readonly maxMessages: number;
  /** Largest `max_tokens` a request may ask for. */
  readonly maxTokens: number;
}

/** Validates a request body; a bad one is a 400 naming the field. */
export function parseChatRequest(body: unknown, limits: ChatRequestLimits = { maxMessages: 1000, maxTokens: 32_768 }): ChatRequest {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new AppError('invalid_request', 'The request body must be a JSON object.');
  }
  const result = chatRequestSchema.safeParse(body);
  if (!result.success) {
    const issue = result.error.issues[0];
    const param = issue.path.map(String).join('.');
    throw new AppError('invalid_request', `Invalid request: ${param ? `${param}: ` : ''}${issue.message}`, { details: { param } });
  }
  const value = result.data;
  if (value.messages.length > limits.maxMessages) {
    throw new AppError('invalid_request', `Invalid request: messages: at most ${limits.maxMessages} messages.`, { details: { param: 'messages' } });
  }
  if (value.max_tokens !== undefined && value.max_tokens > limits.maxTokens) {
    throw new AppError('invalid_request', `Invalid request: max_tokens: at most ${limits.maxTokens}.`, { details: { param: 'max_tokens' } });
  }
  if (!value.messages.some((message) => message.role === 'user')) {
    throw new AppError('invalid_request', 'Invalid request: messages must contain a user message.', { details: { param: 'messages' } });
  }
  const extra = Object.fromEntries(Object.entries(value).filter(([key]) => !KNOWN_FIELDS.has(key)));
  return {
    messages: value.messages,
    stream: value.stream ?? false,
    model: value.model,
    conversationId: value.conversation_id,
    patientId: value.patient_id,
    maxTokens: value.max_tokens,
    temperature: value.temperature,
    includeUsage: value.stream_options?.include_usage ?? false,
    extra,
    body: body as Record<string, unknown>,
  };
}
