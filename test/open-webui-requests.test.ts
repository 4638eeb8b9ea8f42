/**
 * Open WebUI against fhirgate, on the project base URL (`/projects/{project_id}/v1`), which is what its OpenAI
 * connection is given: it cannot send `X-Project-ID` when it lists models. Open WebUI (a Python app) is not run
 * here; its backend's requests are replayed as its code builds them (backend/open_webui/routers/openai.py:
 * `get_headers_and_cookies`, `send_get_request`, `generate_chat_completion`; routers/tasks.py: `generate_title`),
 * with `ENABLE_FORWARD_USER_INFO_HEADERS` on, so its `X-OpenWebUI-*` headers come along:
 * - `auth_type: "system_oauth"`: the bearer token is the access token of the user's OAuth session, here a Medplum
 *   access token of the signed-in practitioner;
 * - `auth_type: "bearer"`: the connection's fixed key, here a ClientApplication's `<client id>:<secret>`.
 */
import { MedplumClient } from '@medplum/core';
import type { AccessPolicy, ClientApplication, Communication, ProjectMembership } from '@medplum/fhirtypes';
import { CALLER_IDENTIFIER_SYSTEM } from '../plugin/chat/caller-reference.ts';
import type { SeededProject } from '../plugin/hosts/standalone/seed.ts';
import { CHAT_MODEL, startChatHost, type ChatHost } from './support/chat-host.ts';
import { projectAdministrator } from './support/project-administrator.ts';

/** The headers `get_headers_and_cookies` builds: JSON, the user's `X-OpenWebUI-*` headers, the chat's id, the bearer. */
function openWebUiHeaders(bearer: string, chatId?: string): Record<string, string> {
  return {
    'Content-Type': 'application/json',
    'X-OpenWebUI-User-Name': 'Alice Carter',
    'X-OpenWebUI-User-Id': '3f9d2c1e-open-webui-user',
    'X-OpenWebUI-User-Email': 'alice.carter@example.org',
    'X-OpenWebUI-User-Role': 'user',
    ...(chatId ? { 'X-OpenWebUI-Chat-Id': chatId } : {}),
    Authorization: `Bearer ${bearer}`,
  };
}

/** Open WebUI's default title task (`DEFAULT_TITLE_GENERATION_PROMPT_TEMPLATE`, shortened): the last two messages as `ROLE: text`. */
const titleTask = (history: string): string =>
  ['### Task:', 'Generate a concise, 3-5 word title with an emoji summarizing the chat history.', '### Output:', 'JSON format: { "title": "your concise title here" }', '### Chat History:', '<chat_history>', history, '</chat_history>'].join('\n');

/** What Open WebUI's connection sends, on one base URL with one bearer. */
function openWebUiConnection(baseUrl: string, bearer: string) {
  return {
    /** `GET {url}/models`, as the connection check and the per-connection model list send it. */
    listModels: (): Promise<Response> => fetch(`${baseUrl}/models`, { headers: openWebUiHeaders(bearer) }),
    /** A chat turn: the body `generate_chat_completion` posts once the chat's own fields are moved to its metadata. */
    streamTurn: async (messages: readonly { role: string; content: string }[]): Promise<{ status: number; text: string; conversationId: string | null }> => {
      const response = await fetch(`${baseUrl}/chat/completions`, {
        method: 'POST',
        headers: openWebUiHeaders(bearer, 'b7e1c0a2-open-webui-chat'),
        body: JSON.stringify({ model: CHAT_MODEL, messages, stream: true, stream_options: { include_usage: true } }),
      });
      const body = await response.text();
      const text = body
        .split('\n')
        .filter((line) => line.startsWith('data: ') && line !== 'data: [DONE]')
        .map((line) => JSON.parse(line.slice('data: '.length)) as { choices: { delta?: { content?: string | null } }[] })
        .map((chunk) => chunk.choices[0]?.delta?.content ?? '')
        .join('');
      return { status: response.status, text, conversationId: response.headers.get('x-conversation-id') };
    },
    /** The title task `generate_title` sends after the first reply (`metadata` is removed before it is posted). */
    title: (history: string): Promise<Response> =>
      fetch(`${baseUrl}/chat/completions`, {
        method: 'POST',
        headers: openWebUiHeaders(bearer),
        body: JSON.stringify({ model: CHAT_MODEL, messages: [{ role: 'user', content: titleTask(history) }], stream: false, max_completion_tokens: 1000 }),
      }),
  };
}

