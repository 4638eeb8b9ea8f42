/**
 * What a device's Observation may be about, and what in it the device may not set: checked by the device write
 * guard on each Observation value, once the value names the device. A device vouches for its own measurement of
 * the patient it is assigned to, nothing more. An Observation enters a patient's chart through `subject` (and, in
 * Medplum's patient compartment, `performer`), and points into charts through its other references, so:
 *   - `subject` is absent, the device itself (`Device/<id>`) or its assigned patient (`Patient/<id>`), as a
 *     literal reference with nothing beside it but `type` and `display` (an `identifier` would name a patient
 *     unchecked; a URL, a version or a search would be a second spelling to get wrong);
 *   - no other reference anywhere (`performer`, `focus`, `encounter`, `basedOn`, `partOf`, `specimen`,
 *     `hasMember`, `derivedFrom`, `contained`, a note's author, an extension's value): whose chart each leads to
 *     is only known by reading it, and a device has nothing to record there;
 *   - in `meta`, only what FHIR leaves to the client (`profile`, `tag`, `security`, `source`). What the server
 *     sets (`project`, `author`, `account`, `accounts`, `compartment`, `onBehalfOf`, `versionId`, `lastUpdated`,
 *     `deleted`) is refused by name rather than dropped: Medplum drops it for a caller that is not a project
 *     admin, so a device that sends it expects an effect it will not get, and is told so; and every host answers
 *     the same.
 * The device's AccessPolicy (`buildDevicePolicy`) holds the subject and performer rules too, for Medplum to apply.
 */
import { AppError } from '../errors.ts';
import type { DeviceCaller } from './device-write-guard.ts';
import { isJsonObject } from './graphql-request.ts';

const OTHER_REFERENCE_FIELDS = ['performer', 'focus', 'encounter', 'basedOn', 'partOf', 'specimen', 'hasMember', 'derivedFrom', 'contained'] as const;
const CLIENT_META_FIELDS: ReadonlySet<string> = new Set(['profile', 'tag', 'security', 'source']);
const SUBJECT_FIELDS: ReadonlySet<string> = new Set(['reference', 'type', 'display']);
// Paths in messages stop growing here, so a deeply nested value costs memory in proportion to its size only.
const MAX_PATH_LENGTH = 120;

/** Throws `forbidden` when the Observation is about someone the device may not write about, or sets what it may not. */
export function checkWhatItIsAbout(observation: Readonly<Record<string, unknown>>, device: DeviceCaller, fieldName: string): void {
  checkMeta(observation.meta, fieldName);
  for (const name of OTHER_REFERENCE_FIELDS) {
    if (isSet(observation[name])) {
      throw forbidden(`${fieldName}: a device may not set ${name}; its Observations refer only to their device and their subject.`);
    }
  }
  checkSubject(observation.subject, device, fieldName);
  checkNoOtherReferences(observation, fieldName);
}

function checkMeta(meta: unknown, fieldName: string): void {
  if (!isSet(meta)) {
    return;
  }
  if (!isJsonObject(meta)) {
    throw forbidden(`${fieldName}: meta must be an object.`);
  }
  for (const [key, value] of Object.entries(meta)) {
    if (isSet(value) && !CLIENT_META_FIELDS.has(key)) {
      throw forbidden(`${fieldName}: a device may not set meta.${key.slice(0, 64)}; of meta it may set only profile, tag, security and source, the server sets the rest.`);
    }
  }
}

function checkSubject(subject: unknown, device: DeviceCaller, fieldName: string): void {
  if (!isSet(subject)) {
    return;
  }
  const self = `Device/${device.deviceResourceId}`;
  const allowed = device.assignedPatient
    ? `subject must be the patient this device is assigned to (its Device.patient), the device itself (${self}), or absent.`
    : `this device is assigned to no patient of its project (Device.patient), so subject must be the device itself (${self}) or absent.`;
  if (!isJsonObject(subject) || typeof subject.reference !== 'string' || Object.keys(subject).some((key) => !SUBJECT_FIELDS.has(key))) {
    throw forbidden(`${fieldName}: subject must be a reference (subject.reference) with nothing beside it but type and display; ${allowed}`);
  }
  if (subject.reference !== self && subject.reference !== device.assignedPatient) {
    throw forbidden(`${fieldName}: ${allowed}`);
  }
  if (subject.type !== undefined && subject.type !== subject.reference.split('/')[0]) {
    throw forbidden(`${fieldName}: subject.type must be the type subject.reference names.`);
  }
}

/** Any reference outside `device` and `subject`, at any depth (walked without recursion: the value may be deep). */
function checkNoOtherReferences(observation: Readonly<Record<string, unknown>>, fieldName: string): void {
  const pending: [unknown, string][] = Object.entries(observation)
    .filter(([key]) => key !== 'device' && key !== 'subject')
    .map(([key, value]) => [value, key.slice(0, 64)]);
  for (let next = pending.pop(); next; next = pending.pop()) {
    const [value, path] = next;
    if (Array.isArray(value)) {
      value.forEach((item, index) => pending.push([item, path.length < MAX_PATH_LENGTH ? `${path}[${index}]` : path]));
    } else if (isJsonObject(value)) {
      for (const [key, child] of Object.entries(value)) {
        const childPath = path.length < MAX_PATH_LENGTH ? `${path}.${key.slice(0, 64)}` : path;
        // `reference` is a Reference's; `valueReference`, `authorReference`, ... are choice elements of type Reference.
        if (isSet(child) && (key === 'reference' || key.endsWith('Reference'))) {
          throw forbidden(`${fieldName}: ${childPath} is a reference; a device's Observation refers only to its device and its subject.`);
        }
        pending.push([child, childPath]);
      }
    }
  }
}

function isSet(value: unknown): boolean {
  return value !== undefined && value !== null;
}

function forbidden(message: string): AppError {
  return new AppError('forbidden', message);
}
