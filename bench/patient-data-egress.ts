#!/usr/bin/env node
/**
 * Benchmark 9, patient data egress:
 *   node bench/patient-data-egress.ts --out <file.json> [--smoke]
 * What the egress rule costs a chat turn, in-process and in CPU time (`process.cpuUsage`, so other processes on a
 * busy machine do not count): the check of a turn about no patient, of a turn about a patient on a cleared model,
 * and of a refusal; and, for a project that de-identifies, the turn's set-up, the de-identification of a typical
 * request (an 8,000-character chart summary, 50 history messages, the prompt) at the first provider call and at a
 * later step of a FHIR tool loop, and the re-identification of a streamed 100-word reply. Each is the median of
 * repetitions of many calls. The target is the issue's: the checks under 0.1 ms per turn.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import type { Patient, Project } from '@medplum/fhirtypes';
import type { FhirRepository } from '@medplum/fhir-router';
import { deIdentifyRequest } from '../plugin/governance/de-identify-model.ts';
import { Pseudonymizer } from '../plugin/governance/de-identify-text.ts';
import { applyPatientDataEgress, type EgressTurn, type PatientDataOptions } from '../plugin/governance/patient-data-egress.ts';
import { StreamReIdentifier } from '../plugin/governance/re-identify-stream.ts';
import type { ChatMessage, ChatModel, ChatModelRequest } from '../plugin/llm/chat-model.ts';
import type { ResolvedModel } from '../plugin/llm/model-registry.ts';
import { createTelemetry } from '../plugin/telemetry/telemetry.ts';
import type { ScenarioSection } from './lib/section.ts';
import { formatNumber, median } from './lib/statistics.ts';

const { values } = parseArgs({ options: { out: { type: 'string' }, smoke: { type: 'boolean', default: false } } });
if (!values.out) {
  throw new Error('usage: node bench/patient-data-egress.ts --out <file.json> [--smoke]');
}
const plan = values.smoke ? { repetitions: 3, scale: 0.05 } : { repetitions: 7, scale: 1 };
const TARGET_MS = 0.1;

const patient: Patient & { id: string } = {
  resourceType: 'Patient',
  id: 'b7e1c2d4-5f60-4a8b-9c0d-1e2f3a4b5c6d',
  name: [{ given: ['Maria'], family: 'Lopez' }],
  birthDate: '1958-03-14',
  identifier: [{ system: 'urn:oid:1.2.3.4', value: 'MRN-004512' }],
  telecom: [
    { system: 'phone', value: '+1 555-010-0199' },
    { system: 'email', value: 'maria.lopez@example.org' },
  ],
  address: [{ line: ['12 Elm Street'], city: 'Springfield', postalCode: '62704' }],
};
const unusedModel: ChatModel = { provider: 'bench', complete: () => Promise.reject(new Error('not called')), stream: () => [] as never };
const resolved = (id: string, fallbacks: ResolvedModel[] = []): ResolvedModel => ({ id, model: unusedModel, modelName: id, retries: { maxRetries: 0, baseDelayMs: 0, maxDelayMs: 0 }, fallbacks });
const options: PatientDataOptions = { operatorModels: ['cleared/*'], dateShiftKey: 'a-bench-date-shift-key-of-forty-characters', telemetry: createTelemetry('bench') };
const project = (settings: Record<string, string>): Project & { id: string } => ({
  resourceType: 'Project',
  id: 'bench',
  setting: [{ name: 'AI_MODELS', valueString: 'cleared/a, other/b' }, ...Object.entries(settings).map(([name, valueString]) => ({ name, valueString }))],
});
const turn = (overrides: Partial<EgressTurn>): EgressTurn => ({
  project: project({}),
  model: resolved('cleared/a', [resolved('other/b'), resolved('cleared/c')]),
  subject: { reference: { reference: `Patient/${patient.id}` }, patient },
  conversationId: 'c0ffee00-0000-4000-8000-000000000001',
  messages: [{ role: 'user', content: 'How is Maria doing?' }],
  systemRepo: () => Promise.resolve({} as FhirRepository),
  ...overrides,
});

/** A typical request of a turn about a patient: the summary, 50 history messages, the prompt (about 26,000 characters). */
function typicalRequest(): ChatModelRequest {
  const line = 'Essential hypertension (since 2021-03-04), Lisinopril 10 mg tablet, one daily; Maria reports dizziness on 2026-10-18. ';
  const history: ChatMessage[] = Array.from({ length: 50 }, (_, index) => ({ role: index % 2 === 0 ? 'user' : 'assistant', content: `${index}: ${line.repeat(3)}` }));
  return {
    model: 'b',
    maxTokens: 1000,
    signal: new AbortController().signal,
    messages: [{ role: 'system', content: line.repeat(8000 / line.length) }, ...history, { role: 'user', content: 'How is Maria Lopez since 2026-10-15? Call +1 555-010-0199 if needed.' }],
  };
}
const reply = Array.from({ length: 100 }, (_, index) => (index % 25 === 0 ? ' [GIVEN-1]' : index % 25 === 12 ? ' 2026-07-10' : ' word')).join('');

