import { OperationOutcomeError, notFound } from '@medplum/core';
import type { FhirRepository } from '@medplum/fhir-router';
import type { AccessPolicy, ProjectMembership } from '@medplum/fhirtypes';
import type { CallerContext } from '../host.ts';
import type { ResolvedModel } from '../llm/model-registry.ts';
import { createTestTelemetry } from '../../test/support/telemetry.ts';
import { grantOf, mayUse, ModelAccess, MODEL_GRANT_EXTENSION } from './model-access.ts';
import { parseProjectGovernance } from './project-governance-settings.ts';

const BY_POLICY = parseProjectGovernance([{ name: 'AI_MODEL_ACCESS', valueString: 'access-policy' }], new Map());
const EVERYONE = parseProjectGovernance([], new Map());

function policy(id: string, ...grants: string[]): AccessPolicy {
  return { resourceType: 'AccessPolicy', id, extension: grants.map((valueString) => ({ url: MODEL_GRANT_EXTENSION, valueString })) };
}

/** Policies kept in memory, read as a project's system repository reads them; counts the reads. */
function policyStore(policies: AccessPolicy[]): { repo: FhirRepository; reads: string[]; put: (policy: AccessPolicy) => void } {
  const byId = new Map(policies.map((item) => [item.id, item]));
  const reads: string[] = [];
  const repo = {
    readResource: async (_type: string, id: string) => {
      reads.push(id);
      const found = byId.get(id);
      if (!found) {
        throw new OperationOutcomeError(notFound);
      }
      return found;
    },
  } as unknown as FhirRepository;
  return { repo, reads, put: (item) => byId.set(item.id, item) };
}

function callerWith(membership: Partial<ProjectMembership>): CallerContext {
  return { project: { resourceType: 'Project', id: 'p' }, membership: { resourceType: 'ProjectMembership', id: 'm', ...membership } } as unknown as CallerContext;
}

function model(id: string, fallbacks: string[] = []): ResolvedModel {
  return { id, modelName: id.split('/')[1], fallbacks: fallbacks.map((fallback) => model(fallback)) } as unknown as ResolvedModel;
}

describe('model grants', () => {
  test('an AccessPolicy grants models by id, by provider or all, in one or several extensions', () => {
    const grant = grantOf(policy('a', 'openai/gpt-4o-mini, claude/*', 'local/llama3.2'));
    const permission = { kind: 'granted' as const, grants: [grant] };
    expect(['openai/gpt-4o-mini', 'claude/sonnet', 'local/llama3.2', 'openai/gpt-4o'].map((id) => mayUse(permission, id))).toEqual([true, true, true, false]);
    expect(mayUse({ kind: 'granted', grants: [grantOf(policy('b', '*'))] }, 'anything/else')).toBe(true);
    expect(mayUse({ kind: 'granted', grants: [grantOf(policy('c'))] }, 'openai/gpt-4o-mini')).toBe(false);
  });
});

