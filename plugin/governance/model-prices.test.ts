import { costOf, modelPricesOf, moneyOf, nanoDollarsOf, parsePriceList } from './model-prices.ts';

describe('model prices', () => {
  test('a price list reads as dollars per 1M input and output tokens', () => {
    expect(parsePriceList('openai/gpt-4o-mini=0.15/0.60, claude/claude-sonnet-5-5 = 3/15', 'AI_MODEL_PRICES')).toEqual({
      'openai/gpt-4o-mini': { input: 0.15, output: 0.6 },
      'claude/claude-sonnet-5-5': { input: 3, output: 15 },
    });
    expect(parsePriceList('  ', 'AI_MODEL_PRICES')).toEqual({});
  });

  test('an entry that does not parse is refused, naming where it was set and the entry', () => {
    expect(() => parsePriceList('openai/gpt-4o-mini=0.15', 'The project setting AI_MODEL_PRICES')).toThrow(
      "The project setting AI_MODEL_PRICES has 'openai/gpt-4o-mini=0.15', which is not provider/model=<input>/<output>",
    );
    expect(() => parsePriceList('gpt-4o=1/2', 'X')).toThrow("'gpt-4o=1/2'");
    expect(() => parsePriceList('openai/gpt-4o=1/200000', 'X')).toThrow('at most 100000');
  });

  test("a reply's cost is whole nano-dollars, rounded once", () => {
    const prices = modelPricesOf({ 'openai/gpt-4o-mini': { input: 0.15, output: 0.6 }, 'google/flash': { input: 0.0375, output: 0.15 } });
    // 1,000 prompt tokens at $0.15/1M = $0.00015; 500 completion tokens at $0.60/1M = $0.0003.
    expect(costOf(prices.get('openai/gpt-4o-mini'), { promptTokens: 1000, completionTokens: 500 })).toBe(450_000);
    // 3 × 37.5 + 1 × 150 = 262.5 nano-dollars: rounded to 263.
    expect(costOf(prices.get('google/flash'), { promptTokens: 3, completionTokens: 1 })).toBe(263);
    expect(costOf(undefined, { promptTokens: 3, completionTokens: 1 })).toBeUndefined();
  });

  test('a cost goes on record as Money in dollars and comes back as the same whole nano-dollars', () => {
    for (const nano of [0, 1, 263, 450_000, 123_456_789, 98_765_432_123_456]) {
      const money = moneyOf(nano);
      expect(money.currency).toBe('USD');
      expect(nanoDollarsOf(money.value)).toBe(nano);
    }
    expect(moneyOf(450_000).value).toBe(0.00045);
  });
});
