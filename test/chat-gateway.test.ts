/**
 * The chat gateway end to end: the official openai SDK talks to a standalone host, the LLM emulator answers,
 * and MedplumClient reads back what was stored, field by field against the spec's Communication table.
 */
import { MedplumClient } from '@medplum/core';
import type { AccessPolicy, Communication, Reference } from '@medplum/fhirtypes';
import OpenAI from 'openai';
import { startLlmEmulator, type LlmEmulator } from './emulator/index.ts';
import { startTestHost, type TestHost } from './support/test-host.ts';
import { waitFor } from './support/wait-for.ts';
import type { SeededProject } from '../plugin/hosts/standalone/seed.ts';
import { DEFAULT_CATEGORY_SYSTEM, EXTENSION } from '../plugin/chat/fhir-vocabulary.ts';
import type { FhirgateCompletion } from './support/chat-clients.ts';

const MODEL = 'openai/gpt-4o-mini';

/** A completion with fhirgate's extra fields. */

describe('chat gateway', () => {
  let emulator: LlmEmulator;
  let host: TestHost;
  let project: SeededProject;
  let openai: OpenAI;
  let medplum: MedplumClient;

  beforeAll(async () => {
    emulator = await startLlmEmulator();
    host = await startTestHost({
      plugin: {
        llm: {
          providers: { openai: { kind: 'openai', apiKey: 'sk-test-provider-key', baseUrl: `${emulator.url}/v1`, models: ['gpt-4o-mini'], retries: { maxRetries: 0 } } },
          // The emulator answers on loopback: cleared for patient data.
          patientDataModels: ['openai/*'],
          defaultModel: MODEL,
        },
      },
    });
  });

  afterAll(async () => {
    await host.close();
    await emulator.close();
  });

  beforeEach(async () => {
    emulator.reset();
    project = await host.seedProject();
    openai = clientFor(await host.accessTokenFor(project.ids['practitioner-membership']), project.projectId);
    medplum = new MedplumClient({ baseUrl: host.url, fetch });
    await medplum.startClientLogin(project.client?.id ?? '', project.client?.secret ?? '');
  });

  function clientFor(token: string, projectId: string | undefined): OpenAI {
    return new OpenAI({
      baseURL: `${host.url}v1`,
      apiKey: token,
      defaultHeaders: projectId ? { 'X-Project-ID': projectId } : {},
      maxRetries: 0,
    });
  }

  async function storedCommunications(): Promise<Communication[]> {
    return medplum.searchResources('Communication', { _count: '1000' }, { cache: 'no-cache' });
  }

  function codeOf(communication: Communication): string | undefined {
    return communication.category?.[0]?.coding?.[0]?.code;
  }

  test('a non-streaming completion is answered and both turns are stored as the spec says', async () => {
    const patientId = project.ids['patient-in-care-team-1'];
    const completion = (await openai.chat.completions.create({
      model: MODEL,
      messages: [
        { role: 'system', content: 'You are a careful clinical assistant.' },
        { role: 'user', content: 'Summarise the last visit.' },
      ],
      // @ts-expect-error fhirgate's extra request field
      patient_id: patientId,
    })) as unknown as FhirgateCompletion;

    expect(completion.id).toMatch(/^chatcmpl-/);
    expect(completion.object).toBe('chat.completion');
    expect(completion.model).toBe(MODEL);
    expect(Number.isInteger(completion.created)).toBe(true);
    expect(completion.choices[0]).toMatchObject({ index: 0, message: { role: 'assistant', content: 'Echo: Summarise the last visit.' }, finish_reason: 'stop' });
    expect(completion.usage?.total_tokens).toBe((completion.usage?.prompt_tokens ?? 0) + (completion.usage?.completion_tokens ?? 0));
    expect(completion.usage?.completion_tokens).toBeGreaterThan(0);

    const reply = await medplum.readResource('Communication', completion.communication_id);
    const prompt = await medplum.readReference(reply.inResponseTo?.[0] as Reference<Communication>);
    const root = await medplum.readResource('Communication', completion.conversation_id);

    expect(prompt).toMatchObject({
      resourceType: 'Communication',
      status: 'completed',
      category: [{ coding: [{ system: DEFAULT_CATEGORY_SYSTEM, code: 'ai-prompt', display: 'AI Prompt' }] }],
      subject: { reference: `Patient/${patientId}` },
      sender: { reference: `Practitioner/${project.ids.practitioner}` },
      payload: [{ contentString: 'Summarise the last visit.' }],
      partOf: [{ reference: `Communication/${root.id}` }],
    });
    expect(prompt.inResponseTo).toBeUndefined();
    expect(reply).toMatchObject({
      status: 'completed',
      category: [{ coding: [{ system: DEFAULT_CATEGORY_SYSTEM, code: 'ai-response', display: 'AI Response' }] }],
      subject: { reference: `Patient/${patientId}` },
      payload: [{ contentString: 'Echo: Summarise the last visit.' }],
      partOf: [{ reference: `Communication/${root.id}` }],
      inResponseTo: [{ reference: `Communication/${prompt.id}` }],
    });
    expect(reply.sender?.reference).toMatch(/^Device\//);
    expect(codeOf(root)).toBe('ai-conversation');
    for (const sent of [prompt.sent, reply.sent]) {
      expect(sent).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/);
    }
    expect(Date.parse(reply.sent ?? '')).toBeGreaterThanOrEqual(Date.parse(prompt.sent ?? ''));
    expect(reply.extension?.find((extension) => extension.url === EXTENSION.model)?.valueString).toBe(MODEL);
    const usage = reply.extension?.find((extension) => extension.url === EXTENSION.usage)?.extension;
    expect(usage?.find((item) => item.url === 'total-tokens')?.valueInteger).toBe(completion.usage?.total_tokens);
    const request = JSON.parse(prompt.extension?.find((extension) => extension.url === EXTENSION.chatRequest)?.valueString ?? '{}');
    expect(request.messages[0]).toEqual({ role: 'system', content: 'You are a careful clinical assistant.' });

    const device = await medplum.readReference(reply.sender as { reference: string });
    expect(device.resourceType).toBe('Device');
    expect(emulator.received).toHaveLength(1);
    // The request's system message, the patient's context (test/patient-context.test.ts), then the question.
    expect(emulator.received[0].messages).toEqual([
      { role: 'system', content: 'You are a careful clinical assistant.' },
      { role: 'system', content: expect.stringMatching(/^The patient's chart follows[^]*"text":"Maria Lopez, female, born 1958-03-14"[^]*<\/patient-chart>$/) },
      { role: 'user', content: 'Summarise the last visit.' },
    ]);
    expect(emulator.received[0].body.max_tokens ?? emulator.received[0].body.max_completion_tokens).toBe(4096);
  });

  test('continuing a conversation sends its history, oldest first, after the system messages', async () => {
    const first = (await openai.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'First question' }] })) as FhirgateCompletion;
    await openai.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Second question' }],
      // @ts-expect-error fhirgate's extra request field
      conversation_id: first.conversation_id,
    });

    expect(emulator.received[1].messages).toEqual([
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'First question' },
      { role: 'assistant', content: 'Echo: First question' },
      { role: 'user', content: 'Second question' },
    ]);
    const stored = await storedCommunications();
    expect(stored.filter((communication) => codeOf(communication) === 'ai-conversation')).toHaveLength(1);
    expect(stored.filter((communication) => communication.partOf?.[0]?.reference === `Communication/${first.conversation_id}`)).toHaveLength(4);
  });

  test('a streamed completion follows the spec framing and is stored after delivery', async () => {
    const stream = await openai.chat.completions.create({
      model: MODEL,
      stream: true,
      stream_options: { include_usage: true },
      messages: [{ role: 'user', content: 'Stream me an answer please' }],
    });
    const chunks: (OpenAI.ChatCompletionChunk & { conversation_id?: string; communication_id?: string })[] = [];
    for await (const chunk of stream) {
      chunks.push(chunk);
    }
    const withChoices = chunks.filter((chunk) => chunk.choices.length > 0);
    expect(new Set(chunks.map((chunk) => chunk.id)).size).toBe(1);
    expect(chunks.every((chunk) => chunk.object === 'chat.completion.chunk')).toBe(true);
    expect(withChoices[0].choices[0].delta.role).toBe('assistant');
    const last = withChoices.at(-1);
    expect(last?.choices[0].delta).toEqual({});
    expect(last?.choices[0].finish_reason).toBe('stop');
    expect(withChoices.slice(0, -1).every((chunk) => chunk.choices[0].finish_reason === null)).toBe(true);
    const text = withChoices.map((chunk) => chunk.choices[0].delta.content ?? '').join('');
    expect(text).toBe('Echo: Stream me an answer please');
    expect(chunks.at(-1)?.usage?.completion_tokens).toBeGreaterThan(0);
    const conversationId = chunks[0].conversation_id;
    expect(chunks.every((chunk) => chunk.conversation_id === conversationId)).toBe(true);

    const reply = await medplum.readResource('Communication', last?.communication_id ?? '');
    expect(reply.status).toBe('completed');
    expect(reply.payload?.[0]?.contentString).toBe(text);
    expect(reply.partOf?.[0]?.reference).toBe(`Communication/${conversationId}`);
  });

  test('a client that leaves mid-stream cancels the provider call and leaves a stopped reply with what it got', async () => {
    emulator.enqueue({ replyTokens: 400, tokensPerSecond: 200 });
    const controller = new AbortController();
    const stream = await openai.chat.completions.create(
      { model: MODEL, stream: true, messages: [{ role: 'user', content: 'Talk for a while' }] },
      { signal: controller.signal }
    );
    let received = '';
    for await (const chunk of stream) {
      received += chunk.choices[0]?.delta.content ?? '';
      if (received.split(' ').length > 5) {
        controller.abort();
        break;
      }
    }

    const reply = await waitFor(async () => (await storedCommunications()).find((communication) => codeOf(communication) === 'ai-response'));
    expect(reply.status).toBe('stopped');
    expect(reply.payload?.[0]?.contentString?.startsWith(received)).toBe(true);
    expect(reply.payload?.[0]?.contentString?.length).toBeLessThan(400 * 5);
    await waitFor(async () => (emulator.received[0].outcome === 'aborted' ? true : undefined));
  });

  test('a provider failure is a 500 upstream_error with the error body, and the reply is stored as not-done', async () => {
    emulator.enqueue({ errorStatus: 500, errorMessage: 'model overloaded' });
    const failure = await openai.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Hello?' }] }).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(OpenAI.APIError);
    expect((failure as InstanceType<typeof OpenAI.APIError>).status).toBe(500);
    expect((failure as InstanceType<typeof OpenAI.APIError>).error).toMatchObject({ type: 'api_error', code: 'upstream_error' });
    expect((failure as InstanceType<typeof OpenAI.APIError>).message).not.toContain('sk-test-provider-key');

    const stored = await storedCommunications();
    const reply = stored.find((communication) => codeOf(communication) === 'ai-response');
    expect(reply?.status).toBe('not-done');
    expect(reply?.statusReason?.text).toBeTruthy();
    expect(stored.filter((communication) => codeOf(communication) === 'ai-prompt')).toHaveLength(1);
  });

  test("another project's conversation is 404 conversation_not_found, and nothing is stored", async () => {
    const other = await host.seedProject();
    const otherClient = clientFor(await host.accessTokenFor(other.ids['practitioner-membership']), other.projectId);
    const foreign = (await otherClient.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'mine' }] })) as FhirgateCompletion;
    emulator.reset();

    const failure = await openai.chat.completions
      // @ts-expect-error fhirgate's extra request field
      .create({ model: MODEL, messages: [{ role: 'user', content: 'theirs' }], conversation_id: foreign.conversation_id })
      .catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(OpenAI.NotFoundError);
    const body = (failure as InstanceType<typeof OpenAI.NotFoundError>).error as { type: string; code: string; message: string };
    expect(body).toMatchObject({ type: 'invalid_request_error', code: 'conversation_not_found' });
    expect(body.message).toContain(foreign.conversation_id);
    expect(await storedCommunications()).toHaveLength(0);
    expect(emulator.received).toHaveLength(0);
  });

  test.each([
    ['a bad token', 401, async () => clientFor('not-a-token', project.projectId), { messages: [{ role: 'user', content: 'hi' }] }],
    ['no X-Project-ID', 401, async () => clientFor(await host.accessTokenFor(project.ids['practitioner-membership']), undefined), { messages: [{ role: 'user', content: 'hi' }] }],
    ['another project in X-Project-ID', 403, async () => clientFor(await host.accessTokenFor(project.ids['practitioner-membership']), 'a1f0c0de-0000-4000-8000-000000000001'), { messages: [{ role: 'user', content: 'hi' }] }],
    ['a patient outside the care team', 403, async () => openai, { messages: [{ role: 'user', content: 'hi' }], patient_id: 'outside' }],
    ['a patient the project does not have', 404, async () => openai, { messages: [{ role: 'user', content: 'hi' }], patient_id: 'a1f0c0de-0000-4000-8000-00000000dead' }],
    ['temperature above 2', 400, async () => openai, { messages: [{ role: 'user', content: 'hi' }], temperature: 2.5 }],
    ['no messages', 400, async () => openai, { messages: [] }],
    ['an unknown role', 400, async () => openai, { messages: [{ role: 'wizard', content: 'hi' }] }],
    ['max_tokens of 0', 400, async () => openai, { messages: [{ role: 'user', content: 'hi' }], max_tokens: 0 }],
    ['an unknown model', 400, async () => openai, { model: 'openai/no-such-model', messages: [{ role: 'user', content: 'hi' }] }],
  ])('%s is rejected with %i, the error body, nothing stored and no provider call', async (_name, status, makeClient, body) => {
    const client = await makeClient();
    const request = { model: MODEL, ...body } as Record<string, unknown>;
    if (request.patient_id === 'outside') {
      request.patient_id = project.ids['patient-outside-care-team'];
    }
    const failure = await client.chat.completions.create(request as never).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(OpenAI.APIError);
    const apiError = failure as InstanceType<typeof OpenAI.APIError>;
    expect(apiError.status).toBe(status);
    expect(apiError.error).toMatchObject({ message: expect.any(String), type: expect.any(String), code: expect.any(String) });
    expect(await storedCommunications()).toHaveLength(0);
    expect(emulator.received).toHaveLength(0);
  });

  test("a caller whose AccessPolicy may read the patient but not write Communications gets 403, and nothing is stored", async () => {
    // The integration client reads Patients and Communications but creates none.
    const integration = clientFor(await host.accessTokenFor(project.ids['client-membership']), project.projectId);
    const request = { model: MODEL, messages: [{ role: 'user', content: 'hi' }], patient_id: project.ids['patient-in-care-team-1'] };

    const failure = await integration.chat.completions.create(request as never).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(OpenAI.PermissionDeniedError);
    expect((failure as InstanceType<typeof OpenAI.APIError>).error).toMatchObject({ type: expect.any(String), code: 'forbidden' });
    expect(await storedCommunications()).toHaveLength(0);
    expect(emulator.received).toHaveLength(0);
  });

  test('a caller whose AccessPolicy grants no Patient access at all gets 403 for patient_id, and nothing is stored', async () => {
    const policy = await host.store.readResource<AccessPolicy>('AccessPolicy', project.ids['policy-integration']);
    await host.store.updateResource<AccessPolicy>({ ...policy, resource: [{ resourceType: 'Communication' }] });
    const integration = clientFor(await host.accessTokenFor(project.ids['client-membership']), project.projectId);
    const request = { model: MODEL, messages: [{ role: 'user', content: 'hi' }], patient_id: project.ids['patient-in-care-team-1'] };

    const failure = await integration.chat.completions.create(request as never).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(OpenAI.PermissionDeniedError);
    expect((failure as InstanceType<typeof OpenAI.APIError>).error).toMatchObject({ code: 'forbidden', type: 'permission_error' });
    expect(await storedCommunications()).toHaveLength(0);
    expect(emulator.received).toHaveLength(0);
  });

  test('a new conversation is written whole or not at all: a policy that allows the root but not the prompt stores neither', async () => {
    const policy = await host.store.readResource<AccessPolicy>('AccessPolicy', project.ids['policy-integration']);
    await host.store.updateResource<AccessPolicy>({
      ...policy,
      resource: [
        { resourceType: 'Patient', readonly: true },
        { resourceType: 'Communication', criteria: `Communication?category=${DEFAULT_CATEGORY_SYSTEM}|ai-conversation` },
      ],
    });
    const integration = clientFor(await host.accessTokenFor(project.ids['client-membership']), project.projectId);

    const failure = await integration.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'hi' }] }).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(OpenAI.PermissionDeniedError);
    expect(await storedCommunications()).toHaveLength(0);
    expect(emulator.received).toHaveLength(0);
  });

  test('malformed JSON is a 400 with the error body', async () => {
    const token = await host.accessTokenFor(project.ids['practitioner-membership']);
    const response = await fetch(`${host.url}v1/chat/completions`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${token}`, 'X-Project-ID': project.projectId, 'Content-Type': 'application/json' },
      body: '{"messages": [',
    });
    expect(response.status).toBe(400);
    expect(((await response.json()) as { error: { type: string } }).error.type).toBe('invalid_request_error');
  });

  test('extra OpenAI fields (top_p, stop, seed, user) reach the provider as sent', async () => {
    await openai.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'Hello' }],
      top_p: 0.9,
      stop: ['\n\n'],
      seed: 42,
      user: 'clinician-7',
    });
    expect(emulator.received[0].body).toMatchObject({ top_p: 0.9, stop: ['\n\n'], seed: 42, user: 'clinician-7' });
  });

  test('GET /v1/models lists the configured models in provider/model form', async () => {
    const models = await openai.models.list();
    expect(models.data.map((model) => model.id)).toEqual([MODEL]);
    expect(models.data[0]).toMatchObject({ object: 'model', owned_by: 'fhirgate' });
  });
});
