/**
 * What a device's document may name, checked from the document alone, before any GraphQL schema is built or read:
 * a device may create, update, read and search its Observations and read its own Device (`buildDevicePolicy`), so
 * its document may name those two resource types and nothing else. A document naming any other resource type (a
 * root field such as `PatientList`, a reverse lookup inside a selection, a type condition `... on Patient`, a
 * variable of type `PatientCreate`) or asking for the schema itself (`__schema`, `__type`) is refused FORBIDDEN.
 *
 * Why here and not in Medplum's engine: Medplum answers such a document only after validating it against its whole
 * GraphQL schema, which it builds at its first such request (seconds of CPU and some 500 MB, for good), so a device
 * token alone could make a fresh process build it. The device's AccessPolicy would refuse the reads anyway; this
 * refuses them before they cost anything. Medplum's field names carry the resource type: root fields are `X`,
 * `XList`, `XConnection`, `XCreate`, `XUpdate`, `XPatch`, `XDelete`; the only fields that start with a capital
 * letter below the root are reverse lookups (`XList`, `XConnection`), since FHIR element names start lower-case;
 * type names are `X`, `XConnection`, `XConnectionEdge`, `XCreate` (and the spec's `XInput`).
 */
import { visit, type DocumentNode } from 'graphql';
import { AppError } from '../errors.ts';

/** The resource types a device's document may name: its Observations and its own Device. */
export const DEVICE_DOCUMENT_RESOURCE_TYPES: readonly string[] = ['Observation', 'Device'];

// Root fields a device may select (its AccessPolicy decides which Observations and which Device).
const ALLOWED_CAPITALISED_FIELDS: ReadonlySet<string> = new Set([
  'Observation',
  'ObservationList',
  'ObservationConnection',
  'ObservationCreate',
  'ObservationUpdate',
  'Device',
  'DeviceList',
  'DeviceConnection',
]);
const TYPE_NAME_SUFFIXES = ['ConnectionEdge', 'Connection', 'Create', 'Update', 'Input'] as const;
const INTROSPECTION_FIELDS: ReadonlySet<string> = new Set(['__schema', '__type']);
const MAX_NAME_CHARS = 64;

// Documents that passed, by identity: the translator hands out the same document for the same text.
const allowed = new WeakSet<DocumentNode>();

/** Throws `forbidden` when the document names anything beyond a device's Observations and its own Device. */
export function checkDeviceDocumentScope(document: DocumentNode, isResourceType: (name: string) => boolean): void {
  if (allowed.has(document)) {
    return;
  }
  const refusal = findRefusal(document, isResourceType);
  if (refusal) {
    throw new AppError('forbidden', `A device may only read and write its Observations and read its own Device; ${refusal}`);
  }
  // Stryker disable next-line all: equivalent, without it the same document is checked again and passes again.
  allowed.add(document);
}

function findRefusal(document: DocumentNode, isResourceType: (name: string) => boolean): string | undefined {
  let refusal: string | undefined;
  const refuse = (reason: string): void => {
    refusal ??= reason;
  };
  visit(document, {
    Field(node) {
      const name = node.name.value;
      if (INTROSPECTION_FIELDS.has(name)) {
        refuse(`${name} (the schema) is not allowed.`);
      } else if (/^[A-Z]/.test(name) && !ALLOWED_CAPITALISED_FIELDS.has(name)) {
        refuse(`${shorten(name)} is not allowed.`);
      }
    },
    NamedType(node) {
      const resourceType = resourceTypeNamedBy(node.name.value, isResourceType);
      if (resourceType !== undefined && !DEVICE_DOCUMENT_RESOURCE_TYPES.includes(resourceType)) {
        refuse(`the type ${shorten(node.name.value)} is not allowed.`);
      }
    },
  });
  return refusal;
}

/** The resource type a type name of Medplum's schema stands for (`PatientConnection` → `Patient`), or undefined. */
function resourceTypeNamedBy(typeName: string, isResourceType: (name: string) => boolean): string | undefined {
  if (isResourceType(typeName)) {
    return typeName;
  }
  for (const suffix of TYPE_NAME_SUFFIXES) {
    if (typeName.endsWith(suffix) && isResourceType(typeName.slice(0, -suffix.length))) {
      return typeName.slice(0, -suffix.length);
    }
  }
  return undefined;
}

function shorten(name: string): string {
  return name.length > MAX_NAME_CHARS ? `${name.slice(0, MAX_NAME_CHARS)}…` : name;
}
