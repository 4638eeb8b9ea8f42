/**
 * The caller as a reference FHIR R4 allows where fhirgate names it: a Communication's `sender` and `recipient`,
 * an AuditEvent's `agent.who`. A profile R4 lists there (Patient, Practitioner, RelatedPerson, ...) is referenced as
 * it is. A ClientApplication or a Bot (Medplum's own resource types, which R4 does not list there) becomes a
 * logical reference: its literal reference as an identifier of the system `urn:fhirgate:caller`, and as display,
 * so the record stays valid (Medplum's validator warns about, and a strict server refuses, a ClientApplication
 * there) and still says who called. `meta.author`, which the server sets, holds the literal reference too.
 */
import type { Reference } from '@medplum/fhirtypes';

/** The identifier system of a caller recorded as a logical reference. */
export const CALLER_IDENTIFIER_SYSTEM = 'urn:fhirgate:caller';

// Types allowed both as Communication.sender / recipient and as AuditEvent.agent.who in R4.
const PARTY_TYPES = new Set(['Device', 'Organization', 'Patient', 'Practitioner', 'PractitionerRole', 'RelatedPerson']);

/** A reference to the caller's profile that R4 accepts as a Communication party and an audit agent. */
export function callerParty(profile: Reference): Reference {
  const literal = profile.reference ?? '';
  const type = literal.split('/')[0];
  if (PARTY_TYPES.has(type)) {
    return profile;
  }
  return { identifier: { system: CALLER_IDENTIFIER_SYSTEM, value: literal }, display: profile.display ?? literal };
}
