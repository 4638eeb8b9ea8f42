// The emulator's stand-in for a real tokenizer: one token per word. Deterministic and cheap, so a test can
// predict usage numbers by counting words, and a benchmark spends its time in the gateway, not here.

// Each token carries the whitespace before it, and the last one the whitespace after it, so joining the
// tokens gives the text back exactly (streamed deltas concatenate to the non-streamed content).
const TOKEN_PATTERN = /\s*\S+(?:\s+$)?/g;
const WORD_PATTERN = /\S+/g;

/** Splits text into word tokens whose concatenation is the text itself (whitespace-only text gives none). */
export function splitIntoTokens(text: string): string[] {
  return text.match(TOKEN_PATTERN) ?? [];
}

/** Counts the words in text: the emulator's token count. */
export function countTokens(text: string): number {
  return text.match(WORD_PATTERN)?.length ?? 0;
}

// Fixed-length replies are usually requested with the same few lengths over and over (benchmarks), so the
// token lists are built once per length; the cap keeps an unusual workload from growing the cache forever.
const NUMBERED_REPLY_CACHE_LIMIT = 64;
const numberedReplies = new Map<number, readonly string[]>();

/** A reply of exactly `count` tokens, "token1 token2 …", numbered so a client can tell which ones arrived. */
export function createNumberedTokens(count: number): readonly string[] {
  const cached = numberedReplies.get(count);
  if (cached) {
    return cached;
  }
  const tokens: string[] = new Array<string>(count);
  for (let index = 0; index < count; index++) {
    tokens[index] = index === 0 ? 'token1' : ` token${index + 1}`;
  }
  if (numberedReplies.size >= NUMBERED_REPLY_CACHE_LIMIT) {
    numberedReplies.clear();
  }
  numberedReplies.set(count, tokens);
  return tokens;
}
