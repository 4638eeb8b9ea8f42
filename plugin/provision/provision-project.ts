/**
 * `fhirgate provision`: what a Medplum project needs before its users chat and its devices post, created through
 * the server's public API (FHIR and Medplum's project admin API) with a project administrator's client
 * credentials, on any Medplum server with fhirgate mounted (or the standalone host):
 * 1. the AI agent's `Device` (fhirgate would create it on the first chat; provisioning makes it visible first);
 * 2. the ready-made AccessPolicies for chat users and auditors (ready-made-policies.ts), tagged so that a later
 *    run finds them and brings them up to date;
 * 3. optionally a device: its `Device` and its key, written to the `device_auth` file the server reads;
 * 4. optionally the project's models: `Project.setting` `AI_MODELS` and `AI_MODEL`.
 * Every step finds what exists before it creates: running it again changes nothing that is already right.
 */
import type { MedplumClient } from '@medplum/core';
import type { AccessPolicy, Device, ProjectSetting } from '@medplum/fhirtypes';
import { AGENT_DEVICE_IDENTIFIER } from '../chat/fhir-vocabulary.ts';
import { writeDeviceAuthFile, type DeviceAuthFileChange, type ProvisionedDevice } from './device-auth-file.ts';
import { PROVISION_TAG_SYSTEM, readReadyMadePolicies, type ReadyMadePolicyKey } from './ready-made-policies.ts';

/** What to provision beyond the agent and the policies. */
export interface ProvisionOptions {
  /** The AI agent Device's display name (the plugin's `agentDeviceName`). */
  readonly agentDeviceName?: string;
  /** A device to register, and the `device_auth` file to add its key to. */
  readonly device?: ProvisionedDevice & { readonly authFile: string };
  /** `provider/model` ids the project offers (`AI_MODELS`), and its default (`AI_MODEL`). */
  readonly models?: readonly string[];
  readonly defaultModel?: string;
}

/** What happened to one thing provisioned. */
export type ProvisionOutcome = 'created' | 'updated' | 'unchanged';

/** What a run did, by item; no secret in it. */
export interface ProvisionReport {
  readonly projectId: string;
  readonly agentDevice: { readonly id: string; readonly outcome: ProvisionOutcome };
  readonly policies: Record<ReadyMadePolicyKey, { readonly id: string; readonly outcome: ProvisionOutcome }>;
  readonly device?: { readonly id: string; readonly resourceId: string; readonly outcome: ProvisionOutcome; readonly authFile: string; readonly authFileChange: DeviceAuthFileChange };
  readonly settings?: ProvisionOutcome;
}

/** Provisions the project of the signed-in client (a project administrator). */
export async function provisionProject(medplum: MedplumClient, options: ProvisionOptions = {}): Promise<ProvisionReport> {
  const projectId = medplum.getProject()?.id;
  if (!projectId) {
    throw new Error('The client is not signed in to a project: sign in with a project administrator’s client credentials.');
  }
  const agentDevice = await ensureDevice(medplum, {
    resourceType: 'Device',
    status: 'active',
    identifier: [{ ...AGENT_DEVICE_IDENTIFIER }],
    deviceName: [{ name: options.agentDeviceName ?? 'fhirgate AI agent', type: 'user-friendly-name' }],
    type: { text: 'AI agent (fhirgate chat gateway)' },
  });
  const policies = {} as ProvisionReport['policies'];
  for (const [key, policy] of Object.entries(await readReadyMadePolicies()) as [ReadyMadePolicyKey, AccessPolicy][]) {
    policies[key] = await ensurePolicy(medplum, key, policy);
  }
  return {
    projectId,
    agentDevice,
    policies,
    device: options.device ? await provisionDevice(medplum, projectId, options.device) : undefined,
    settings: options.models || options.defaultModel ? await ensureModelSettings(medplum, projectId, options) : undefined,
  };
}

/** A Device found by its first identifier, or created. */
async function ensureDevice(medplum: MedplumClient, device: Device): Promise<{ id: string; outcome: ProvisionOutcome }> {
  const [identifier] = device.identifier ?? [];
  const query = `identifier=${identifier.system}|${identifier.value}`;
  const existing = await medplum.searchOne('Device', query, { cache: 'no-cache' });
  if (existing) {
    return { id: existing.id, outcome: 'unchanged' };
  }
  const created = await medplum.createResourceIfNoneExist(device, query);
  return { id: created.id, outcome: 'created' };
}

/** The policy tagged `key`: created, or brought up to the current definition. */
async function ensurePolicy(medplum: MedplumClient, key: ReadyMadePolicyKey, policy: AccessPolicy): Promise<{ id: string; outcome: ProvisionOutcome }> {
  const existing = await medplum.searchOne('AccessPolicy', `_tag=${PROVISION_TAG_SYSTEM}|${key}`, { cache: 'no-cache' });
  if (!existing) {
    const created = await medplum.createResource(policy);
    return { id: created.id, outcome: 'created' };
  }
  const current = { name: existing.name, resource: existing.resource, text: existing.text };
  const wanted = { name: policy.name, resource: policy.resource, text: policy.text };
  if (JSON.stringify(current) === JSON.stringify(wanted)) {
    return { id: existing.id, outcome: 'unchanged' };
  }
  await medplum.updateResource({ ...existing, ...wanted });
  return { id: existing.id, outcome: 'updated' };
}

async function provisionDevice(medplum: MedplumClient, projectId: string, device: NonNullable<ProvisionOptions['device']>): Promise<NonNullable<ProvisionReport['device']>> {
  const resource = await ensureDevice(medplum, {
    resourceType: 'Device',
    status: 'active',
    identifier: [{ system: device.identifierSystem, value: device.id }],
    deviceName: [{ name: device.id, type: 'user-friendly-name' }],
  });
  const authFileChange = writeDeviceAuthFile(device.authFile, projectId, device);
  return { id: device.id, resourceId: resource.id, outcome: resource.outcome, authFile: device.authFile, authFileChange };
}

/** `AI_MODELS` and `AI_MODEL` in `Project.setting`, other settings kept (Medplum's project admin API). */
async function ensureModelSettings(medplum: MedplumClient, projectId: string, options: ProvisionOptions): Promise<ProvisionOutcome> {
  const { project } = (await medplum.get(`admin/projects/${projectId}`, { cache: 'no-cache' })) as { project: { setting?: ProjectSetting[] } };
  const current = project.setting ?? [];
  const wanted = new Map<string, string>();
  if (options.models) {
    wanted.set('AI_MODELS', options.models.join(','));
  }
  if (options.defaultModel) {
    wanted.set('AI_MODEL', options.defaultModel);
  }
  if ([...wanted].every(([name, value]) => current.some((setting) => setting.name === name && setting.valueString === value))) {
    return 'unchanged';
  }
  const kept = current.filter((setting) => !wanted.has(setting.name));
  const setting: ProjectSetting[] = [...kept, ...[...wanted].map(([name, valueString]) => ({ name, valueString }))];
  await medplum.post(`admin/projects/${projectId}/settings`, setting);
  return current.some((existing) => wanted.has(existing.name)) ? 'updated' : 'created';
}
