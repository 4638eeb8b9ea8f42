import { describe, expect, test } from '@jest/globals';
import { readSamplingOptions } from './sampling-options.ts';

describe('readSamplingOptions', () => {
  test('reads the OpenAI fields it knows', () => {
    expect(
      readSamplingOptions({
        top_p: 0.5,
        top_k: 10,
        stop: ['a', 'b'],
        seed: 3,
        user: 'u',
        presence_penalty: 1,
        frequency_penalty: -1,
        logit_bias: { '42': 5 },
        response_format: { type: 'json_object' },
        parallel_tool_calls: false,
      }),
    ).toEqual({
      topP: 0.5,
      topK: 10,
      stop: ['a', 'b'],
      seed: 3,
      user: 'u',
      presencePenalty: 1,
      frequencyPenalty: -1,
      logitBias: { '42': 5 },
      responseFormat: 'json_object',
      parallelToolCalls: false,
    });
  });

  test('a single stop string becomes a list; empty stops are dropped', () => {
    expect(readSamplingOptions({ stop: 'END' }).stop).toEqual(['END']);
    expect(readSamplingOptions({ stop: '' }).stop).toBeUndefined();
    expect(readSamplingOptions({ stop: ['', 'x', 3] }).stop).toEqual(['x']);
    expect(readSamplingOptions({ stop: [] }).stop).toBeUndefined();
  });

  test('values of the wrong type, and fields it does not know, are dropped', () => {
    const options = readSamplingOptions({
      top_p: Number.NaN,
      top_k: 2.5,
      seed: '3',
      user: '',
      logit_bias: { '1': 'high' },
      response_format: { type: 'json_schema', json_schema: {} },
      parallel_tool_calls: 'yes',
      tools: [],
      n: 2,
    });

    expect(Object.values(options).filter((value) => value !== undefined)).toEqual([]);
  });
});
