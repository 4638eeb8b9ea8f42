/**
 * What a model's tokens cost, for cost budgets and the usage report: a price per 1M input (prompt) and per 1M
 * output (completion) tokens, in US dollars, written `provider/model=<input>/<output>` (e.g.
 * `openai/gpt-4o-mini=0.15/0.60`), several separated by commas. The operator sets them for the server
 * (`governance.prices`, the standalone host's `FHIRGATE_MODEL_PRICES`); a project may set its own in
 * `Project.setting` `AI_MODEL_PRICES` (for models it pays through its own key), which win for the models they name.
 *
 * Costs are kept as whole nano-dollars (1e-9 USD): a reply's cost is rounded once, when it is recorded, and the
 * same whole number is counted against the budgets and written on the reply, so the two always add up alike.
 */
import { AppError } from '../errors.ts';
import type { ChatUsage } from '../llm/chat-model.ts';

/** A model's price, in nano-dollars per token (a US dollar per 1M tokens is 1,000 nano-dollars per token). */
export interface ModelPrice {
  readonly inputPerToken: number;
  readonly outputPerToken: number;
}

/** Prices by `provider/model` id. */
export type ModelPrices = ReadonlyMap<string, ModelPrice>;

/** Nano-dollars in a dollar. */
export const NANO_PER_DOLLAR = 1_000_000_000;
// A dollar per 1M tokens, in nano-dollars per token.
const NANO_PER_TOKEN_PER_DOLLAR_PER_MILLION = NANO_PER_DOLLAR / 1_000_000;
// Far above any model's price; a larger number is a typo (e.g. a price per token pasted as per 1M).
const MAX_PRICE_PER_MILLION = 100_000;

const ENTRY = /^([^=\s/]+\/[^=\s]+)\s*=\s*([0-9]+(?:\.[0-9]+)?)\s*\/\s*([0-9]+(?:\.[0-9]+)?)$/;

/** A price as written: US dollars per 1M input and per 1M output tokens. */
export interface PricePerMillion {
  readonly input: number;
  readonly output: number;
}

/**
 * Parses `provider/model=<input>/<output>, ...` (dollars per 1M tokens). Throws AppError `not_configured` naming
 * `source` (the setting or variable) and the entry that does not parse.
 */
export function parsePriceList(text: string, source: string): Record<string, PricePerMillion> {
  const prices: Record<string, PricePerMillion> = {};
  for (const entry of text.split(',').map((part) => part.trim()).filter((part) => part !== '')) {
    const match = ENTRY.exec(entry);
    const input = Number(match?.[2]);
    const output = Number(match?.[3]);
    if (!match || input > MAX_PRICE_PER_MILLION || output > MAX_PRICE_PER_MILLION) {
      throw new AppError(
        'not_configured',
        `${source} has '${entry.slice(0, 120)}', which is not provider/model=<input>/<output> (US dollars per 1M tokens, at most ${MAX_PRICE_PER_MILLION}).`,
        { details: { setting: source } },
      );
    }
    prices[match[1]] = { input, output };
  }
  return prices;
}

/** Prices by model, from prices as written. */
export function modelPricesOf(prices: Readonly<Record<string, PricePerMillion>>): Map<string, ModelPrice> {
  return new Map(Object.entries(prices).map(([model, price]) => [model, priceOf(price.input, price.output)]));
}

/** A price given in US dollars per 1M input and output tokens. */
export function priceOf(inputPerMillion: number, outputPerMillion: number): ModelPrice {
  return { inputPerToken: inputPerMillion * NANO_PER_TOKEN_PER_DOLLAR_PER_MILLION, outputPerToken: outputPerMillion * NANO_PER_TOKEN_PER_DOLLAR_PER_MILLION };
}

/** A reply's cost in whole nano-dollars, or undefined when the model has no price. */
export function costOf(price: ModelPrice | undefined, usage: ChatUsage): number | undefined {
  if (price === undefined) {
    return undefined;
  }
  return Math.round(usage.promptTokens * price.inputPerToken + usage.completionTokens * price.outputPerToken);
}

/** Nano-dollars as the FHIR `Money` a reply records (`value` in dollars). */
export function moneyOf(nanoDollars: number): { readonly value: number; readonly currency: 'USD' } {
  return { value: nanoDollars / NANO_PER_DOLLAR, currency: 'USD' };
}

/** A recorded `Money` back in whole nano-dollars (the inverse of `moneyOf`). */
export function nanoDollarsOf(value: number): number {
  return Math.round(value * NANO_PER_DOLLAR);
}
