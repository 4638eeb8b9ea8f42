import { afterAll, afterEach, beforeAll, describe, expect, test } from '@jest/globals';
import { createStructuredReplyText, startLlmEmulator, type LlmEmulator } from '../../test/emulator/index.ts';
import { appErrorOf } from '../../test/support/app-error.ts';
import { createAnthropicChatModel } from './anthropic-chat-model.ts';
import { TEST_API_KEY, collectStream, createTestRequest } from './chat-model-contract.ts';
import type { ChatGenerationOptions, ChatModel, ChatRequestShape } from './chat-model.ts';

let emulator: LlmEmulator;

beforeAll(async () => {
  emulator = await startLlmEmulator();
});

afterEach(() => {
  emulator.reset();
});

afterAll(async () => {
  await emulator.close();
});

function createModel(): ChatModel {
  return createAnthropicChatModel({ provider: 'claude', apiKey: TEST_API_KEY, baseUrl: emulator.url, timeoutMs: 5000 });
}

const SCHEMA = { type: 'object', properties: { allergies: { type: 'array', items: { type: 'string' } } }, required: ['allergies'], additionalProperties: false };

describe('Anthropic and the request fields', () => {
  test("developer messages join the system text; text parts are text blocks; json_schema and reasoning_effort are Anthropic's output_config; strict tools stay strict", async () => {
    await createModel().complete(
      createTestRequest('claude-test', {
        messages: [
          { role: 'system', content: 'You are careful.' },
          { role: 'developer', content: 'Answer as JSON.' },
          { role: 'user', content: 'hithere', parts: ['hi', 'there'] },
        ],
        tools: [{ name: 'read_chart', parameters: { type: 'object' }, strict: true }],
        options: { responseFormat: { type: 'json_schema', name: 'allergies', schema: SCHEMA, strict: true }, reasoningEffort: 'high', endUser: { user: 'u-1', safetyIdentifier: 's-1' } },
      }),
    );
    const { body, output, tools } = emulator.received[0];

    expect(body.system).toBe('You are careful.\n\nAnswer as JSON.');
    expect(body.messages).toEqual([{ role: 'user', content: [{ type: 'text', text: 'hi' }, { type: 'text', text: 'there' }] }]);
    expect(body.output_config).toEqual({ format: { type: 'json_schema', schema: SCHEMA }, effort: 'high' });
    // safety_identifier is OpenAI's newer name for the end user; it wins over user.
    expect(body.metadata).toEqual({ user_id: 's-1' });
    expect(tools).toEqual([{ name: 'read_chart', parameters: { type: 'object' }, strict: true }]);
    expect(output).toEqual({ responseFormat: { type: 'json_schema', schema: SCHEMA }, reasoningEffort: 'high', choices: 1 });
  });

  test('the structured reply is the JSON the model wrote, whole and streamed', async () => {
    const request = createTestRequest('claude-test', { options: { responseFormat: { type: 'json_schema', name: 'allergies', schema: SCHEMA } } });
    const text = createStructuredReplyText({ messages: [], output: { responseFormat: { type: 'json_schema', schema: SCHEMA }, choices: 1 } });
    expect(JSON.parse(text)).toEqual({ allergies: ['allergies'] });

    expect((await createModel().complete(request)).text).toBe(text);
    expect((await collectStream(createModel().stream(request))).text).toBe(text);
  });

  const refusals: [string, Partial<ChatRequestShape>, string][] = [
    ['seed', { options: { seed: 1 } }, 'seed'],
    ['the penalties', { options: { presencePenalty: 1 } }, 'presence_penalty'],
    ['logit_bias', { options: { logitBias: { '1': 1 } } }, 'logit_bias'],
    ['logprobs', { options: { logprobs: { top: 0 } } }, 'logprobs'],
    ['json_object', { options: { responseFormat: { type: 'json_object' } } }, 'response_format'],
    ['a schema beside json_object', { options: { responseFormat: { type: 'json_object', schema: { type: 'object' } } } }, 'response_format.schema'],
    ['a json_schema without a schema', { options: { responseFormat: { type: 'json_schema', name: 'x' } } }, 'response_format.json_schema.schema'],
    ['an effort Anthropic does not have', { options: { reasoningEffort: 'minimal' } }, 'reasoning_effort'],
    ["OpenAI's own fields", { options: { openAiOnly: { service_tier: 'flex' } } as ChatGenerationOptions }, 'service_tier'],
    ['participant names', { messages: [{ role: 'user', content: 'hi', name: 'alice' }] }, 'messages.0.name'],
    ['a field fhirgate does not know', { options: { vendorFields: { repetition_penalty: 1.1 } } }, 'repetition_penalty'],
  ];
  test.each(refusals)('refuses %s by name, before any call', (_name, overrides, param) => {
    const error = appErrorOf(() => createModel().checkRequest?.({ messages: [], maxTokens: 10, ...overrides }));
    expect(error).toMatchObject({ code: 'invalid_request', status: 400, details: { param } });
    expect(error.message).toContain("provider 'claude' (Anthropic)");
  });
});
