/**
 * ClientApplication API keys (`<client id>:<secret>` as the bearer token, or Basic auth): every key that is not a
 * client's current secret, or a client's key used for another project, is refused (401, or 403 for another
 * project's base URL or header) with nothing stored and no provider call. A good key then proves the suite's keys
 * are not refused for some other reason.
 */
import type { ClientApplication, ProjectMembership } from '@medplum/fhirtypes';
import type { SecurityContext } from './context.ts';
import { refused } from './suite.ts';

const KIND = 'client keys';

export async function clientKeyAttacks(context: SecurityContext): Promise<void> {
  const { log, host, projectA, projectB } = context;
  const clientA = projectA.client;
  const clientB = projectB.client;
  if (!clientA || !clientB) {
    throw new Error('the suite needs a ClientApplication in each project');
  }
  // A's client, given a membership that may chat (the fixture's integration policy may not write a prompt), so that
  // a refusal below is the key's, not the policy's.
  const membershipA = await host.store.readResource<ProjectMembership>('ProjectMembership', projectA.ids['client-membership']);
  await host.store.updateResource<ProjectMembership>({ ...membershipA, accessPolicy: undefined, access: undefined, admin: false });
  const offClient = await host.store.createResource<ClientApplication>({ resourceType: 'ClientApplication', meta: { project: projectA.projectId }, name: 'switched off', secret: 'a-secret-of-a-client-switched-off', status: 'off' });
  await host.store.createResource<ProjectMembership>({
    resourceType: 'ProjectMembership',
    meta: { project: projectA.projectId },
    project: { reference: `Project/${projectA.projectId}` },
    user: { reference: `ClientApplication/${offClient.id}` },
    profile: { reference: `ClientApplication/${offClient.id}` },
  });
  const orphan = await host.store.createResource<ClientApplication>({ resourceType: 'ClientApplication', meta: { project: projectA.projectId }, name: 'no membership', secret: 'a-secret-of-a-client-without-membership' });
  const basic = (text: string): string => `Basic ${Buffer.from(text).toString('base64')}`;
  const flip = (text: string): string => text.slice(0, -1) + (text.endsWith('a') ? 'b' : 'a');
  const projectBase = (projectId: string): string => `${host.url}projects/${projectId}/v1/chat/completions`;

  const attempts: [string, string, string, readonly number[], Record<string, string>?][] = [
    ['a wrong secret', `Bearer ${clientA.id}:${flip(clientA.secret)}`, projectBase(projectA.projectId), [401]],
    ['the secret without its last character', `Bearer ${clientA.id}:${clientA.secret.slice(0, -1)}`, projectBase(projectA.projectId), [401]],
    ['the secret with a character more', `Bearer ${clientA.id}:${clientA.secret}x`, projectBase(projectA.projectId), [401]],
    ['the secret in upper case', `Bearer ${clientA.id}:${clientA.secret.toUpperCase()}`, projectBase(projectA.projectId), [401]],
    ["another client's secret", `Bearer ${clientA.id}:${clientB.secret}`, projectBase(projectA.projectId), [401]],
    ['an unknown client id', `Bearer 00000000-0000-4000-8000-000000000000:${clientA.secret}`, projectBase(projectA.projectId), [401]],
    ['a client id naming another resource type', `Bearer ../Project/${projectA.projectId}:${clientA.secret}`, projectBase(projectA.projectId), [401]],
    ['a client id with SQL', `Bearer x'OR'1'='1:${clientA.secret}`, projectBase(projectA.projectId), [401]],
    ['a 16 KB secret', `Bearer ${clientA.id}:${'x'.repeat(16 * 1024)}`, projectBase(projectA.projectId), [401, 431]],
    ['an empty secret', `Bearer ${clientA.id}:`, projectBase(projectA.projectId), [401]],
    ['a client switched off', `Bearer ${offClient.id}:${offClient.secret}`, projectBase(projectA.projectId), [401]],
    ['a client without a membership', `Bearer ${orphan.id}:${orphan.secret}`, projectBase(projectA.projectId), [401]],
    ['Basic auth with a wrong secret', basic(`${clientA.id}:${flip(clientA.secret)}`), projectBase(projectA.projectId), [401]],
    ['Basic auth without a colon', basic(`${clientA.id}${clientA.secret}`), projectBase(projectA.projectId), [401]],
    ["project B's key under project A's base URL", `Bearer ${clientB.id}:${clientB.secret}`, projectBase(projectA.projectId), [401, 403]],
    ["project A's key naming project B in X-Project-ID", `Bearer ${clientA.id}:${clientA.secret}`, `${host.url}v1/chat/completions`, [403], { 'X-Project-ID': projectB.projectId }],
    ["project A's key under its base URL naming project B in X-Project-ID", `Bearer ${clientA.id}:${clientA.secret}`, projectBase(projectA.projectId), [403], { 'X-Project-ID': projectB.projectId }],
    ["project A's key on /v1 without X-Project-ID", `Bearer ${clientA.id}:${clientA.secret}`, `${host.url}v1/chat/completions`, [401]],
  ];
  const send = (authorization: string, url: string, headers: Record<string, string> = {}): Promise<Response> =>
    fetch(url, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Authorization: authorization, ...headers },
      body: JSON.stringify({ messages: [{ role: 'user', content: 'Let me in.' }] }),
    });

  for (const [name, authorization, url, expected, headers] of attempts) {
    await log.run(KIND, name, async () => {
      const storedBefore = await context.storedCommunications();
      const callsBefore = context.providerCalls();
      const response = await send(authorization, url, headers);
      await response.arrayBuffer();
      const stored = (await context.storedCommunications()) !== storedBefore;
      const called = context.providerCalls() !== callsBefore;
      return refused(response.status, expected, stored ? 'a Communication was stored' : called ? 'the provider was called' : undefined);
    });
  }
  // The control: the same key, right, is let in (so the refusals above are the key's).
  await log.run(KIND, 'exactly the current secret (accepted)', async () => {
    const response = await send(`Bearer ${clientA.id}:${clientA.secret}`, projectBase(projectA.projectId));
    await response.arrayBuffer();
    return { status: response.status, letThrough: response.status !== 200, note: response.status === 200 ? undefined : 'the right key was refused' };
  });
}
