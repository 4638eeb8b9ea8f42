import { forbidden, notFound, OperationOutcomeError, serverError } from '@medplum/core';
import type { FhirRepository } from '@medplum/fhir-router';
import type { Communication, Resource } from '@medplum/fhirtypes';
import type { CallerContext } from '../host.ts';
import type { ChatServices } from './chat-completion.ts';
import type { ChatRequest } from './chat-request.ts';
import type { ConversationParties } from './communication-builders.ts';
import { recordPrompt, type PromptIds } from './record-prompt.ts';

const PARTIES: ConversationParties = { categorySystem: 'urn:c', caller: { reference: 'Practitioner/alice' }, agent: { reference: 'Device/agent' } };
const CHAT = { body: { model: 'openai/gpt-4o', messages: [{ role: 'user', content: 'Hello' }] } } as unknown as ChatRequest;
const NEW: PromptIds = { rootId: 'root-1', promptId: 'prompt-1', isNew: true, sent: '2026-11-28T10:00:00.000Z', input: [{ role: 'user', content: 'Hello' }] };
const CONTINUED: PromptIds = { ...NEW, isNew: false };

/** A store of Communications, shared by the caller's and the agent's repositories, with what each was asked. */
class Store {
  readonly records = new Map<string, Communication>();
  readonly log: string[] = [];
}

interface RepoOptions {
  /** The answer to `canPerformInteraction`; absent: the repository has no such method. */
  readonly allows?: boolean;
  /** Errors thrown by the next creates, in turn; `stored` ones are thrown after the record is kept (an answer lost). */
  readonly createFailures?: { error: Error; stored?: boolean }[];
  readonly deleteFailure?: Error;
}

function repoOf(store: Store, who: string, options: RepoOptions = {}): FhirRepository {
  const failures = [...(options.createFailures ?? [])];
  const repo: Record<string, unknown> = {
    createResource: async (resource: Communication & { id: string }, createOptions?: { assignedId?: boolean }) => {
      store.log.push(`${who} create ${resource.id}${createOptions?.assignedId ? ' (assigned id)' : ''}`);
      const failure = failures.shift();
      if (failure && !failure.stored) {
        throw failure.error;
      }
      store.records.set(resource.id, resource);
      if (failure) {
        throw failure.error;
      }
      return resource;
    },
    readResource: async (_type: string, id: string) => {
      store.log.push(`${who} read ${id}`);
      const found = store.records.get(id);
      if (!found) {
        throw new OperationOutcomeError(notFound);
      }
      return found;
    },
    deleteResource: async (_type: string, id: string) => {
      store.log.push(`${who} delete ${id}`);
      if (options.deleteFailure) {
        throw options.deleteFailure;
      }
      store.records.delete(id);
    },
  };
  if (options.allows !== undefined) {
    repo.canPerformInteraction = (_interaction: string, _resource: Resource) => options.allows;
  }
  return repo as unknown as FhirRepository;
}

function setUp(callerOptions: RepoOptions = {}, systemOptions: RepoOptions = {}) {
  const store = new Store();
  const remembered: string[] = [];
  const warnings: { message: string; data?: Record<string, unknown> }[] = [];
  const services = {
    agents: {
      repoFor: async (projectId: string) => {
        store.log.push(`agent repo for ${projectId}`);
        return repoOf(store, 'agent');
      },
      rememberWritten: async (projectId: string, resource: Communication) => void remembered.push(`${projectId}:${resource.id}`),
    },
    host: {
      getSystemRepo: async () => repoOf(store, 'system', systemOptions),
      logger: { debug: () => undefined, info: () => undefined, warn: (message: string, data?: Record<string, unknown>) => void warnings.push({ message, data }), error: () => undefined },
    },
  } as unknown as ChatServices;
  const caller = { repo: repoOf(store, 'caller', callerOptions), project: { id: 'project-1' } } as unknown as CallerContext;
  return { store, remembered, warnings, services, caller };
}

