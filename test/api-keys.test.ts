/**
 * The project base URL and ClientApplication API keys, with the real openai SDK against the standalone host. A
 * tool configured with a base URL and one fixed key (`<client id>:<secret>`) chats as that ClientApplication,
 * under its membership's AccessPolicy, without any custom header; the key is checked on every request, so a
 * rotated secret, a client switched off or a membership made inactive stops it at the next request. `/v1` keeps the
 * spec's contract: X-Project-ID is required there.
 */
import type { AccessPolicy, AuditEvent, ClientApplication, Communication, ProjectMembership } from '@medplum/fhirtypes';
import { Operator } from '@medplum/core';
import OpenAI from 'openai';
import type { SeededProject } from '../plugin/hosts/standalone/seed.ts';
import type { HostLogger } from '../plugin/host.ts';
import { CHAT_MODEL, startChatHost, type ChatHost } from './support/chat-host.ts';
import { projectAdministrator } from './support/project-administrator.ts';
import type { FhirgateCompletion } from './support/chat-clients.ts';

const logged: string[] = [];
const logger: HostLogger = {
  debug: (message, data) => logged.push(JSON.stringify({ message, data })),
  info: (message, data) => logged.push(JSON.stringify({ message, data })),
  warn: (message, data) => logged.push(JSON.stringify({ message, data })),
  error: (message, data) => logged.push(JSON.stringify({ message, data })),
};

/** An AccessPolicy an administrator gives a chat tool's key: its own conversations without patient data. */
const CHAT_KEY_POLICY: AccessPolicy = {
  resourceType: 'AccessPolicy',
  name: 'Chat tool key: conversations without patient data',
  resource: [
    { resourceType: 'Communication', criteria: 'Communication?subject:missing=true', interaction: ['create', 'read', 'search'] },
    { resourceType: 'Device', readonly: true },
  ],
};

