/** Order statistics over samples; the report shows medians of repetitions, so one noisy run cannot decide a target. */

/** The p-th percentile (0–100) by nearest rank; NaN for no samples. */
export function percentile(samples: readonly number[], p: number): number {
  if (samples.length === 0) return Number.NaN;
  const sorted = [...samples].sort((left, right) => left - right);
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank];
}

/** The median (the mean of the two middle values for an even count). */
export function median(samples: readonly number[]): number {
  if (samples.length === 0) return Number.NaN;
  const sorted = [...samples].sort((left, right) => left - right);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
}

/** A number with a fixed number of decimals, or "n/a" when it is not finite. */
export function formatNumber(value: number, decimals = 2): string {
  return Number.isFinite(value) ? value.toFixed(decimals) : 'n/a';
}

/** `numerator / denominator`, formatted, or "n/a" when the denominator is not positive. */
export function formatRatio(numerator: number, denominator: number): string {
  return denominator > 0 && Number.isFinite(numerator) ? `${(numerator / denominator).toFixed(2)} ×` : 'n/a';
}

/**
 * `numerators[i] / denominators[i]` for each round measured in both: two contenders measured one after the other in
 * each round compare within the round, where a machine whose speed drifts between rounds weighs on both alike.
 */
export function ratiosByRound(numerators: readonly number[], denominators: readonly number[]): number[] {
  const rounds = Math.min(numerators.length, denominators.length);
  return Array.from({ length: rounds }, (_, round) => numerators[round] / denominators[round]).filter((ratio) => Number.isFinite(ratio) && ratio > 0);
}
