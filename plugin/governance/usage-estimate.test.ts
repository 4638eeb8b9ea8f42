import { estimatedUsage, estimatePromptTokens, estimateTokensOfLength } from './usage-estimate.ts';

describe('usage estimates', () => {
  test('about four characters a token, rounded up; nothing is no tokens', () => {
    expect(estimateTokensOfLength(0)).toBe(0);
    expect(estimateTokensOfLength(1)).toBe(1);
    expect(estimateTokensOfLength(400)).toBe(100);
    expect(estimateTokensOfLength(401)).toBe(101);
  });

  test("a prompt counts every message's text, calls and results with their framing, and the tools offered", () => {
    const tool = { name: 'lookup', description: 'Finds it', parameters: { type: 'object' } };
    const messages = [
      { role: 'system' as const, content: 'x'.repeat(40) },
      { role: 'user' as const, content: 'y'.repeat(40), name: 'dr' },
      { role: 'assistant' as const, content: '', toolCalls: [{ id: 'c1', name: 'lookup', arguments: '{"q":"a"}' }] },
      { role: 'tool' as const, content: 'z'.repeat(20), toolCallId: 'c1' },
    ];
    const characters = 40 + 40 + 2 + 6 + 9 + 20 + 6 + 8 + JSON.stringify(tool.parameters).length;
    expect(estimatePromptTokens(messages, [tool])).toBe(Math.ceil(characters / 4) + 4 * 4);
    expect(estimatePromptTokens([])).toBe(0);
  });

  test('the usage of a reply that did not complete says it is an estimate', () => {
    expect(estimatedUsage(50, 10)).toEqual({ promptTokens: 50, completionTokens: 3, estimated: true });
  });
});