describe('a project base URL and a ClientApplication API key', () => {
  let chatHost: ChatHost;
  let project: SeededProject;
  let client: ClientApplication & { id: string };
  let membership: ProjectMembership & { id: string };
  let key: string;

  beforeAll(async () => {
    chatHost = await startChatHost({ host: { logger } });
  });
  afterAll(() => chatHost.close());
  beforeEach(async () => {
    chatHost.emulator.reset();
    project = await chatHost.host.seedProject();
    const { store } = chatHost.host;
    const policy = await store.createResource<AccessPolicy>({ ...CHAT_KEY_POLICY, meta: { project: project.projectId } });
    client = await store.createResource<ClientApplication>({
      resourceType: 'ClientApplication',
      meta: { project: project.projectId },
      name: 'Open WebUI – Dr. Lee',
      secret: 'b3c1f0a9d8e7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d9c8b7a6f5e4d3c2b1',
    });
    membership = await store.createResource<ProjectMembership>({
      resourceType: 'ProjectMembership',
      meta: { project: project.projectId },
      project: { reference: `Project/${project.projectId}` },
      user: { reference: `ClientApplication/${client.id}` },
      profile: { reference: `ClientApplication/${client.id}`, display: client.name },
      accessPolicy: { reference: `AccessPolicy/${policy.id}` },
    });
    key = `${client.id}:${client.secret}`;
  });

  const projectBaseUrl = (projectId = project.projectId): string => `${chatHost.host.url}projects/${projectId}/v1`;
  const openai = (apiKey: string, baseURL = projectBaseUrl(), headers: Record<string, string> = {}): OpenAI => new OpenAI({ baseURL, apiKey, defaultHeaders: headers, maxRetries: 0 });
  const failure = (promise: Promise<unknown>): Promise<unknown> => promise.then(() => undefined, (error: unknown) => error);
  const communications = async (): Promise<Communication[]> =>
    (await chatHost.host.standalone.host.getSystemRepo(project.projectId)).searchResources<Communication>({ resourceType: 'Communication', count: 1000 });

  test('a key as the apiKey, on the project base URL: the turn is the ClientApplication’s, stored under its AccessPolicy, no header needed', async () => {
    const completion = (await openai(key).chat.completions.create({ model: CHAT_MODEL, messages: [{ role: 'user', content: 'Draft a reminder letter.' }] })) as unknown as FhirgateCompletion;
    expect(completion.choices[0].message.content).toBe('Echo: Draft a reminder letter.');

    const records = await communications();
    const prompt = records.find((record) => record.category?.[0]?.coding?.[0]?.code === 'ai-prompt');
    const caller = `ClientApplication/${client.id}`;
    expect(prompt?.meta?.author).toMatchObject({ reference: caller });
    expect(prompt?.sender).toMatchObject({ identifier: { value: caller } });
    const reply = records.find((record) => record.id === completion.communication_id);
    expect(reply?.recipient).toEqual([expect.objectContaining({ identifier: expect.objectContaining({ value: caller }) })]);
    // The model list under the same base URL.
    expect((await openai(key).models.list()).data.map((model) => model.id)).toContain(CHAT_MODEL);
    // Never in a log line, at any level.
    expect(logged.join('\n')).not.toContain(client.secret ?? '');
  });

  test('the AccessPolicy of the key’s membership applies: a key whose policy may not write a prompt is refused 403, nothing stored', async () => {
    // The fixture's integration client reads the AI trail but never writes it.
    const integration = `${project.client?.id}:${project.client?.secret}`;
    const refused = await failure(openai(integration).chat.completions.create({ model: CHAT_MODEL, messages: [{ role: 'user', content: 'hello' }] }));
    expect(refused).toMatchObject({ status: 403 });
    expect(await communications()).toEqual([]);
    expect(chatHost.emulator.received).toHaveLength(0);
  });

  test('a rotated secret, a client switched off, an inactive membership: 401 at the very next request, nothing stored', async () => {
    const { store } = chatHost.host;
    const ask = (): Promise<unknown> => failure(openai(key).chat.completions.create({ model: CHAT_MODEL, messages: [{ role: 'user', content: 'again' }] }));
    await openai(key).models.list();

    await store.updateResource<ClientApplication>({ ...client, secret: 'a-new-secret-the-tool-does-not-have' });
    expect(await ask()).toMatchObject({ status: 401, code: 'unauthenticated' });
    await store.updateResource<ClientApplication>({ ...(await store.readResource<ClientApplication>('ClientApplication', client.id)), secret: client.secret });
    await openai(key).models.list();

    await store.updateResource<ClientApplication>({ ...(await store.readResource<ClientApplication>('ClientApplication', client.id)), status: 'off' });
    expect(await ask()).toMatchObject({ status: 401 });
    await store.updateResource<ClientApplication>({ ...(await store.readResource<ClientApplication>('ClientApplication', client.id)), status: 'active' });
    await openai(key).models.list();

    await store.updateResource<ProjectMembership>({ ...membership, active: false });
    expect(await ask()).toMatchObject({ status: 401 });
    expect(await communications()).toEqual([]);
  });

  test('a wrong secret, an unknown client, a malformed key: 401 with the spec’s error body', async () => {
    for (const wrong of [`${client.id}:not-the-secret`, '00000000-0000-4000-8000-000000000000:whatever', `${client.id}:`, ':secret']) {
      const refused = await failure(openai(wrong).models.list());
      expect(refused).toMatchObject({ status: 401, code: 'unauthenticated', type: 'authentication_error' });
    }
  });

  test('the project base URL: a header naming another project is 403; another project’s base URL is 403; /v1 still requires X-Project-ID', async () => {
    const other = await chatHost.host.seedProject();
    const token = await chatHost.host.accessTokenFor(project.ids['practitioner-membership']);

    expect((await openai(token).models.list()).data.length).toBeGreaterThan(0);
    expect((await openai(token, projectBaseUrl(), { 'X-Project-ID': project.projectId }).models.list()).data.length).toBeGreaterThan(0);
    expect(await failure(openai(token, projectBaseUrl(), { 'X-Project-ID': other.projectId }).models.list())).toMatchObject({ status: 403, code: 'forbidden' });
    expect(await failure(openai(token, projectBaseUrl(other.projectId)).models.list())).toMatchObject({ status: 403, code: 'forbidden' });
    expect(await failure(openai(key, projectBaseUrl(other.projectId)).chat.completions.create({ model: CHAT_MODEL, messages: [{ role: 'user', content: 'hi' }] }))).toMatchObject({ status: 403 });
    expect(await failure(openai(token, `${chatHost.host.url}v1`).models.list())).toMatchObject({ status: 401, message: '401 Missing X-Project-ID header.' });
    expect(await failure(openai(key, `${chatHost.host.url}v1`).models.list())).toMatchObject({ status: 401 });
    expect(await communications()).toEqual([]);
  });

  test('every /v1 route answers the same under the project base URL: the Responses API, a stored response, an unknown route, the description', async () => {
    const response = await openai(key).responses.create({ model: CHAT_MODEL, input: 'A short note, please.' });
    expect(response.output_text).toBe('Echo: A short note, please.');
    expect((await openai(key).responses.retrieve(response.id)).id).toBe(response.id);
    const missing = await fetch(`${projectBaseUrl()}/embeddings`, { method: 'POST', headers: { Authorization: `Bearer ${key}` } });
    expect(missing.status).toBe(404);
    expect(await missing.json()).toMatchObject({ error: { code: 'not_found', message: `No route for POST /projects/${project.projectId}/v1/embeddings.` } });
    const description = await fetch(`${projectBaseUrl()}/openapi.json`);
    expect(description.status).toBe(200);
    // An AuditEvent of the turn names the key's client as its agent where fhirgate records one.
    const audits = await (await chatHost.host.standalone.host.getSystemRepo(project.projectId)).searchResources<AuditEvent>({ resourceType: 'AuditEvent' });
    for (const audit of audits) {
      expect(JSON.stringify(audit.agent)).toContain(`ClientApplication/${client.id}`);
    }
  });

  test("an administrator makes a key with Medplum's POST /admin/projects/:id/client (name and AccessPolicy), and the key chats at once", async () => {
    const admin = await projectAdministrator(chatHost.host, project);
    const policy = await admin.createResource<AccessPolicy>(CHAT_KEY_POLICY);
    const made = (await admin.post(admin.fhirUrl().toString().replace('fhir/R4/', `admin/projects/${project.projectId}/client`), {
      name: 'Zed editor – radiology team',
      accessPolicy: { reference: `AccessPolicy/${policy.id}` },
    })) as ClientApplication & { id: string; secret: string };
    expect(made.secret).toMatch(/^[0-9a-f]{64}$/);
    const answer = await openai(`${made.id}:${made.secret}`).chat.completions.create({ model: CHAT_MODEL, messages: [{ role: 'user', content: 'Hello from the editor.' }] });
    expect(answer.choices[0].message.content).toBe('Echo: Hello from the editor.');
    const [membership] = await chatHost.host.store.searchResources<ProjectMembership>({ resourceType: 'ProjectMembership', filters: [{ code: 'profile', operator: Operator.EQUALS, value: `ClientApplication/${made.id}` }] });
    expect(membership?.accessPolicy?.reference).toBe(`AccessPolicy/${policy.id}`);

    // Another project's policy: refused by name, nothing made.
    const other = await chatHost.host.seedProject();
    const foreign = await chatHost.host.store.createResource<AccessPolicy>({ ...CHAT_KEY_POLICY, meta: { project: other.projectId } });
    const clientsBefore = (await chatHost.host.store.searchResources<ClientApplication>({ resourceType: 'ClientApplication' })).length;
    await expect(
      admin.post(admin.fhirUrl().toString().replace('fhir/R4/', `admin/projects/${project.projectId}/client`), { name: 'x', accessPolicy: { reference: `AccessPolicy/${foreign.id}` } })
    ).rejects.toMatchObject({ outcome: { issue: [expect.objectContaining({ expression: ['accessPolicy'] })] } });
    expect((await chatHost.host.store.searchResources<ClientApplication>({ resourceType: 'ClientApplication' })).length).toBe(clientsBefore);
  });
});
