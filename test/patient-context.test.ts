/**
 * Patient-grounded answers: a turn that names a patient sends the model a summary of the chart, read with the
 * caller's permissions; the reply's record names the records shared (`about`) and holds the text sent; an
 * AuditEvent records the disclosure. Checked with the openai SDK, what the emulator received, and MedplumClient.
 */
import type { MedplumClient } from '@medplum/core';
import type { AuditEvent, Project } from '@medplum/fhirtypes';
import OpenAI from 'openai';
import type { FhirRepository } from '@medplum/fhir-router';
import { EXTENSION } from '../plugin/chat/fhir-vocabulary.ts';
import type { SeededProject } from '../plugin/hosts/standalone/seed.ts';
import { chatClients, type FhirgateCompletion } from './support/chat-clients.ts';
import { CHAT_MODEL, startChatHost, type ChatHost } from './support/chat-host.ts';
import { seedChart, type SeededChart } from './support/seeded-chart.ts';

describe('patient context', () => {
  let chatHost: ChatHost;
  let project: SeededProject;
  let openai: OpenAI;
  let medplum: MedplumClient;
  let system: FhirRepository;
  let chart: SeededChart;

  beforeAll(async () => {
    chatHost = await startChatHost();
  });
  afterAll(() => chatHost.close());

  beforeEach(async () => {
    chatHost.emulator.reset();
    ({ project, openai, medplum } = await chatClients(chatHost.host));
    system = await chatHost.host.standalone.host.getSystemRepo(project.projectId);
    chart = await seedChart(system, project);
  });

  test('the model gets the chart the caller may read, and the reply and an AuditEvent say which records it saw', async () => {
    const completion = (await openai.chat.completions.create({
      model: CHAT_MODEL,
      messages: [{ role: 'user', content: 'What should I watch at the next visit?' }],
      // @ts-expect-error fhirgate's extra request field
      patient_id: project.ids['patient-in-care-team-1'],
    })) as unknown as FhirgateCompletion;

    const sent = chatHost.emulator.received[0].messages;
    const context = sent.find((message) => message.role === 'system')?.content ?? '';
    expect(context).toContain('Essential hypertension (since 2021-03-04)');
    expect(context).toContain('Lisinopril 10 mg tablet, one daily, since 2021-03-05');
    expect(context).toContain('Penicillin, high criticality');
    expect(context).toContain('2026-11-01 Heart rate 72 /min');
    expect(context).toContain('2026-10-15 HbA1c 6.1 %');
    // Newest first within a section.
    expect(context.indexOf('Heart rate')).toBeLessThan(context.indexOf('HbA1c'));
    expect(context).not.toContain('wort');
    expect(context).not.toContain('Asthma');
    expect(sent.at(-1)?.content).toBe('What should I watch at the next visit?');
    // The summary alone: the model is offered no FHIR tools.
    expect(chatHost.emulator.received[0].body.tools).toBeUndefined();

    // One FHIR read answers "which data did the model see for this answer?".
    const reply = await medplum.readResource('Communication', completion.communication_id, { cache: 'no-cache' });
    const shared = (reply.about ?? []).map((reference) => reference.reference).sort();
    expect(shared).toEqual(
      [`Patient/${project.ids['patient-in-care-team-1']}`, ...[chart.condition, chart.medication, chart.allergy, chart.pulse, chart.hba1c].map((resource) => `${resource.resourceType}/${resource.id}`)].sort()
    );
    expect(reply.extension?.find((extension) => extension.url === EXTENSION.patientContext)?.valueString).toBe(context);

    const audits = await medplum.searchResources('AuditEvent', { entity: `Communication/${completion.communication_id}` }, { cache: 'no-cache' });
    expect(audits).toHaveLength(1);
    const audit = audits[0] as AuditEvent;
    expect(audit.entity?.find((entity) => entity.role?.code === '1')?.what?.reference).toBe(`Patient/${project.ids['patient-in-care-team-1']}`);
    expect(audit.entity?.filter((entity) => entity.role?.code === '4').map((entity) => entity.what?.reference).sort()).toEqual(shared.filter((reference) => !reference?.startsWith('Patient/')));
    expect(audit.agent?.find((agent) => agent.requestor)?.who?.reference).toBe(`Practitioner/${project.ids.practitioner}`);
    expect(audit.outcomeDesc).toMatch(/^Patient context sent to the AI model for reply Communication\//);
  });

  test('a patient the caller may not read: refused, nothing read for the model, nothing sent, no AuditEvent', async () => {
    const before = await medplum.searchResources('AuditEvent', { _count: '1000' }, { cache: 'no-cache' });
    const failure = await openai.chat.completions
      .create({
        model: CHAT_MODEL,
        messages: [{ role: 'user', content: 'Tell me about this patient.' }],
        // @ts-expect-error fhirgate's extra request field
        patient_id: project.ids['patient-outside-care-team'],
      })
      .catch((error: unknown) => error);

    expect((failure as { status?: number }).status).toBe(403);
    expect(chatHost.emulator.received).toHaveLength(0);
    const after = await medplum.searchResources('AuditEvent', { _count: '1000' }, { cache: 'no-cache' });
    expect(after.filter((event) => event.outcomeDesc?.startsWith('Patient context'))).toHaveLength(before.filter((event) => event.outcomeDesc?.startsWith('Patient context')).length);
  });

  test('a conversation without a patient sends no patient context', async () => {
    await openai.chat.completions.create({ model: CHAT_MODEL, messages: [{ role: 'user', content: 'A general question.' }] });
    expect(chatHost.emulator.received[0].messages.filter((message) => message.role === 'system')).toHaveLength(0);
  });

  test("a project narrows what its turns share through its AI_PATIENT_CONTEXT setting, or turns it off", async () => {
    const ask = () =>
      openai.chat.completions.create({
        model: CHAT_MODEL,
        messages: [{ role: 'user', content: 'Anything to watch?' }],
        // @ts-expect-error fhirgate's extra request field
        patient_id: project.ids['patient-in-care-team-1'],
      });
    const setSetting = async (valueString: string): Promise<void> => {
      const current = await chatHost.host.store.readResource<Project>('Project', project.projectId);
      await chatHost.host.store.updateResource<Project>({ ...current, setting: [{ name: 'AI_PATIENT_CONTEXT', valueString }] });
    };

    await setSetting('Condition, AllergyIntolerance');
    await ask();
    const narrowed = chatHost.emulator.received[0].messages.find((message) => message.role === 'system')?.content ?? '';
    expect(narrowed).toContain('Essential hypertension');
    expect(narrowed).toContain('Penicillin');
    expect(narrowed).not.toContain('Heart rate');
    expect(narrowed).not.toContain('Lisinopril');

    await setSetting('off');
    // A new sign-in: a caller resolved from its token is cached for up to 5 s, with the project it had.
    const token = await chatHost.host.accessTokenFor(project.ids['practitioner-membership']);
    openai = new OpenAI({ baseURL: `${chatHost.host.url}v1`, apiKey: token, defaultHeaders: { 'X-Project-ID': project.projectId }, maxRetries: 0 });
    await ask();
    expect(chatHost.emulator.received[1].messages.filter((message) => message.role === 'system')).toHaveLength(0);
  });
});