describe('recordPrompt (step 2)', () => {
  test("a new conversation: the root by the AI agent, then the prompt by the caller, each with its id; the agent's write remembered", async () => {
    const { store, remembered, services, caller } = setUp({ allows: true });
    await recordPrompt(services, caller, PARTIES, CHAT, NEW);
    expect(store.log).toEqual(['agent repo for project-1', 'agent create root-1 (assigned id)', 'caller create prompt-1 (assigned id)']);
    expect(store.records.get('root-1')).toMatchObject({ status: 'in-progress', sender: PARTIES.caller, sent: NEW.sent });
    expect(store.records.get('prompt-1')).toMatchObject({ id: 'prompt-1', status: 'completed', partOf: [{ reference: 'Communication/root-1' }], payload: [{ contentString: 'Hello' }] });
    expect(remembered).toEqual(['project-1:root-1']);
  });

  test('a continued conversation: the prompt alone', async () => {
    const { store, remembered, services, caller } = setUp({ allows: false });
    await recordPrompt(services, caller, PARTIES, CHAT, CONTINUED);
    expect(store.log).toEqual(['caller create prompt-1 (assigned id)']);
    expect(remembered).toEqual([]);
  });

  test("a side request's prompt carries the side request's category", async () => {
    const { store, services, caller } = setUp();
    await recordPrompt(services, caller, PARTIES, CHAT, { ...CONTINUED, sideRequest: true });
    expect(store.records.get('prompt-1')?.category?.[1]?.coding?.[0]?.code).toBe('ai-side-request');
  });

  test('a caller whose policy does not allow the prompt is refused (403) before anything is written', async () => {
    const { store, services, caller } = setUp({ allows: false });
    await expect(recordPrompt(services, caller, PARTIES, CHAT, NEW)).rejects.toMatchObject({
      code: 'forbidden',
      message: 'Forbidden: the AccessPolicy of the caller does not allow it to record a prompt in this conversation.',
    });
    expect(store.log).toEqual([]);
    expect(store.records.size).toBe(0);
  });

  test('a repository that cannot tell: the root is written, and taken back when the prompt is refused', async () => {
    const refusal = new OperationOutcomeError(forbidden);
    const { store, services, caller, warnings } = setUp({ createFailures: [{ error: refusal }] });
    await expect(recordPrompt(services, caller, PARTIES, CHAT, NEW)).rejects.toBe(refusal);
    expect(store.log).toEqual(['agent repo for project-1', 'agent create root-1 (assigned id)', 'caller create prompt-1 (assigned id)', 'system delete root-1']);
    expect(store.records.size).toBe(0);
    expect(warnings).toEqual([]);
  });

  test('a refused prompt of a continued conversation leaves its root alone', async () => {
    const refusal = new OperationOutcomeError(forbidden);
    const { store, services, caller } = setUp({ createFailures: [{ error: refusal }] });
    store.records.set('root-1', { resourceType: 'Communication', id: 'root-1', status: 'in-progress' });
    await expect(recordPrompt(services, caller, PARTIES, CHAT, CONTINUED)).rejects.toBe(refusal);
    expect(store.records.has('root-1')).toBe(true);
    expect(store.log).toEqual(['caller create prompt-1 (assigned id)']);
  });

  test('a root that cannot be taken back is logged with its id and status, and the refusal still reaches the caller', async () => {
    const refusal = new OperationOutcomeError(forbidden);
    const { services, caller, warnings } = setUp({ createFailures: [{ error: refusal }] }, { deleteFailure: new OperationOutcomeError(serverError(new Error('disk'))) });
    await expect(recordPrompt(services, caller, PARTIES, CHAT, NEW)).rejects.toBe(refusal);
    expect(warnings).toEqual([{ message: 'fhirgate could not remove the root of a conversation whose first prompt was refused', data: { conversationId: 'root-1', status: 500 } }]);
  });

  test('a host without a logger: a root that cannot be taken back does not hide the refusal', async () => {
    const refusal = new OperationOutcomeError(forbidden);
    const { services, caller } = setUp({ createFailures: [{ error: refusal }] }, { deleteFailure: new OperationOutcomeError(serverError(new Error('disk'))) });
    (services.host as { logger?: unknown }).logger = undefined;
    await expect(recordPrompt(services, caller, PARTIES, CHAT, NEW)).rejects.toBe(refusal);
  });

  test('a passing failure is tried again; a try whose answer was lost but was stored is not written twice', async () => {
    const lost = new OperationOutcomeError(serverError(new Error('connection reset')));
    const { store, services, caller } = setUp({ createFailures: [{ error: lost, stored: true }] });
    await recordPrompt(services, caller, PARTIES, CHAT, CONTINUED);
    expect(store.log).toEqual(['caller create prompt-1 (assigned id)', 'caller read prompt-1']);
    expect(store.records.has('prompt-1')).toBe(true);
  });

  test('a passing failure that did not store is tried again until it is', async () => {
    const down = new Error('SQLITE_BUSY');
    const { store, services, caller } = setUp({ createFailures: [{ error: down }, { error: down }] });
    await recordPrompt(services, caller, PARTIES, CHAT, CONTINUED);
    expect(store.log).toEqual(['caller create prompt-1 (assigned id)', 'caller read prompt-1', 'caller create prompt-1 (assigned id)', 'caller read prompt-1', 'caller create prompt-1 (assigned id)']);
  });

  test("a new conversation's root whose answer was lost is written once; its version, not known, is not noted as the agent's", async () => {
    const store = new Store();
    const remembered: string[] = [];
    const lost = new Error('connection reset');
    const agent = repoOf(store, 'agent', { createFailures: [{ error: lost, stored: true }] });
    const services = {
      agents: { repoFor: async () => agent, rememberWritten: async (_projectId: string, resource: Communication) => void remembered.push(resource.id ?? '') },
      host: { getSystemRepo: async () => repoOf(store, 'system'), logger: undefined },
    } as unknown as ChatServices;
    const caller = { repo: repoOf(store, 'caller'), project: { id: 'project-1' } } as unknown as CallerContext;
    await recordPrompt(services, caller, PARTIES, CHAT, NEW);
    expect(store.log).toEqual(['agent create root-1 (assigned id)', 'agent read root-1', 'caller create prompt-1 (assigned id)']);
    expect(remembered).toEqual([]);
  });
});
