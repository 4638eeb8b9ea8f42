import { afterAll, afterEach, beforeAll, describe, expect, test } from '@jest/globals';
import { startLlmEmulator, type LlmEmulator } from '../../test/emulator/index.ts';
import { appErrorOf } from '../../test/support/app-error.ts';
import { collectStream, createTestRequest, expectedLogprobs } from './chat-model-contract.ts';
import type { ChatGenerationOptions, ChatModel, ChatRequestShape } from './chat-model.ts';
import { createOllamaChatModel } from './ollama-chat-model.ts';

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
  return createOllamaChatModel({ provider: 'local', baseUrl: emulator.url, timeoutMs: 5000 });
}

const SCHEMA = { type: 'object', properties: { answer: { type: 'boolean' } } };

describe('Ollama and the request fields', () => {
  test('developer messages are system messages; text parts are consecutive messages; json_schema is format, reasoning_effort think, logprobs as they are', async () => {
    await createModel().complete(
      createTestRequest('llama', {
        messages: [
          { role: 'developer', content: 'Be brief.' },
          { role: 'user', content: 'hithere', parts: ['hi', 'there'] },
        ],
        options: { responseFormat: { type: 'json_schema', name: 'a', schema: SCHEMA }, reasoningEffort: 'none', logprobs: { top: 1 }, endUser: { user: 'u-1' } },
      }),
    );
    const { body, output } = emulator.received[0];

    expect(body.messages).toEqual([
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'hi' },
      { role: 'user', content: 'there' },
    ]);
    expect(body).toMatchObject({ format: SCHEMA, think: false, logprobs: true, top_logprobs: 1 });
    // Ollama has no field for the end user: it stays on fhirgate's record.
    expect(JSON.stringify(body)).not.toContain('u-1');
    expect(output).toEqual({ responseFormat: { type: 'json_schema', schema: SCHEMA }, reasoningEffort: 'false', logprobs: { top: 1 }, choices: 1 });
  });

  test('json_object is format json; effort levels are think levels', async () => {
    await createModel().complete(createTestRequest('llama', { options: { responseFormat: { type: 'json_object' }, reasoningEffort: 'medium' } }));
    expect(emulator.received[0].body).toMatchObject({ format: 'json', think: 'medium' });
  });

  test('log probabilities come back, whole and streamed', async () => {
    const request = createTestRequest('llama', { messages: [{ role: 'user', content: 'two words' }], options: { logprobs: { top: 1 } } });
    const expected = expectedLogprobs(['Echo:', ' two', ' words'], 1);

    expect((await createModel().complete(request)).logprobs).toEqual(expected);
    const { events } = await collectStream(createModel().stream(request));
    expect(events.flatMap((event) => (event.type === 'text' ? (event.logprobs ?? []) : []))).toEqual(expected);
  });

  const refusals: [string, Partial<ChatRequestShape>, string][] = [
    ['logit_bias', { options: { logitBias: { '1': 1 } } }, 'logit_bias'],
    ['a schema beside json_object', { options: { responseFormat: { type: 'json_object', schema: { type: 'object' } } } }, 'response_format.schema'],
    ['one call at a time', { options: { parallelToolCalls: false } }, 'parallel_tool_calls'],
    ['an effort Ollama does not have', { options: { reasoningEffort: 'minimal' } }, 'reasoning_effort'],
    ['strict tools', { tools: [{ name: 'a', parameters: {} }, { name: 'b', parameters: {}, strict: true }] }, 'tools.1.function.strict'],
    ["OpenAI's own fields", { options: { openAiOnly: { prediction: { type: 'content', content: 'x' } } } as ChatGenerationOptions }, 'prediction'],
    ['participant names', { messages: [{ role: 'user', content: 'hi' }, { role: 'assistant', content: 'yo', name: 'bot' }] }, 'messages.1.name'],
    ['a field fhirgate does not know', { options: { vendorFields: { repetition_penalty: 1.1 } } }, 'repetition_penalty'],
  ];
  test.each(refusals)('refuses %s by name, before any call', (_name, overrides, param) => {
    const error = appErrorOf(() => createModel().checkRequest?.({ messages: [], maxTokens: 10, ...overrides }));
    expect(error).toMatchObject({ code: 'invalid_request', status: 400, details: { param } });
    expect(error.message).toContain("provider 'local' (Ollama)");
  });
});