/** Milliseconds of CPU per call of `operation`: the median of the repetitions, each `calls` calls after a warm-up. */
async function cpuMsPerCall(calls: number, operation: () => unknown): Promise<number> {
  const count = Math.max(10, Math.round(calls * plan.scale));
  for (let index = 0; index < count / 10; index++) await operation();
  const samples: number[] = [];
  for (let repetition = 0; repetition < plan.repetitions; repetition++) {
    const start = process.cpuUsage();
    for (let index = 0; index < count; index++) await operation();
    const used = process.cpuUsage(start);
    samples.push((used.user + used.system) / 1000 / count);
  }
  return median(samples);
}

const deIdentify = turn({ project: project({ AI_PATIENT_DATA_POLICY: 'de-identify' }), model: resolved('other/b') });
const request = typicalRequest();
const warm = new Pseudonymizer(patient, -100);
deIdentifyRequest(request, warm);
const rows: [string, number][] = [
  ['check: a turn about no patient', await cpuMsPerCall(200_000, () => applyPatientDataEgress(options, turn({ subject: undefined })))],
  ['check: a turn about a patient, cleared model (its uncleared fallback left out)', await cpuMsPerCall(200_000, () => applyPatientDataEgress(options, turn({})))],
  ['check: a turn about a patient refused (403)', await cpuMsPerCall(50_000, () => applyPatientDataEgress(options, turn({ model: resolved('other/b') })).catch(() => undefined))],
  ['de-identified turn: set-up (the patient\'s terms, the date shift)', await cpuMsPerCall(5_000, () => applyPatientDataEgress(options, deIdentify))],
  ['de-identify the typical request, first provider call', await cpuMsPerCall(500, () => deIdentifyRequest(request, new Pseudonymizer(patient, -100)))],
  ['de-identify the typical request again (a later tool-loop step)', await cpuMsPerCall(20_000, () => deIdentifyRequest(request, warm))],
  [
    're-identify a streamed 100-word reply, word by word',
    await cpuMsPerCall(2_000, () => {
      const stream = new StreamReIdentifier(warm);
      let text = '';
      for (const word of reply.split(/(?= )/)) text += stream.push(word);
      return text + stream.flush();
    }),
  ],
];

const checks = rows.slice(0, 2).map(([, value]) => value);
const section: ScenarioSection = {
  title: '9. Governance: patient data egress',
  method:
    `In-process, CPU time (process.cpuUsage) per call, median of ${plan.repetitions} repetitions after a warm-up${values.smoke ? ' (smoke: few calls)' : ''}. ` +
    'The check is applyPatientDataEgress as the chat pipeline calls it (the project\'s settings read, the model and its fallbacks judged); ' +
    'the typical request is an 8,000-character chart summary, 50 history messages and the prompt, about 26,000 characters.',
  table: { columns: ['what', 'CPU ms per call'], rows: rows.map(([what, value]) => [what, formatNumber(value, 4)]) },
  targets: [
    {
      description: 'the egress check per turn (about no patient, and about a patient on a cleared model), the slower of the two',
      measured: `${formatNumber(Math.max(...checks), 4)} ms`,
      target: `≤ ${TARGET_MS} ms`,
      met: Math.max(...checks) <= TARGET_MS,
    },
  ],
  notes: [
    'De-identification is paid only by turns about a patient on a model the project does not clear and chooses to de-identify for; its set-up compiles the patient\'s terms once per turn, and each text is de-identified once per turn (a tool loop\'s later steps find it done).',
  ],
};
const outFile = resolve(values.out);
mkdirSync(dirname(outFile), { recursive: true });
writeFileSync(outFile, `${JSON.stringify(section, null, 2)}\n`);
