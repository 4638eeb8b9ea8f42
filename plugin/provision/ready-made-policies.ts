/**
 * The AccessPolicies a project needs for fhirgate, as `fixtures/demo-project.json` defines them (the demo project
 * and a provisioned project use the same ones): chat about a care-team patient, chat without a patient, and the
 * integration / auditor who reads the audit trail. Devices need none: fhirgate gives each device its own.
 */
import { readFile } from 'node:fs/promises';
import type { AccessPolicy, Bundle } from '@medplum/fhirtypes';

/** Where the policies are defined (beside `dist/plugin/` in the package, beside `plugin/` in the sources). */
const FIXTURE = new URL('../../fixtures/demo-project.json', import.meta.url);

/** The tag system that marks a policy fhirgate provisioned; the code is the policy's key. */
export const PROVISION_TAG_SYSTEM = 'urn:fhirgate:provision';

/** The ready-made policies by key, and what each is for. */
export const READY_MADE_POLICIES = {
  'policy-care-team-patient': 'chat about one patient of the care team (given per patient, parameter %patient)',
  'policy-own-conversations': 'chat without a patient: the caller’s own conversations',
  'policy-integration': 'an integration or auditor: registers patients and observations, reads the audit trail',
} as const;

/** A ready-made policy's key. */
export type ReadyMadePolicyKey = keyof typeof READY_MADE_POLICIES;

/** Each ready-made policy as it should be stored: no id, tagged with its key. */
export async function readReadyMadePolicies(): Promise<Record<ReadyMadePolicyKey, AccessPolicy>> {
  const fixture = JSON.parse(await readFile(FIXTURE, 'utf8')) as Bundle;
  const byKey = new Map((fixture.entry ?? []).map((entry) => [entry.fullUrl?.replace('urn:uuid:', ''), entry.resource]));
  const policies = {} as Record<ReadyMadePolicyKey, AccessPolicy>;
  for (const key of Object.keys(READY_MADE_POLICIES) as ReadyMadePolicyKey[]) {
    const policy = byKey.get(key);
    if (policy?.resourceType !== 'AccessPolicy') {
      throw new Error(`fixtures/demo-project.json has no AccessPolicy ${key}`);
    }
    const { id: _id, meta: _meta, ...definition } = policy;
    policies[key] = { ...definition, meta: { tag: [{ system: PROVISION_TAG_SYSTEM, code: key }] } };
  }
  return policies;
}
