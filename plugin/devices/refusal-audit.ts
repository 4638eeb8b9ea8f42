/**
 * Refused device token exchanges on record, within bounds. Refusals need no credential, so one AuditEvent each
 * would let anyone grow the store without limit. Per period (the failed-attempt window), the first refusals of each
 * source address are AuditEvents of their own (at most `individualPerSource` per source and `individualPerPeriod`
 * in all); the rest are counted, per source, and written as one summary AuditEvent per source when the period
 * ends: the count, the first and last time, the reasons and the device ids named. Past `summarisedSources`
 * sources in one period, the others share one summary. So a period holds at most
 * `individualPerPeriod + summarisedSources + 1` refusal records, however many requests arrive; every refusal is
 * still on record, one by one or in a count.
 *
 * The counts are this instance's: several instances each keep their own, within the same bounds.
 */
import type { AuditEvent } from '@medplum/fhirtypes';
import type { HostLogger } from '../host.ts';
import { buildRefusalSummaryEvent, buildTokenRefusedEvent, type DeviceAuthAttempt, type DeviceAuthFailure } from './device-audit.ts';

/** The bounds, and where records go. */
export interface RefusalAuditOptions {
  readonly periodSeconds: number;
  readonly identifierSystem: string;
  /** Writes one AuditEvent. */
  readonly write: (event: AuditEvent) => Promise<void>;
  readonly logger?: HostLogger;
  /** Refusals of one source recorded one by one in a period (default 5). */
  readonly individualPerSource?: number;
  /** Refusals recorded one by one in a period, all sources together (default 50). */
  readonly individualPerPeriod?: number;
  /** Sources with a summary of their own in a period (default 100); the refusals of any more share one. */
  readonly summarisedSources?: number;
  readonly now?: () => number;
}

/** Device ids listed by name in a summary; the rest are only counted. */
const LISTED_DEVICE_IDS = 10;
/** Distinct device ids told apart in a summary's count. */
const COUNTED_DEVICE_IDS = 1000;
const OTHER_SOURCES = '';

interface OpenSummary {
  count: number;
  first: number;
  last: number;
  readonly reasons: Map<DeviceAuthFailure, number>;
  readonly deviceIds: Set<string>;
}

/** Records refusals: some one by one, the rest in a summary per source and period. */
export class RefusalAudit {
  private readonly options: Required<Omit<RefusalAuditOptions, 'logger'>> & Pick<RefusalAuditOptions, 'logger'>;
  private period: number;
  private individualBySource = new Map<string, number>();
  private individualInPeriod = 0;
  private summaries = new Map<string, OpenSummary>();
  private readonly writing = new Set<Promise<void>>();
  private readonly timer: NodeJS.Timeout;

  constructor(options: RefusalAuditOptions) {
    this.options = { individualPerSource: 5, individualPerPeriod: 50, summarisedSources: 100, now: Date.now, ...options };
    this.period = this.periodOf(this.options.now());
    // Summaries are written when their period ends, even if no refusal follows.
    this.timer = setInterval(() => this.rollOver(), Math.min(this.options.periodSeconds * 1000, 5000));
    this.timer.unref();
  }

  /**
   * Records one refusal: resolves once it is written when it is recorded on its own (so the answer follows its
   * record), at once when it is counted in a summary. Rejects when its own record cannot be written.
   */
  async record(attempt: DeviceAuthAttempt, reason: DeviceAuthFailure): Promise<void> {
    this.rollOver();
    const source = attempt.sourceAddress ?? 'unknown';
    const recorded = this.individualBySource.get(source) ?? 0;
    if (recorded < this.options.individualPerSource && this.individualInPeriod < this.options.individualPerPeriod) {
      this.individualBySource.set(source, recorded + 1);
      this.individualInPeriod++;
      await this.options.write(buildTokenRefusedEvent(attempt, reason));
      return;
    }
    const key = this.summaries.has(source) || this.summaries.size < this.options.summarisedSources ? source : OTHER_SOURCES;
    let summary = this.summaries.get(key);
    const now = this.options.now();
    if (!summary) {
      summary = { count: 0, first: now, last: now, reasons: new Map(), deviceIds: new Set() };
      this.summaries.set(key, summary);
    }
    summary.count++;
    summary.last = now;
    summary.reasons.set(reason, (summary.reasons.get(reason) ?? 0) + 1);
    if (summary.deviceIds.size < COUNTED_DEVICE_IDS) {
      summary.deviceIds.add(attempt.deviceId);
    }
  }

  /** Writes every open summary, the current period's too, and waits for all writes. For shutdown. */
  async close(): Promise<void> {
    clearInterval(this.timer);
    this.writeSummaries();
    await Promise.all([...this.writing]);
  }

  private periodOf(time: number): number {
    return Math.floor(time / (this.options.periodSeconds * 1000));
  }

  /** At a new period: the last one's summaries are written and its counts start again. */
  private rollOver(): void {
    const period = this.periodOf(this.options.now());
    if (period === this.period) {
      return;
    }
    this.period = period;
    this.individualBySource = new Map();
    this.individualInPeriod = 0;
    this.writeSummaries();
  }

  private writeSummaries(): void {
    const summaries = this.summaries;
    this.summaries = new Map();
    for (const [source, summary] of summaries) {
      const event = buildRefusalSummaryEvent({
        sourceAddress: source === OTHER_SOURCES ? undefined : source,
        identifierSystem: this.options.identifierSystem,
        count: summary.count,
        first: new Date(summary.first).toISOString(),
        last: new Date(summary.last).toISOString(),
        reasons: summary.reasons,
        deviceIds: [...summary.deviceIds].slice(0, LISTED_DEVICE_IDS),
        distinctDeviceIds: summary.deviceIds.size,
      });
      const writing = this.options
        .write(event)
        .catch((error: unknown) => {
          // The counts are in the log line, so the refusals stay on record somewhere.
          this.options.logger?.error('Could not record a summary of refused device token exchanges', {
            sourceAddress: source || undefined,
            count: summary.count,
            first: event.period?.start,
            last: event.period?.end,
            error: String(error),
          });
        })
        .finally(() => this.writing.delete(writing));
      this.writing.add(writing);
    }
  }
}
