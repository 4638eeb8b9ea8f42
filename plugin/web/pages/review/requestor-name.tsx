/**
 * Who asked for a disclosure (its requesting agent), in the disclosures list and under a reply.
 */
import type { AuditEvent } from '@medplum/fhirtypes';
import { ResourceName } from '@medplum/react';
import type { JSX } from 'react';

/** The requestor by name when the reviewer may read them, else as recorded. */
export function RequestorName({ event }: { readonly event: AuditEvent }): JSX.Element {
  const who = event.agent.find((agent) => agent.requestor)?.who;
  if (who?.reference) {
    return <ResourceName value={who} />;
  }
  return <>{who?.display ?? 'an unknown caller'}</>;
}