describe('ModelAccess', () => {
  test("the union of the membership's policies decides; a deleted policy grants nothing", async () => {
    const { repo } = policyStore([policy('team', 'openai/gpt-4o-mini'), policy('extra', 'claude/*')]);
    const telemetry = createTestTelemetry();
    const access = new ModelAccess({ systemRepo: async () => repo, telemetry: telemetry.telemetry, policyCacheMs: 5000 });
    const caller = callerWith({
      accessPolicy: { reference: 'AccessPolicy/team' },
      access: [{ policy: { reference: 'AccessPolicy/extra' } }, { policy: { reference: 'AccessPolicy/deleted' } }],
    });
    const listed = await access.listFor(caller, BY_POLICY, [{ id: 'openai/gpt-4o-mini' }, { id: 'openai/gpt-4o' }, { id: 'claude/sonnet' }]);
    expect(listed.map((entry) => entry.id)).toEqual(['openai/gpt-4o-mini', 'claude/sonnet']);

    const allowed = await access.check(caller, BY_POLICY, 'openai/gpt-4o-mini', model('openai/gpt-4o-mini', ['openai/gpt-4o', 'claude/sonnet']));
    expect(allowed.fallbacks.map((fallback) => fallback.id)).toEqual(['claude/sonnet']);
    await expect(access.check(caller, BY_POLICY, 'openai/gpt-4o', model('openai/gpt-4o'))).rejects.toMatchObject({
      code: 'model_not_allowed',
      status: 403,
      details: { param: 'model' },
      message: "The model 'openai/gpt-4o' is not among the models your AccessPolicy grants in this project; GET /v1/models lists yours.",
    });
    await expect(access.check(caller, BY_POLICY, undefined, model('openai/gpt-4o'))).rejects.toMatchObject({
      message: expect.stringContaining("No model was named, and the project's default model 'openai/gpt-4o' is not among"),
    });
    expect(await telemetry.points('fhirgate.governance.refusals')).toEqual([
      { attributes: { 'fhirgate.governance.rule': 'model_access', 'fhirgate.project.id': 'p', 'gen_ai.request.model': 'openai/gpt-4o' }, value: 2 },
    ]);
  });

  test('a project without the setting lets every member use every model, reading no policy', async () => {
    const { repo, reads } = policyStore([]);
    const access = new ModelAccess({ systemRepo: async () => repo, telemetry: createTestTelemetry().telemetry, policyCacheMs: 5000 });
    const caller = callerWith({ accessPolicy: { reference: 'AccessPolicy/team' } });
    expect(await access.check(caller, EVERYONE, 'openai/gpt-4o', model('openai/gpt-4o', ['claude/x']))).toMatchObject({ id: 'openai/gpt-4o', fallbacks: [{ id: 'claude/x' }] });
    expect(reads).toEqual([]);
  });

  /**
   * A caller whose policy grants `openai/gpt-4o-mini`, read once at `start` (policyCacheMs 5 s), then edited to grant
   * every `openai/` model; `ids(at)` lists what the caller may use `at` ms after the first read.
   */
  async function policyEditedAfterRead(start: number): Promise<{ ids: (at: number) => Promise<string[]>; reads: string[] }> {
    const store = policyStore([policy('team', 'openai/gpt-4o-mini')]);
    let now = start;
    const access = new ModelAccess({ systemRepo: async () => store.repo, telemetry: createTestTelemetry().telemetry, policyCacheMs: 5000, now: () => now });
    const caller = callerWith({ accessPolicy: { reference: 'AccessPolicy/team' } });
    const ids = async (at: number): Promise<string[]> => {
      now = start + at;
      return (await access.listFor(caller, BY_POLICY, [{ id: 'openai/gpt-4o-mini' }, { id: 'openai/gpt-4o' }])).map((entry) => entry.id);
    };
    expect(await ids(0)).toEqual(['openai/gpt-4o-mini']);
    store.put(policy('team', 'openai/*'));
    return { ids, reads: store.reads };
  }

  test('a policy is read again once its grant is older than policyCacheMs, without holding the turn: an edit applies from the next one', async () => {
    // A clock that reads like Date.now(): the ages are differences of two large numbers.
    const { ids, reads } = await policyEditedAfterRead(Date.parse('2026-11-29T10:00:00Z'));
    expect(await ids(5000)).toEqual(['openai/gpt-4o-mini']);
    // This turn goes on with the grant it has, and reads the policy again meanwhile.
    expect(await ids(5001)).toEqual(['openai/gpt-4o-mini']);
    expect(await ids(5001)).toEqual(['openai/gpt-4o-mini', 'openai/gpt-4o']);
    expect(reads).toEqual(['team', 'team']);
  });

  test('a grant exactly twice policyCacheMs old still serves the turn while it is read again', async () => {
    const { ids, reads } = await policyEditedAfterRead(0);
    expect(await ids(10_000)).toEqual(['openai/gpt-4o-mini']);
    expect(await ids(10_000)).toEqual(['openai/gpt-4o-mini', 'openai/gpt-4o']);
    expect(reads).toEqual(['team', 'team']);
  });

  test('after a quiet spell longer than twice policyCacheMs, the first request reads the policy before it answers: an edit is never missed', async () => {
    const { ids, reads } = await policyEditedAfterRead(0);
    expect(await ids(10_001)).toEqual(['openai/gpt-4o-mini', 'openai/gpt-4o']);
    expect(reads).toEqual(['team', 'team']);
  });
});

