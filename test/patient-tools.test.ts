/**
 * FHIR tools: a turn about a patient with `patient_context: "tools"` gives the model `search_patient_records` and
 * `read_record`; fhirgate runs the model's calls with the caller's permissions, restricted to the patient, audits
 * each disclosure before the model sees it, and streams the final answer. The emulator plays a model that calls
 * the tools (one step per round) and keeps what it was given; the records are read with MedplumClient.
 */
import type { MedplumClient } from '@medplum/core';
import type { FhirRepository } from '@medplum/fhir-router';
import type { AuditEvent, Communication, Observation } from '@medplum/fhirtypes';
import OpenAI from 'openai';
import { EXTENSION } from '../plugin/chat/fhir-vocabulary.ts';
import type { SeededProject } from '../plugin/hosts/standalone/seed.ts';
import { chatClients, type FhirgateCompletion } from './support/chat-clients.ts';
import { CHAT_MODEL, OTHER_PROVIDERS, startChatHost, type ChatHost } from './support/chat-host.ts';
import { seedChart, type SeededChart } from './support/seeded-chart.ts';

/** A user message that makes the emulated model search the patient's heart rates, then read the condition, then answer. */
function askWithLookups(chart: SeededChart): string {
  const steps = [
    [{ name: 'search_patient_records', arguments: { resource_type: 'Observation', params: { code: 'http://loinc.org|8867-4', _sort: '-date' } } }],
    [{ name: 'read_record', arguments: { reference: `Condition/${chart.condition.id}` } }],
  ];
  return `How is the blood pressure treatment going? [emulator-behaviour ${JSON.stringify({ toolCalls: steps })}]`;
}

