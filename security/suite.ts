/**
 * The security suite's bookkeeping: attacks grouped by kind, each telling whether it got through, and the 5xx
 * answers seen on the way. An attack "gets through" when the server did what the attacker wanted (answered, stored,
 * called the provider, disclosed another project's data); a clear refusal (4xx) does not.
 */

/** What one attack came to. */
export interface AttackOutcome {
  /** The HTTP status of the answer (0 when there was none). */
  readonly status: number;
  /** True when the server did what the attacker wanted. */
  readonly letThrough: boolean;
  /** Why it counts as let through, or a detail worth printing. */
  readonly note?: string;
  /**
   * A 5xx that is the answer the attack calls for (a store that lost its file refuses with 503; a provider's own
   * 500 passed on): not counted among the 5xx answers seen, which are the server failing.
   */
  readonly expectedServerStatus?: number;
}

export interface AttackResult extends AttackOutcome {
  readonly kind: string;
  readonly name: string;
}

/** Collects results; prints and summarises them. */
export class AttackLog {
  readonly results: AttackResult[] = [];
  readonly figures: Record<string, string> = {};

  /** Runs one attack; an attack that throws counts as let through (the suite could not show it was refused). */
  async run(kind: string, name: string, attack: () => Promise<AttackOutcome>): Promise<AttackOutcome> {
    let outcome: AttackOutcome;
    try {
      outcome = await attack();
    } catch (error) {
      outcome = { status: 0, letThrough: true, note: `the attack failed to run: ${error instanceof Error ? error.message : String(error)}` };
    }
    this.results.push({ kind, name, ...outcome });
    return outcome;
  }

  /** Records a measured figure (e.g. a timing comparison) for the report. */
  figure(name: string, value: string): void {
    this.figures[name] = value;
  }

  summary(): { readonly byKind: Record<string, { tried: number; letThrough: number; fiveHundreds: number }>; readonly tried: number; readonly letThrough: number; readonly fiveHundreds: number } {
    const byKind: Record<string, { tried: number; letThrough: number; fiveHundreds: number }> = {};
    for (const result of this.results) {
      const entry = (byKind[result.kind] ??= { tried: 0, letThrough: 0, fiveHundreds: 0 });
      entry.tried++;
      entry.letThrough += result.letThrough ? 1 : 0;
      entry.fiveHundreds += isServerFailure(result) ? 1 : 0;
    }
    const total = (key: 'tried' | 'letThrough' | 'fiveHundreds'): number => Object.values(byKind).reduce((sum, entry) => sum + entry[key], 0);
    return { byKind, tried: total('tried'), letThrough: total('letThrough'), fiveHundreds: total('fiveHundreds') };
  }

  print(): string {
    const { byKind, tried, letThrough, fiveHundreds } = this.summary();
    const lines = ['| attacks | tried | let through (must be 0) | 5xx seen (must be 0) |', '|---|---|---|---|'];
    for (const [kind, entry] of Object.entries(byKind)) lines.push(`| ${kind} | ${entry.tried} | ${entry.letThrough} | ${entry.fiveHundreds} |`);
    lines.push(`| **all** | ${tried} | ${letThrough} | ${fiveHundreds} |`);
    for (const [name, value] of Object.entries(this.figures)) lines.push(`\n${name}: ${value}`);
    for (const result of this.results.filter((item) => item.letThrough || isServerFailure(item))) {
      lines.push(`\nFAILED ${result.kind} / ${result.name}: status ${result.status}${result.note ? `, ${result.note}` : ''}`);
    }
    return `${lines.join('\n')}\n`;
  }
}

/** A 5xx answer that is not the one the attack called for. */
export function isServerFailure(result: AttackOutcome): boolean {
  return result.status >= 500 && result.status !== result.expectedServerStatus;
}

/**
 * A refusal with one of the expected statuses, nothing else: any other answer fails the attack, a 4xx too (a 400
 * where a 403 is due can be a request that never reached the check it was meant to try), and so does a side effect.
 */
export function refused(status: number, expected: readonly number[], sideEffect?: string): AttackOutcome {
  if (sideEffect) return { status, letThrough: true, note: sideEffect };
  return expected.includes(status) ? { status, letThrough: false } : { status, letThrough: true, note: `expected ${expected.join(' or ')}, got ${status}` };
}

/**
 * A bound that must itself be accepted (exactly at a limit), or a control that must succeed: failing it fails the
 * suite, since the refusals one step over the bound prove nothing if the bound itself is refused.
 */
export function accepted(status: number, ok: boolean, why: string): AttackOutcome {
  return ok ? { status, letThrough: false } : { status, letThrough: true, note: why };
}
