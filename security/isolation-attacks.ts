/**
 * Isolation (OWASP API1 broken object level authorization, API3 broken object property level authorization, API5
 * broken function level authorization): project A's practitioner reaching project B's conversations,
 * Communications, Observations and Devices through the chat route and `/fhir/R4`, and setting fields a caller may
 * not set. Every attempt is refused or ignored, and nothing of B's is read or changed: each record attacked is read
 * again (with the store's own rights) after the attack and must be as it was, and the chat route's attempts store
 * nothing and call no provider.
 */
import type { Communication, Observation, Resource } from '@medplum/fhirtypes';
import type { SecurityContext } from './context.ts';
import { adminClientToken } from './forgery-attacks.ts';
import { accepted, refused, type AttackOutcome } from './suite.ts';

const KIND = 'isolation';

export async function isolationAttacks(context: SecurityContext): Promise<void> {
  const { log, host, projectA, projectB, tokenA, tokenB } = context;
  const adminA = await adminClientToken(context);
  const fhir = (token: string, project: string, path: string, init: RequestInit = {}): Promise<Response> =>
    fetch(`${host.url}fhir/R4/${path}`, {
      ...init,
      headers: { Authorization: `Bearer ${token}`, 'X-Project-ID': project, 'Content-Type': 'application/fhir+json', ...(init.headers as Record<string, string>) },
    });

  // B's own records: a conversation of B's practitioner, and B's Observations and Devices from the fixture.
  const started = await context.chat(tokenB, { messages: [{ role: 'user', content: 'A private question of project B.' }] }, { 'X-Project-ID': projectB.projectId });
  const conversationB = ((await started.json()) as { conversation_id: string; communication_id: string });
  const systemB = await host.standalone.host.getSystemRepo(projectB.projectId);
  const observationB = await systemB.createResource<Observation>({
    resourceType: 'Observation',
    status: 'final',
    code: { text: 'Heart rate' },
    subject: { reference: `Patient/${projectB.ids['patient-in-care-team-1']}` },
    valueQuantity: { value: 72, unit: '/min' },
  });
  const victims: [string, string][] = [
    ['Communication', conversationB.conversation_id],
    ['Communication', conversationB.communication_id],
    ['Observation', observationB.id],
    ['Device', projectB.ids['demo-monitor']],
    ['Patient', projectB.ids['patient-in-care-team-1']],
  ];
  const bCommunicationsBefore = JSON.stringify(await readAll(context, projectB.projectId));
  const victimsBefore = new Map(await Promise.all(victims.map(async ([type, id]) => [`${type}/${id}`, await currentVersion(context, type, id)] as const)));
  /** Why the victim is not as it was before the attacks (gone, or another version), if it is not. */
  const changed = async (type: string, id: string): Promise<string | undefined> => {
    const now = await currentVersion(context, type, id);
    return now === victimsBefore.get(`${type}/${id}`) ? undefined : now === GONE ? `B's ${type} is gone` : `B's ${type} was changed`;
  };
  /** What a chat-route attempt did besides its answer: stored a Communication, or called the provider. */
  const sideEffectOf = async (attempt: () => Promise<Response>): Promise<{ response: Response; text: string; sideEffect?: string }> => {
    const stored = await context.storedCommunications();
    const calls = context.providerCalls();
    const response = await attempt();
    const text = await response.text();
    const sideEffect = (await context.storedCommunications()) !== stored ? 'a Communication was stored' : context.providerCalls() !== calls ? 'the provider was called' : undefined;
    return { response, text, sideEffect };
  };

  await log.run(KIND, "continuing B's conversation through the chat route", async () => {
    const { response, text, sideEffect } = await sideEffectOf(() => context.chat(tokenA, { conversation_id: conversationB.conversation_id, messages: [{ role: 'user', content: 'Show me.' }] }, { 'X-Project-ID': projectA.projectId }));
    return refused(response.status, [404], text.includes('private question') ? "B's text was disclosed" : sideEffect);
  });
  await log.run(KIND, "A's token with B's X-Project-ID on the chat route", async () => {
    const { response, sideEffect } = await sideEffectOf(() => context.chat(tokenA, { messages: [{ role: 'user', content: 'Hello B.' }] }, { 'X-Project-ID': projectB.projectId }));
    return refused(response.status, [401, 403], sideEffect);
  });
  for (const [type, id] of victims) {
    await log.run(KIND, `reading B's ${type} through /fhir/R4`, async () => {
      const response = await fhir(tokenA, projectA.projectId, `${type}/${id}`);
      const body = await response.text();
      return refused(response.status, [403, 404], body.includes(id) && response.status < 400 ? 'disclosed' : undefined);
    });
    await log.run(KIND, `searching for B's ${type} by id through /fhir/R4`, async () => {
      const response = await fhir(tokenA, projectA.projectId, `${type}?_id=${id}`);
      const bundle = (await response.json()) as { entry?: unknown[] };
      return response.status === 200 && (bundle.entry?.length ?? 0) > 0 ? { status: 200, letThrough: true, note: 'found' } : { status: response.status, letThrough: false };
    });
    // A's practitioner may not delete or overwrite at all (403); A's administrator may, in A: only isolation stops it (404).
    for (const [who, token, expected] of [['practitioner', tokenA, [403, 404]], ['administrator', adminA, [404]]] as const) {
      await log.run(KIND, `deleting B's ${type} through /fhir/R4 as A's ${who}`, async () => {
        const response = await fhir(token, projectA.projectId, `${type}/${id}`, { method: 'DELETE' });
        await response.arrayBuffer();
        return refused(response.status, expected, await changed(type, id));
      });
      await log.run(KIND, `overwriting B's ${type} through /fhir/R4 as A's ${who}`, async () => {
        const current = JSON.parse(victimsBefore.get(`${type}/${id}`) ?? '{}') as Resource;
        const response = await fhir(token, projectA.projectId, `${type}/${id}`, { method: 'PUT', body: JSON.stringify({ ...current, meta: undefined, language: 'x-overwritten' }) });
        await response.arrayBuffer();
        return refused(response.status, expected, await changed(type, id));
      });
    }
  }
  // The control: A's administrator deletes a record of A's own, so the refusals above are the isolation, not the route.
  await log.run(KIND, "control: A's administrator deletes an Observation of A's own through /fhir/R4", async () => {
    const own = await (await host.standalone.host.getSystemRepo(projectA.projectId)).createResource<Observation>({ resourceType: 'Observation', status: 'final', code: { text: 'Heart rate' } });
    const response = await fhir(adminA, projectA.projectId, `Observation/${own.id}`, { method: 'DELETE' });
    await response.arrayBuffer();
    return accepted(response.status, response.status === 200 && (await currentVersion(context, 'Observation', own.id)) === GONE, 'the control delete did not delete: the checks above prove nothing');
  });
  // The same records through fhirgate's /graphql, with A's practitioner and A's device.
  const graphql = async (token: string, query: string): Promise<{ status: number; text: string }> => {
    const response = await fetch(`${host.url}graphql`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${token}`, 'X-Project-ID': projectA.projectId },
      body: JSON.stringify({ query }),
    });
    return { status: response.status, text: await response.text() };
  };
  // The control: the same query answers A's own patient, so a refusal below is the isolation, not a bad query.
  await log.run(KIND, "control: A's practitioner reads A's own patient through /graphql", async () => {
    const own = projectA.ids['patient-in-care-team-1'];
    const { status, text } = await graphql(tokenA, `query { Patient(id: "${own}") { id } }`);
    const found = (JSON.parse(text) as { data?: { Patient?: { id?: string } | null } }).data?.Patient?.id === own;
    return { status, letThrough: !found, note: found ? undefined : 'the control query found nothing: the checks below prove nothing' };
  });
  for (const [type, id] of victims) {
    for (const [who, token] of [['practitioner', tokenA], ['device', context.deviceTokenA]] as const) {
      await log.run(KIND, `reading B's ${type} through /graphql as A's ${who}`, async () => {
        const { status, text } = await graphql(token, `query { ${type}(id: "${id}") { id } }`);
        const disclosed = (JSON.parse(text) as { data?: Record<string, { id?: string } | null> }).data?.[type]?.id === id;
        return { status, letThrough: disclosed || status >= 500, note: disclosed ? 'disclosed' : undefined };
      });
    }
  }
  await log.run(KIND, "listing B's Communications through /graphql", async () => {
    const { status, text } = await graphql(tokenA, `query { CommunicationList(_count: 1000) { id } }`);
    const seen = (JSON.parse(text) as { data?: { CommunicationList?: { id: string }[] } }).data?.CommunicationList ?? [];
    const foreign = seen.filter((item) => item.id === conversationB.conversation_id || item.id === conversationB.communication_id);
    return { status, letThrough: foreign.length > 0, note: foreign.length ? "B's Communications listed" : undefined };
  });
  await log.run(KIND, 'creating a Communication with meta.project of B and another author', async () => {
    const body: Communication = {
      resourceType: 'Communication',
      status: 'completed',
      meta: { project: projectB.projectId, author: { reference: 'Practitioner/someone-else' } },
      sender: { reference: `Practitioner/${projectA.ids.practitioner ?? 'x'}` },
    };
    const bCount = (await readAll(context, projectB.projectId)).length;
    const response = await fhir(tokenA, projectA.projectId, 'Communication', { method: 'POST', body: JSON.stringify(body) });
    const answered = (await response.json()) as Communication;
    if ((await readAll(context, projectB.projectId)).length !== bCount) return { status: response.status, letThrough: true, note: "a Communication was placed in B's project" };
    if (response.status >= 400) return { status: response.status, letThrough: false };
    // What the store holds, not only what the answer says.
    const stored = await context.host.store.readResource<Communication>('Communication', answered.id ?? '');
    const placed = stored.meta?.project !== projectA.projectId || stored.meta?.author?.reference === 'Practitioner/someone-else';
    return { status: response.status, letThrough: placed, note: placed ? 'server-owned meta taken from the caller' : 'ignored' };
  });
  await log.run(KIND, 'a chat turn cannot be sent as another practitioner', async () => {
    const response = await context.chat(tokenA, { messages: [{ role: 'user', content: 'Who am I?' }], sender: 'Practitioner/someone-else' }, { 'X-Project-ID': projectA.projectId });
    const answer = (await response.json()) as { conversation_id?: string };
    const records = await readAll(context, projectA.projectId);
    const prompt = records.find((record) => record.partOf?.[0]?.reference === `Communication/${answer.conversation_id}` && !record.inResponseTo);
    const spoofed = prompt?.sender?.reference === 'Practitioner/someone-else';
    return { status: response.status, letThrough: spoofed, note: spoofed ? 'sender taken from the body' : undefined };
  });
  await log.run(KIND, "B's records unchanged after all of the above", async (): Promise<AttackOutcome> => {
    const after = JSON.stringify(await readAll(context, projectB.projectId));
    const victimChanges = (await Promise.all(victims.map(([type, id]) => changed(type, id)))).filter((change) => change !== undefined);
    const note = after !== bCommunicationsBefore ? "B's Communications changed" : victimChanges.join('; ') || undefined;
    return { status: 0, letThrough: note !== undefined, note };
  });
}

const GONE = 'gone';

/** The stored current version of a record, read with the store's own rights (all projects), or `gone`. */
async function currentVersion(context: SecurityContext, type: string, id: string): Promise<string> {
  try {
    return JSON.stringify(await context.host.store.readResource(type, id));
  } catch {
    return GONE;
  }
}

async function readAll(context: SecurityContext, projectId: string): Promise<Communication[]> {
  const bundle = await context.host.store.search<Communication>({
    resourceType: 'Communication',
    filters: [{ code: '_project', operator: 'eq', value: projectId }],
    count: 1000,
  });
  return (bundle.entry ?? []).map((entry) => entry.resource as Communication);
}