describe('FHIR tools', () => {
  let chatHost: ChatHost;
  let project: SeededProject;
  let openai: OpenAI;
  let medplum: MedplumClient;
  let system: FhirRepository;
  let chart: SeededChart;
  let patientId: string;

  beforeAll(async () => {
    chatHost = await startChatHost({ withProviders: ['anthropic', 'ollama'] });
  });
  afterAll(() => chatHost.close());
  beforeEach(async () => {
    chatHost.emulator.reset();
    ({ project, openai, medplum } = await chatClients(chatHost.host));
    system = await chatHost.host.standalone.host.getSystemRepo(project.projectId);
    chart = await seedChart(system, project);
    patientId = project.ids['patient-in-care-team-1'];
  });

  const ask = (body: Record<string, unknown>): Promise<FhirgateCompletion> =>
    openai.chat.completions.create({ model: CHAT_MODEL, ...body } as never) as unknown as Promise<FhirgateCompletion>;
  const auditsOf = (replyId: string): Promise<AuditEvent[]> => medplum.searchResources('AuditEvent', { entity: `Communication/${replyId}`, _sort: 'date' }, { cache: 'no-cache' });

  test("the model's calls run under the caller's policy, restricted to the patient; the answer streams; every disclosure is on record", async () => {
    const body = { model: CHAT_MODEL, stream: true, messages: [{ role: 'user', content: askWithLookups(chart) }], patient_id: patientId, patient_context: 'tools' };
    const stream = (await openai.chat.completions.create(body as never)) as unknown as AsyncIterable<OpenAI.ChatCompletionChunk & { communication_id?: string }>;
    let text = '';
    let replyId = '';
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta?.content ?? '';
      expect(chunk.choices[0]?.delta?.tool_calls).toBeUndefined();
      replyId ||= chunk.communication_id ?? '';
    }
    expect(text).toMatch(/^Echo: How is the blood pressure treatment going\?/);

    // Three steps: the tools offered each time, the calls and their results handed back in order.
    const steps = chatHost.emulator.received;
    expect(steps).toHaveLength(3);
    expect(steps[0].tools?.map((tool) => tool.name)).toEqual(['search_patient_records', 'read_record']);
    expect(steps[0].tools?.[0].parameters).toMatchObject({ properties: { resource_type: { enum: ['Condition', 'MedicationRequest', 'MedicationStatement', 'AllergyIntolerance', 'Observation'] } } });
    // No summary in this mode: nothing of the chart before the model asks.
    expect(steps[0].messages.filter((message) => message.role === 'system')).toHaveLength(0);
    const searchResult = JSON.parse(steps[1].messages.at(-1)?.content ?? '') as { count: number; records: Observation[] };
    expect(steps[1].messages.at(-1)?.role).toBe('tool');
    expect(searchResult.records.map((record) => record.id)).toEqual([chart.pulse.id]);
    const readResult = JSON.parse(steps[2].messages.at(-1)?.content ?? '') as { records: { id: string; code: { text: string } }[] };
    expect(readResult.records).toEqual([expect.objectContaining({ id: chart.condition.id, code: { text: 'Essential hypertension' } })]);

    // One read of the reply says what the model saw.
    const reply = await medplum.readResource('Communication', replyId, { cache: 'no-cache' });
    expect(reply.about?.map((reference) => reference.reference)).toEqual([`Observation/${chart.pulse.id}`, `Condition/${chart.condition.id}`]);
    const calls = (reply.extension ?? []).filter((extension) => extension.url === EXTENSION.fhirToolCall);
    expect(calls.map((call) => call.extension?.find((part) => part.url === 'name')?.valueString)).toEqual(['search_patient_records', 'read_record']);
    expect(calls[1].extension?.find((part) => part.url === 'result')?.valueString).toBe(steps[2].messages.at(-1)?.content);

    // Each disclosure is an AuditEvent: a Query for the search (with its query), a Read for the read.
    const audits = await auditsOf(replyId);
    expect(audits.map((audit) => audit.subtype?.[0]?.code)).toEqual(['search-type', 'read']);
    const [query, read] = audits;
    expect(query.entity?.find((entity) => entity.role?.code === '1')?.what?.reference).toBe(`Patient/${patientId}`);
    expect(query.entity?.filter((entity) => entity.role?.code === '4').map((entity) => entity.what?.reference)).toEqual([`Observation/${chart.pulse.id}`]);
    const queryText = Buffer.from(query.entity?.find((entity) => entity.role?.code === '24')?.query ?? '', 'base64').toString('utf8');
    expect(queryText).toMatch(new RegExp(`^Observation\\?.*patient=Patient%2F${patientId}`));
    expect(read.action).toBe('R');
    expect(read.entity?.filter((entity) => entity.role?.code === '4').map((entity) => entity.what?.reference)).toEqual([`Condition/${chart.condition.id}`]);
    expect(read.agent?.find((agent) => agent.requestor)?.who?.reference).toBe(`Practitioner/${project.ids.practitioner}`);
  });

  test('what the policy does not grant, and another patient, are never found by the tools', async () => {
    const steps = [
      [
        { name: 'search_patient_records', arguments: { resource_type: 'MedicationStatement' } },
        { name: 'read_record', arguments: { reference: `Condition/${chart.elsewhere.id}` } },
        { name: 'search_patient_records', arguments: { resource_type: 'Condition', params: { patient: `Patient/${project.ids['patient-in-care-team-2']}` } } },
      ],
    ];
    const completion = await ask({ messages: [{ role: 'user', content: `Anything else? [emulator-behaviour ${JSON.stringify({ toolCalls: steps })}]` }], patient_id: patientId, patient_context: 'tools' });
    const results = chatHost.emulator.received[1].messages.filter((message) => message.role === 'tool').map((message) => message.content);
    expect(results).toHaveLength(3);
    expect(results.join('\n')).not.toContain('wort');
    expect(results.join('\n')).not.toContain('Asthma');
    expect(JSON.parse(results[0])).toEqual({ error: 'The requesting user is not permitted to search these records.' });
    expect(JSON.parse(results[1])).toEqual({ error: expect.stringContaining('is not one of the patient') });
    expect(JSON.parse(results[2])).toEqual({ error: expect.stringContaining("'patient' is not a search parameter") });
    const reply = await medplum.readResource('Communication', completion.communication_id, { cache: 'no-cache' });
    expect(reply.about).toBeUndefined();
    expect(await auditsOf(completion.communication_id)).toHaveLength(0);
  });

  test('with both, the model gets the summary and the tools; the summary and each call are audited', async () => {
    const steps = [[{ name: 'read_record', arguments: { reference: `Observation/${chart.hba1c.id}` } }]];
    const completion = await ask({ messages: [{ role: 'user', content: `HbA1c trend? [emulator-behaviour ${JSON.stringify({ toolCalls: steps })}]` }], patient_id: patientId, patient_context: 'both' });
    expect(chatHost.emulator.received[0].messages[0]).toMatchObject({ role: 'system', content: expect.stringContaining('Essential hypertension') });
    const audits = await auditsOf(completion.communication_id);
    expect(audits.map((audit) => audit.outcomeDesc?.split(' ')[0])).toEqual(['Patient', 'FHIR']);
    const reply: Communication = await medplum.readResource('Communication', completion.communication_id, { cache: 'no-cache' });
    expect(reply.about?.map((reference) => reference.reference)).toContain(`Observation/${chart.hba1c.id}`);
  });

  test('a practitioner whose policy does not allow the patient: 403, nothing read, nothing sent, nothing stored', async () => {
    const failure = await ask({ messages: [{ role: 'user', content: askWithLookups(chart) }], patient_id: project.ids['patient-outside-care-team'], patient_context: 'both' }).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(OpenAI.PermissionDeniedError);
    expect(chatHost.emulator.received).toHaveLength(0);
    const stored = await medplum.searchResources('Communication', { _count: '100' }, { cache: 'no-cache' });
    expect(stored).toHaveLength(0);
  });

  test("a project that shares nothing refuses a request for tools (403); a request that brings its own tools can't have FHIR tools (400)", async () => {
    const ownTools = [{ type: 'function', function: { name: 'lookup', parameters: { type: 'object', properties: {} } } }];
    const mixed = await ask({ messages: [{ role: 'user', content: 'hi' }], patient_id: patientId, patient_context: 'tools', tools: ownTools }).catch((error: unknown) => error);
    expect(mixed).toBeInstanceOf(OpenAI.BadRequestError);
    expect((mixed as InstanceType<typeof OpenAI.BadRequestError>).error).toMatchObject({ param: 'patient_context' });

    const current = await chatHost.host.store.readResource('Project', project.projectId);
    await chatHost.host.store.updateResource({ ...current, setting: [{ name: 'AI_PATIENT_CONTEXT', valueString: 'off' }] });
    const token = await chatHost.host.accessTokenFor(project.ids['practitioner-membership']);
    openai = new OpenAI({ baseURL: `${chatHost.host.url}v1`, apiKey: token, defaultHeaders: { 'X-Project-ID': project.projectId }, maxRetries: 0 });
    const refused = await ask({ messages: [{ role: 'user', content: 'hi' }], patient_id: patientId, patient_context: 'tools' }).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(OpenAI.PermissionDeniedError);
    expect(chatHost.emulator.received).toHaveLength(0);
  });

  test("a project's AI_PATIENT_CONTEXT_MODE makes tools its default", async () => {
    const current = await chatHost.host.store.readResource('Project', project.projectId);
    await chatHost.host.store.updateResource({ ...current, setting: [{ name: 'AI_PATIENT_CONTEXT_MODE', valueString: 'tools' }] });
    const token = await chatHost.host.accessTokenFor(project.ids['practitioner-membership']);
    openai = new OpenAI({ baseURL: `${chatHost.host.url}v1`, apiKey: token, defaultHeaders: { 'X-Project-ID': project.projectId }, maxRetries: 0 });
    await ask({ messages: [{ role: 'user', content: 'hi' }], patient_id: patientId });
    expect(chatHost.emulator.received[0].tools?.map((tool) => tool.name)).toEqual(['search_patient_records', 'read_record']);
    expect(chatHost.emulator.received[0].messages.filter((message) => message.role === 'system')).toHaveLength(0);
  });

  test.each([[OTHER_PROVIDERS.anthropic.model], [OTHER_PROVIDERS.ollama.model]])('through %s: the model calls the tools, gets the results and streams its answer', async (model) => {
    const body = { model, stream: true, messages: [{ role: 'user', content: askWithLookups(chart) }], patient_id: patientId, patient_context: 'tools' };
    const stream = (await openai.chat.completions.create(body as never)) as unknown as AsyncIterable<OpenAI.ChatCompletionChunk & { communication_id?: string }>;
    let text = '';
    let replyId = '';
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta?.content ?? '';
      replyId ||= chunk.communication_id ?? '';
    }
    expect(text).toMatch(/^Echo: How is the blood pressure treatment going\?/);
    expect(chatHost.emulator.received.map((request) => request.provider)).toEqual(Array(3).fill(model.split('/')[0]));
    expect(chatHost.emulator.received[0].tools?.map((tool) => tool.name)).toEqual(['search_patient_records', 'read_record']);
    const reply = await medplum.readResource('Communication', replyId, { cache: 'no-cache' });
    expect(reply.about?.map((reference) => reference.reference)).toEqual([`Observation/${chart.pulse.id}`, `Condition/${chart.condition.id}`]);
  });
});
