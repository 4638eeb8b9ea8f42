import type { FhirRepository } from '@medplum/fhir-router';
import type { Device, Reference } from '@medplum/fhirtypes';
import { AGENT_DEVICE_IDENTIFIER } from './fhir-vocabulary.ts';

/**
 * The AI agent's `Device` of each project (the `sender` of every reply), found by its identifier or created on
 * first use with system rights. Looked up once per project and process.
 */
export class AgentDevices {
  readonly #known = new Map<string, Promise<Reference<Device>>>();
  readonly #systemRepo: (projectId: string) => Promise<FhirRepository>;
  readonly #deviceName: string;

  constructor(systemRepo: (projectId: string) => Promise<FhirRepository>, deviceName: string) {
    this.#systemRepo = systemRepo;
    this.#deviceName = deviceName;
  }

  /** The agent's Device reference in a project. */
  referenceFor(projectId: string): Promise<Reference<Device>> {
    let known = this.#known.get(projectId);
    if (!known) {
      known = this.#findOrCreate(projectId);
      // A failed lookup is retried on the next request rather than remembered.
      known.catch(() => this.#known.delete(projectId));
      this.#known.set(projectId, known);
    }
    return known;
  }

  async #findOrCreate(projectId: string): Promise<Reference<Device>> {
    const repo = await this.#systemRepo(projectId);
    const identifier = `${AGENT_DEVICE_IDENTIFIER.system}|${AGENT_DEVICE_IDENTIFIER.value}`;
    const { resource } = await repo.conditionalCreate<Device>(
      {
        resourceType: 'Device',
        status: 'active',
        identifier: [{ ...AGENT_DEVICE_IDENTIFIER }],
        deviceName: [{ name: this.#deviceName, type: 'user-friendly-name' }],
        type: { text: 'AI agent (fhirgate chat gateway)' },
      },
      { resourceType: 'Device', filters: [{ code: 'identifier', operator: 'eq', value: identifier }] }
    );
    return { reference: `Device/${resource.id}`, display: this.#deviceName };
  }
}