describe("Open WebUI's requests, replayed on the project base URL", () => {
  let chat: ChatHost;

  beforeAll(async () => {
    chat = await startChatHost();
  });

  afterAll(async () => {
    await chat.close();
  });

  const baseUrlOf = (project: SeededProject): string => `${chat.host.url}projects/${project.projectId}/v1`;
  const keyOf = (project: SeededProject): string => `${project.client?.id}:${project.client?.secret}`;
  /** The project's records, read as its integration client reads them. */
  const reader = async (project: SeededProject): Promise<MedplumClient> => {
    const medplum = new MedplumClient({ baseUrl: chat.host.url, fetch });
    await medplum.startClientLogin(project.client?.id ?? '', project.client?.secret ?? '');
    return medplum;
  };
  const codesOf = (record: Communication): string[] => (record.category ?? []).flatMap((concept) => concept.coding?.map((coding) => coding.code ?? '') ?? []);
  /** The conversation's prompts and replies, in order. */
  const turnsOf = async (medplum: MedplumClient, conversationId: string | null): Promise<Communication[]> =>
    medplum.searchResources('Communication', { 'part-of': `Communication/${conversationId}`, _sort: 'sent' }, { cache: 'no-cache' });

  /**
   * The ClientApplication's membership gets an AccessPolicy of its own, as an administrator gives a tool's key one:
   * it may start conversations and read them, nothing of any patient.
   */
  async function givePolicyToKey(project: SeededProject): Promise<void> {
    const policy = await chat.host.store.createResource<AccessPolicy>({
      resourceType: 'AccessPolicy',
      meta: { project: project.projectId },
      name: 'Open WebUI key: conversations without a patient',
      resource: [
        { resourceType: 'Communication', criteria: 'Communication?subject:missing=true', interaction: ['read', 'vread', 'search', 'history'] },
        { resourceType: 'Communication', criteria: 'Communication?subject:missing=true&category=ai-prompt', interaction: ['create'] },
      ],
    });
    const membership = await chat.host.store.readResource<ProjectMembership>('ProjectMembership', project.ids['client-membership']);
    await chat.host.store.updateResource<ProjectMembership>({ ...membership, accessPolicy: { reference: `AccessPolicy/${policy.id}` } });
  }

  /** Lists the models, streams a turn and sends the title task; returns the conversation's records. */
  async function chatAsOpenWebUi(project: SeededProject, bearer: string): Promise<Communication[]> {
    const connection = openWebUiConnection(baseUrlOf(project), bearer);
    const models = await connection.listModels();
    expect(models.status).toBe(200);
    expect(((await models.json()) as { data: { id: string }[] }).data.map((model) => model.id)).toContain(CHAT_MODEL);

    const turn = await connection.streamTurn([{ role: 'user', content: 'Remember 7.' }]);
    expect(turn).toMatchObject({ status: 200, text: 'Echo: Remember 7.' });
    const title = await connection.title('USER: Remember 7.\nASSISTANT: Echo: Remember 7.');
    expect(title.status).toBe(200);
    expect(((await title.json()) as { conversation_id: string }).conversation_id).toBe(turn.conversationId);

    const records = await turnsOf(await reader(project), turn.conversationId);
    expect(records.map((record) => codesOf(record).join(' '))).toEqual(['ai-prompt', 'ai-response', 'ai-prompt ai-side-request', 'ai-response ai-side-request']);
    return records;
  }

  test("system_oauth: the user's Medplum access token lists the models, chats, and the turn and its title task are that user's", async () => {
    const project = await chat.host.seedProject();
    const token = await chat.host.accessTokenFor(project.ids['practitioner-membership']);

    const [prompt, reply, titlePrompt] = await chatAsOpenWebUi(project, token);

    const practitioner = `Practitioner/${project.ids['practitioner']}`;
    expect(prompt.sender?.reference).toBe(practitioner);
    expect(prompt.meta?.author?.reference).toBe(practitioner);
    expect(reply.recipient?.map((recipient) => recipient.reference)).toEqual([practitioner]);
    expect(titlePrompt.sender?.reference).toBe(practitioner);
  });

  test("bearer with a ClientApplication's key: the turn is the ClientApplication's; a changed secret stops the old key at its next request", async () => {
    const project = await chat.host.seedProject();
    await givePolicyToKey(project);
    const key = keyOf(project);

    const [prompt, reply, titlePrompt] = await chatAsOpenWebUi(project, key);

    const client = `ClientApplication/${project.client?.id}`;
    const party = { identifier: { system: CALLER_IDENTIFIER_SYSTEM, value: client }, display: client };
    expect(prompt.sender).toEqual(party);
    expect(prompt.meta?.author?.reference).toBe(client);
    expect(reply.recipient).toEqual([party]);
    expect(titlePrompt.sender).toEqual(party);
    // The usage report, grouped by user, names the client.
    const admin = await projectAdministrator(chat.host, project);
    const usage = await fetch(`${chat.host.url}v1/usage?group_by=user`, { headers: { Authorization: `Bearer ${admin.getAccessToken()}`, 'X-Project-ID': project.projectId } });
    expect(((await usage.json()) as { data: { user: string }[] }).data.map((row) => row.user)).toEqual([client]);

    // The administrator rotates the secret: the old key is refused at once, nothing cached; the new one works.
    const application = await chat.host.store.readResource<ClientApplication>('ClientApplication', project.client?.id ?? '');
    await chat.host.store.updateResource<ClientApplication>({ ...application, secret: 'rotated-secret-0123456789abcdef0123456789abcdef' });
    const refused = await openWebUiConnection(baseUrlOf(project), key).listModels();
    expect(refused.status).toBe(401);
    expect(await refused.json()).toMatchObject({ error: { code: 'unauthenticated' } });
    const turn = await openWebUiConnection(baseUrlOf(project), key).streamTurn([{ role: 'user', content: 'Still there?' }]);
    expect(turn.status).toBe(401);
    const rotated = await openWebUiConnection(baseUrlOf(project), `${project.client?.id}:rotated-secret-0123456789abcdef0123456789abcdef`).listModels();
    expect(rotated.status).toBe(200);
  });

  test("the base URL names the project: another project's header, or a credential of another project, is 403; /v1 without X-Project-ID is 401", async () => {
    const project = await chat.host.seedProject();
    const other = await chat.host.seedProject();
    await givePolicyToKey(project);
    const token = await chat.host.accessTokenFor(project.ids['practitioner-membership']);

    const otherHeader = await fetch(`${baseUrlOf(project)}/models`, { headers: { ...openWebUiHeaders(token), 'X-Project-ID': other.projectId } });
    expect(otherHeader.status).toBe(403);
    expect(await otherHeader.json()).toMatchObject({ error: { code: 'forbidden' } });
    // The header that names the same project is allowed.
    expect((await fetch(`${baseUrlOf(project)}/models`, { headers: { ...openWebUiHeaders(token), 'X-Project-ID': project.projectId } })).status).toBe(200);

    for (const bearer of [token, keyOf(project)]) {
      const otherPath = openWebUiConnection(baseUrlOf(other), bearer);
      const models = await otherPath.listModels();
      expect(models.status).toBe(403);
      expect(await models.json()).toMatchObject({ error: { code: 'forbidden' } });
      expect((await otherPath.streamTurn([{ role: 'user', content: 'Hello' }])).status).toBe(403);
    }
    expect(await (await reader(other)).searchResources('Communication', {}, { cache: 'no-cache' })).toHaveLength(0);

    // `/v1` keeps the spec's contract: X-Project-ID is required.
    for (const bearer of [token, keyOf(project)]) {
      const plain = await fetch(`${chat.host.url}v1/models`, { headers: openWebUiHeaders(bearer) });
      expect(plain.status).toBe(401);
      expect(await plain.json()).toMatchObject({ error: { code: 'unauthenticated' } });
    }
  });
});
