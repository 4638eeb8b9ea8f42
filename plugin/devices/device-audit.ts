/**
 * AuditEvents of the device token exchange, shaped as Medplum records logins (DICOM "User Authentication" /
 * "Login", following the IHE Basic Audit Log Patterns): one per issued token (outcome success, `entity` the
 * Device), one per refused exchange recorded on its own (outcome minor failure, with the reason), and summaries of
 * the refusals counted rather than recorded one by one (refusal-audit.ts: count, first and last time, reasons,
 * device ids). The agent is the device: its `Device` reference when known, else its identifier; `network` holds
 * the source IP. Never the key, never the token.
 */
import type { AuditEvent, AuditEventAgent, Device, Reference } from '@medplum/fhirtypes';

const DICOM = 'http://dicom.nema.org/resources/ontology/DCM';

/** Why an exchange was refused; recorded in `outcomeDesc` and as an entity detail. */
export type DeviceAuthFailure = 'unknown_device' | 'wrong_key' | 'too_many_failures' | 'inactive_device' | 'unmapped_device' | 'rate_limited' | 'outside_network';

const FAILURE_TEXT: Readonly<Record<DeviceAuthFailure, string>> = {
  unknown_device: 'Device token refused: unknown device',
  wrong_key: 'Device token refused: wrong API key',
  too_many_failures: 'Device token refused: too many failed attempts (locked out)',
  inactive_device: 'Device token refused: the Device is not active',
  unmapped_device: 'Device token refused: no Device resource for this device',
  rate_limited: 'Device token refused: rate limit exceeded',
  outside_network: "Device refused: source address outside the device's allowed networks",
};

/** What is known about one exchange. */
export interface DeviceAuthAttempt {
  readonly deviceId: string;
  readonly identifierSystem: string;
  /** The Device resource, once the device is mapped. */
  readonly device?: Reference<Device>;
  readonly sourceAddress?: string;
}

/** The AuditEvent of an issued token. */
export function buildTokenIssuedEvent(attempt: DeviceAuthAttempt & { device: Reference<Device> }, tokenId: string): AuditEvent {
  return {
    ...baseEvent(attempt),
    outcome: '0',
    outcomeDesc: 'Device token issued',
    entity: [
      {
        what: attempt.device,
        type: { system: 'http://terminology.hl7.org/CodeSystem/audit-entity-type', code: '2', display: 'System Object' },
        detail: [{ type: 'token-id', valueString: tokenId }],
      },
    ],
  };
}

/** The AuditEvent of a refused exchange. */
export function buildTokenRefusedEvent(attempt: DeviceAuthAttempt, reason: DeviceAuthFailure): AuditEvent {
  return {
    ...baseEvent(attempt),
    outcome: '4',
    outcomeDesc: FAILURE_TEXT[reason],
    entity: [
      {
        ...(attempt.device ? { what: attempt.device } : {}),
        type: { system: 'http://terminology.hl7.org/CodeSystem/audit-entity-type', code: '2', display: 'System Object' },
        detail: [{ type: 'reason', valueString: reason }],
      },
    ],
  };
}

/** Refusals counted rather than recorded one by one: one source (or all others) over one period. */
export interface RefusalSummary {
  /** The source address; undefined for the refusals of sources past the number summarised by name. */
  readonly sourceAddress?: string;
  readonly identifierSystem: string;
  readonly count: number;
  /** Times of the first and last refusal counted, ISO 8601. */
  readonly first: string;
  readonly last: string;
  readonly reasons: ReadonlyMap<DeviceAuthFailure, number>;
  /** The device ids named (at most a bounded number of them), and how many distinct ids were named in all. */
  readonly deviceIds: readonly string[];
  readonly distinctDeviceIds: number;
}

/**
 * The AuditEvent of refusals counted in a period: `period` spans the first and last, `entity[0].detail` holds
 * `reason` = `summary`, the `count`, the count of each reason and `device-id` for each id named (up to a bound).
 */
export function buildRefusalSummaryEvent(summary: RefusalSummary): AuditEvent {
  const single = summary.distinctDeviceIds === 1 ? summary.deviceIds[0] : undefined;
  const who: AuditEventAgent['who'] =
    single === undefined
      ? { display: `${summary.distinctDeviceIds} device ids` }
      : { identifier: { system: summary.identifierSystem, value: single }, display: `device ${single}` };
  const reasons = [...summary.reasons].map(([reason, count]) => `${reason} ${count}`).join(', ');
  const from = summary.sourceAddress ?? 'other sources';
  return {
    resourceType: 'AuditEvent',
    type: { system: DICOM, code: '110114', display: 'User Authentication' },
    subtype: [{ system: DICOM, code: '110122', display: 'Login' }],
    action: 'E',
    period: { start: summary.first, end: summary.last },
    recorded: new Date().toISOString(),
    outcome: '4',
    outcomeDesc: `Device token refused ${summary.count} more times from ${from} (${reasons}), counted rather than recorded one by one`,
    source: { observer: { display: 'fhirgate device token exchange' } },
    agent: [
      {
        who,
        requestor: true,
        ...(summary.sourceAddress ? { network: { address: summary.sourceAddress, type: '2' as const } } : {}),
      },
    ],
    entity: [
      {
        type: { system: 'http://terminology.hl7.org/CodeSystem/audit-entity-type', code: '2', display: 'System Object' },
        detail: [
          { type: 'reason', valueString: 'summary' },
          { type: 'count', valueString: String(summary.count) },
          ...[...summary.reasons].map(([reason, count]) => ({ type: reason, valueString: String(count) })),
          { type: 'device-ids', valueString: String(summary.distinctDeviceIds) },
          ...summary.deviceIds.map((deviceId) => ({ type: 'device-id', valueString: deviceId })),
        ],
      },
    ],
  };
}

function baseEvent(attempt: DeviceAuthAttempt): AuditEvent {
  const who: AuditEventAgent['who'] = attempt.device ?? {
    identifier: { system: attempt.identifierSystem, value: attempt.deviceId },
    display: `device ${attempt.deviceId}`,
  };
  return {
    resourceType: 'AuditEvent',
    type: { system: DICOM, code: '110114', display: 'User Authentication' },
    subtype: [{ system: DICOM, code: '110122', display: 'Login' }],
    action: 'E',
    recorded: new Date().toISOString(),
    source: { observer: { display: 'fhirgate device token exchange' } },
    agent: [
      {
        who,
        requestor: true,
        ...(attempt.sourceAddress ? { network: { address: attempt.sourceAddress, type: '2' as const } } : {}),
      },
    ],
    outcome: '0',
  };
}