describe('model grants: what a policy names', () => {
  test('only the ai-models extension grants; empty items, spaces and an extension without a value grant nothing more', () => {
    const grant = grantOf({
      resourceType: 'AccessPolicy',
      extension: [
        { url: 'urn:other', valueString: '*' },
        { url: MODEL_GRANT_EXTENSION },
        { url: MODEL_GRANT_EXTENSION, valueString: ' , openai/gpt-4o-mini ,, ' },
      ],
    });
    expect(grant).toEqual({ all: false, providers: new Set(), models: new Set(['openai/gpt-4o-mini']) });
  });

  test("a provider's grant covers that provider's models only, not one whose name begins the same", () => {
    const permission = { kind: 'granted' as const, grants: [grantOf(policy('a', 'open/*'))] };
    expect(['open/m', 'openai/m', 'ope/m'].map((id) => mayUse(permission, id))).toEqual([true, false, false]);
    expect(mayUse({ kind: 'all' }, 'anything/else')).toBe(true);
    expect(mayUse({ kind: 'granted', grants: [] }, 'open/m')).toBe(false);
  });
});

describe('ModelAccess: which policies, and how they are read', () => {
  test('only references to AccessPolicies count, each read once however often the membership names it', async () => {
    const store = policyStore([policy('team', 'openai/*')]);
    const access = new ModelAccess({ systemRepo: async () => store.repo, telemetry: createTestTelemetry().telemetry, policyCacheMs: 5000 });
    const caller = callerWith({
      accessPolicy: { reference: 'AccessPolicy/team' },
      access: [{ policy: { reference: 'AccessPolicy/team' } }, { policy: { reference: 'Group/care-team-north' } }, { policy: {} } as never, {} as never],
    });
    expect(await access.permissionOf(caller, BY_POLICY)).toEqual({ kind: 'granted', grants: [grantOf(policy('team', 'openai/*'))] });
    expect(store.reads).toEqual(['team']);
    expect(await access.permissionOf(callerWith({}), BY_POLICY)).toEqual({ kind: 'granted', grants: [] });
  });

  test('a model of the list is refused by name when not granted, allowed when granted', async () => {
    const { repo } = policyStore([policy('team', 'openai/gpt-4o-mini')]);
    const access = new ModelAccess({ systemRepo: async () => repo, telemetry: createTestTelemetry().telemetry, policyCacheMs: 5000 });
    const caller = callerWith({ accessPolicy: { reference: 'AccessPolicy/team' } });
    await expect(access.requireListed(caller, BY_POLICY, 'openai/gpt-4o-mini')).resolves.toBeUndefined();
    await expect(access.requireListed(caller, BY_POLICY, 'openai/gpt-4o')).rejects.toMatchObject({ code: 'model_not_allowed', message: expect.stringContaining("The model 'openai/gpt-4o' is not among") });
    // A model named with spaces only is no model named.
    await expect(access.check(caller, BY_POLICY, '  ', model('openai/gpt-4o'))).rejects.toMatchObject({ message: expect.stringContaining('No model was named') });
    expect(await access.listFor(caller, EVERYONE, [{ id: 'a/b' }])).toEqual([{ id: 'a/b' }]);
  });

  test('requests that need one policy at the same time read it once', async () => {
    const store = policyStore([policy('team', 'openai/*')]);
    const access = new ModelAccess({ systemRepo: async () => store.repo, telemetry: createTestTelemetry().telemetry, policyCacheMs: 5000 });
    const caller = callerWith({ accessPolicy: { reference: 'AccessPolicy/team' } });
    await Promise.all([access.permissionOf(caller, BY_POLICY), access.permissionOf(caller, BY_POLICY), access.permissionOf(caller, BY_POLICY)]);
    expect(store.reads).toEqual(['team']);
  });

  test('a read that fails fails the request that waits for it; in the background it leaves the grant as it was, and is tried again', async () => {
    let failing = true;
    const store = policyStore([policy('team', 'openai/*')]);
    const repo = { readResource: (type: string, id: string) => (failing ? Promise.reject(new Error('store unavailable')) : store.repo.readResource(type as 'AccessPolicy', id)) } as unknown as FhirRepository;
    let now = 0;
    const access = new ModelAccess({ systemRepo: async () => repo, telemetry: createTestTelemetry().telemetry, policyCacheMs: 5000, now: () => now });
    const caller = callerWith({ accessPolicy: { reference: 'AccessPolicy/team' } });
    await expect(access.permissionOf(caller, BY_POLICY)).rejects.toThrow('store unavailable');
    failing = false;
    expect(await access.listFor(caller, BY_POLICY, [{ id: 'openai/m' }])).toEqual([{ id: 'openai/m' }]);
    failing = true;
    store.put(policy('team'));
    now = 6000;
    expect(await access.listFor(caller, BY_POLICY, [{ id: 'openai/m' }])).toEqual([{ id: 'openai/m' }]);
    await new Promise((resolve) => setImmediate(resolve));
    failing = false;
    expect(await access.listFor(caller, BY_POLICY, [{ id: 'openai/m' }])).toEqual([{ id: 'openai/m' }]);
    await new Promise((resolve) => setImmediate(resolve));
    expect(await access.listFor(caller, BY_POLICY, [{ id: 'openai/m' }])).toEqual([]);
  });

  test('at most maxPolicies grants are kept, the least recently read going first', async () => {
    const store = policyStore([policy('a', 'x/*'), policy('b', 'y/*'), policy('c', 'z/*')]);
    const access = new ModelAccess({ systemRepo: async () => store.repo, telemetry: createTestTelemetry().telemetry, policyCacheMs: 60_000, maxPolicies: 2 });
    const of = (id: string): Promise<unknown> => access.permissionOf(callerWith({ accessPolicy: { reference: `AccessPolicy/${id}` } }), BY_POLICY);
    await of('a');
    await of('b');
    await of('a');
    await of('c');
    expect(store.reads).toEqual(['a', 'b', 'c']);
    // `a` went first when `c` came, though asked for since: `b` is still kept.
    await of('b');
    await of('a');
    expect(store.reads).toEqual(['a', 'b', 'c', 'a']);
  });

  test('a policy read again goes behind the others: it is kept, and no other goes for it', async () => {
    const store = policyStore(['a', 'b', 'c', 'd', 'e'].map((id) => policy(id, `${id}/*`)));
    let now = 0;
    const access = new ModelAccess({ systemRepo: async () => store.repo, telemetry: createTestTelemetry().telemetry, policyCacheMs: 1000, maxPolicies: 3, now: () => now });
    const of = (id: string): Promise<unknown> => access.permissionOf(callerWith({ accessPolicy: { reference: `AccessPolicy/${id}` } }), BY_POLICY);
    await of('a');
    await of('b');
    now = 1500;
    await of('c');
    // `b` is older than twice the bound: read again before the answer, it goes behind `c`; `a` stays.
    now = 2500;
    await of('b');
    await of('d');
    await of('e');
    // `a` and then `c` made room for `d` and `e`; `b`, read last but two, is still kept.
    await of('b');
    expect(store.reads).toEqual(['a', 'b', 'c', 'b', 'd', 'e']);
  });
});
