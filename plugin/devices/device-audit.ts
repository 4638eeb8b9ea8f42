/**
 * AuditEvents of the device token exchange, shaped as Medplum records logins (DICOM "User Authentication" /
 * "Login", following the IHE Basic Audit Log Patterns): one per issued token (outcome success, `entity` the
 * Device) and one per refused exchange (outcome minor failure, with the reason). The agent is the device: its
 * `Device` reference when known, else its identifier; `network` holds the source IP. Never the key, never the
 * token.
 */
import type { AuditEvent, AuditEventAgent, Device, Reference } from '@medplum/fhirtypes';

const DICOM = 'http://dicom.nema.org/resources/ontology/DCM';

/** Why an exchange was refused; recorded in `outcomeDesc` and as an entity detail. */
export type DeviceAuthFailure = 'unknown_device' | 'wrong_key' | 'inactive_device' | 'unmapped_device' | 'rate_limited';

const FAILURE_TEXT: Readonly<Record<DeviceAuthFailure, string>> = {
  unknown_device: 'Device token refused: unknown device',
  wrong_key: 'Device token refused: wrong API key',
  inactive_device: 'Device token refused: the Device is not active',
  unmapped_device: 'Device token refused: no Device resource for this device',
  rate_limited: 'Device token refused: rate limit exceeded',
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
