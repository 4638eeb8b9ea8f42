import { completionChunk, contentChunkComposer, type AnswerFields } from './wire-format.ts';

const fields: AnswerFields = {
  completionId: 'chatcmpl-0f8fad5b-d9cb-469f-a165-70867728950e',
  created: 1_764_140_000,
  modelId: 'emulated/gpt-4o-mini',
  conversationId: '7c9e6679-7425-40de-944b-e07fc1f90ae7',
  replyId: '0f8fad5b-d9cb-469f-a165-70867728950e',
};

describe('contentChunkComposer', () => {
  it('composes the same JSON as the chunk object serialized, whatever the text holds', () => {
    const compose = contentChunkComposer();
    const texts = ['Hello', '', ' "quoted" \\ back', 'line\nbreak\ttab', 'ünïcödé 🩺 \u2028', '\u0000content\u0000', '"},"finish_reason":null}]}'];
    for (const text of texts) {
      const composed = compose(fields, text);
      expect(composed).toBe(JSON.stringify(completionChunk(fields, { content: text })));
      expect(JSON.parse(composed)).toMatchObject({ object: 'chat.completion.chunk', choices: [{ index: 0, delta: { content: text }, finish_reason: null }] });
    }
  });

  it('names the model that answers now when a fallback takes over mid-turn', () => {
    const compose = contentChunkComposer();
    expect(JSON.parse(compose(fields, 'a')).model).toBe('emulated/gpt-4o-mini');
    const fallback = { ...fields, modelId: 'backup/llama3' };
    expect(compose(fallback, 'b')).toBe(JSON.stringify(completionChunk(fallback, { content: 'b' })));
  });

  it('composes the chunk of a stream that asked for usage: usage null, as on every other chunk', () => {
    const compose = contentChunkComposer();
    const withUsage = { ...fields, includeUsage: true };
    expect(compose(withUsage, 'a')).toBe(JSON.stringify(completionChunk(withUsage, { content: 'a' })));
    expect(JSON.parse(compose(withUsage, 'a'))).toMatchObject({ choices: [{ delta: { content: 'a' }, logprobs: null, finish_reason: null }], usage: null });
  });
});
