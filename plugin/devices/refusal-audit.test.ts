import { describe, expect, test } from '@jest/globals';
import type { AuditEvent } from '@medplum/fhirtypes';
import type { DeviceAuthFailure } from './device-audit.ts';
import { RefusalAudit, type RefusalAuditOptions } from './refusal-audit.ts';

const SYSTEM = 'urn:example:devices';
const PERIOD_START = Date.parse('2026-03-01T10:00:00.000Z');

/** A RefusalAudit on a clock the test moves, writing into an array. */
function setUp(options: Partial<RefusalAuditOptions> = {}) {
  const written: AuditEvent[] = [];
  let now = PERIOD_START;
  const audit = new RefusalAudit({
    periodSeconds: 60,
    identifierSystem: SYSTEM,
    write: async (event) => {
      written.push(event);
    },
    now: () => now,
    ...options,
  });
  return {
    audit,
    written,
    advance: (milliseconds: number) => {
      now += milliseconds;
    },
    refuse: (sourceAddress: string, deviceId: string, reason: DeviceAuthFailure = 'unknown_device') =>
      audit.record({ deviceId, identifierSystem: SYSTEM, sourceAddress }, reason),
  };
}

const detail = (event: AuditEvent | undefined, type: string): string | undefined => event?.entity?.[0]?.detail?.find((item) => item.type === type)?.valueString;
const summaries = (events: AuditEvent[]) => events.filter((event) => detail(event, 'reason') === 'summary');

describe('RefusalAudit', () => {
  test('the first 5 refusals of a source are records of their own; the rest one summary at the end of the period', async () => {
    const { audit, written, advance, refuse } = setUp();
    for (let index = 0; index < 1000; index++) {
      await refuse('198.51.100.7', `intruder-${index % 3}`, index % 2 ? 'unknown_device' : 'wrong_key');
      advance(10);
    }
    expect(written).toHaveLength(5);
    expect(written.every((event) => event.outcome === '4' && event.agent?.[0]?.network?.address === '198.51.100.7')).toBe(true);
    expect(written.map((event) => detail(event, 'reason'))).toEqual(['wrong_key', 'unknown_device', 'wrong_key', 'unknown_device', 'wrong_key']);

    advance(60_000);
    await refuse('192.0.2.1', 'another');
    await audit.close();
    const [summary] = summaries(written);
    expect(summaries(written)).toHaveLength(1);
    expect(summary).toMatchObject({
      resourceType: 'AuditEvent',
      outcome: '4',
      period: { start: new Date(PERIOD_START + 50).toISOString(), end: new Date(PERIOD_START + 9990).toISOString() },
      agent: [{ requestor: true, network: { address: '198.51.100.7', type: '2' }, who: { display: '3 device ids' } }],
    });
    expect(detail(summary, 'count')).toBe('995');
    expect(detail(summary, 'wrong_key')).toBe('497');
    expect(detail(summary, 'unknown_device')).toBe('498');
    expect(detail(summary, 'device-ids')).toBe('3');
    expect(summary.entity?.[0]?.detail?.filter((item) => item.type === 'device-id').map((item) => item.valueString).sort()).toEqual(['intruder-0', 'intruder-1', 'intruder-2']);
    // Every refusal is on record: 5 + 995 from the first source, 1 from the second.
    expect(written).toHaveLength(7);
  });

  test('a summary naming one device id names it as the agent', async () => {
    const { audit, written, refuse } = setUp({ individualPerSource: 1 });
    await refuse('198.51.100.8', 'monitor-7', 'wrong_key');
    await refuse('198.51.100.8', 'monitor-7', 'too_many_failures');
    await audit.close();
    expect(summaries(written)[0]?.agent?.[0]?.who).toEqual({ identifier: { system: SYSTEM, value: 'monitor-7' }, display: 'device monitor-7' });
    expect(detail(summaries(written)[0], 'too_many_failures')).toBe('1');
  });

  test('each period starts its counts again', async () => {
    const { audit, written, advance, refuse } = setUp({ individualPerSource: 2 });
    for (let period = 0; period < 3; period++) {
      for (let index = 0; index < 10; index++) {
        await refuse('198.51.100.9', 'x');
      }
      advance(60_000);
    }
    await audit.close();
    // Per period: 2 of their own and a summary of 8.
    expect(written.filter((event) => detail(event, 'reason') === 'unknown_device')).toHaveLength(6);
    expect(summaries(written).map((event) => detail(event, 'count'))).toEqual(['8', '8', '8']);
  });

  test('many sources at once: at most individualPerPeriod records of their own, summarisedSources summaries by source, one for the others', async () => {
    const { audit, written, refuse } = setUp({ individualPerSource: 2, individualPerPeriod: 10, summarisedSources: 4 });
    let refusals = 0;
    for (let source = 0; source < 50; source++) {
      for (let index = 0; index < 3; index++) {
        await refuse(`10.9.0.${source}`, `id-${source}`);
        refusals++;
      }
    }
    await audit.close();
    const own = written.filter((event) => detail(event, 'reason') !== 'summary');
    expect(own).toHaveLength(10);
    expect(summaries(written)).toHaveLength(5);
    const others = summaries(written).find((event) => event.agent?.[0]?.network === undefined);
    expect(others?.outcomeDesc).toContain('other sources');
    const counted = summaries(written).reduce((sum, event) => sum + Number(detail(event, 'count')), 0);
    expect(own.length + counted).toBe(refusals);
  });

  test('a summary that cannot be written is logged with its counts', async () => {
    const errors: Record<string, unknown>[] = [];
    const logger = { debug: () => undefined, info: () => undefined, warn: () => undefined, error: (_message: string, data?: Record<string, unknown>) => errors.push(data ?? {}) };
    const { audit, refuse } = setUp({
      individualPerSource: 0,
      logger,
      write: async () => {
        throw new Error('store refuses writes');
      },
    });
    await refuse('198.51.100.10', 'x');
    await refuse('198.51.100.10', 'y');
    await audit.close();
    expect(errors).toEqual([expect.objectContaining({ sourceAddress: '198.51.100.10', count: 2 })]);
  });
});
