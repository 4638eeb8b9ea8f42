/**
 * Builds a membership's effective AccessPolicy as Medplum's server does: the membership's `accessPolicy` plus
 * each `access[]` entry, with `%profile`, `%patient` and the entry's other parameters substituted; `readonly`
 * entries limited to read interactions; no policy at all means full access (Medplum's legacy behaviour).
 */
import { OperationOutcomeError, badRequest, projectAdminResourceTypes, resolveId } from '@medplum/core';
import type {
  AccessPolicy,
  AccessPolicyResource,
  ProjectMembership,
  ProjectMembershipAccess,
  ProjectMembershipAccessParameter,
  Reference,
} from '@medplum/fhirtypes';

/** An AccessPolicy whose `resource` list is always present. */
export type EffectiveAccessPolicy = AccessPolicy & { resource: AccessPolicyResource[] };

/** Reads an AccessPolicy by reference, with system rights in the membership's project. */
export type ReadAccessPolicy = (reference: Reference<AccessPolicy>) => Promise<AccessPolicy>;

const READ_INTERACTIONS: AccessPolicyResource['interaction'] = ['search', 'read', 'history', 'vread'];
const ALWAYS_READABLE_TYPES = ['SearchParameter', 'StructureDefinition'];

/** Returns the effective policy of a membership, parameters substituted. */
export async function buildAccessPolicy(membership: ProjectMembership, readPolicy: ReadAccessPolicy): Promise<EffectiveAccessPolicy> {
  const entries: ProjectMembershipAccess[] = [];
  if (membership.accessPolicy) {
    entries.push({ policy: membership.accessPolicy });
  }
  entries.push(...(membership.access ?? []));

  const resource: AccessPolicyResource[] = [];
  let compartment: Reference | undefined;
  for (const entry of entries) {
    const policy = await readPolicyOrRefuse(readPolicy, entry.policy);
    const substituted = substituteParameters(policy, parametersOf(entry, membership));
    compartment = substituted.compartment ?? compartment;
    for (const rule of substituted.resource ?? []) {
      resource.push(rule.readonly && !rule.interaction ? { ...rule, interaction: READ_INTERACTIONS } : rule);
    }
  }
  if (entries.length === 0) {
    resource.push({ resourceType: '*' });
  }
  for (const resourceType of ALWAYS_READABLE_TYPES) {
    if (!resource.some((rule) => rule.resourceType === resourceType)) {
      resource.push({ resourceType, readonly: true, interaction: READ_INTERACTIONS });
    }
  }
  const withoutAdminTypes = resource.filter((rule) => !projectAdminResourceTypes.includes(rule.resourceType));
  if (membership.admin) {
    withoutAdminTypes.push(...projectAdminRules(membership));
  }
  return { resourceType: 'AccessPolicy', compartment, resource: withoutAdminTypes };
}

/**
 * The limited rights Medplum grants project admins over their own project's administrative resources. Medplum 5.2
 * counts AccessPolicy among them (its `*` no longer covers it), so an admin is given the project's policies here.
 */
function projectAdminRules(membership: ProjectMembership): AccessPolicyResource[] {
  const projectId = resolveId(membership.project);
  return [
    { resourceType: 'Project', criteria: `Project?_id=${projectId}`, interaction: ['read', 'vread', 'history', 'search'] },
    { resourceType: 'ProjectMembership', criteria: `ProjectMembership?_project=${projectId}` },
    { resourceType: 'AccessPolicy' },
  ];
}

function parametersOf(entry: ProjectMembershipAccess, membership: ProjectMembership): ProjectMembershipAccessParameter[] {
  const parameters = [...(entry.parameter ?? []), { name: 'profile', valueReference: membership.profile }];
  if (!parameters.some((parameter) => parameter.name === 'patient')) {
    parameters.push({ name: 'patient', valueReference: membership.profile });
  }
  return parameters;
}

/** Substitutes `%name` and `%name.id` throughout the policy, as Medplum does (on its JSON text). */
function substituteParameters(policy: AccessPolicy, parameters: ProjectMembershipAccessParameter[]): AccessPolicy {
  let json = JSON.stringify(policy);
  for (const parameter of parameters) {
    if (parameter.valueString) {
      json = json.replaceAll(`%${parameter.name}`, parameter.valueString);
    } else if (parameter.valueReference?.reference) {
      json = json.replaceAll(`%${parameter.name}.id`, resolveId(parameter.valueReference) ?? '');
      json = json.replaceAll(`%${parameter.name}`, parameter.valueReference.reference);
    }
  }
  return JSON.parse(json) as AccessPolicy;
}

async function readPolicyOrRefuse(readPolicy: ReadAccessPolicy, reference: Reference<AccessPolicy>): Promise<AccessPolicy> {
  try {
    return await readPolicy(reference);
  } catch {
    // The policy's details stay private: a broken membership is the administrator's to fix.
    throw new OperationOutcomeError(
      badRequest('Cannot authenticate: invalid access policy configuration. Please contact your administrator.')
    );
  }
}
