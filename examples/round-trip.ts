/**
 * The whole round trip a newcomer tries first, against a running fhirgate (`npm start`):
 *   1. ask a question with the official openai SDK, about a patient;
 *   2. continue the conversation, streaming the answer;
 *   3. read what was stored back with MedplumClient, as an auditor would.
 *
 *   TOKEN=$(npm run -s token) CLIENT=$(npm run -s token -- --client) npm run -s example
 *
 * Settings (environment): FHIRGATE_URL (default http://127.0.0.1:8103/), TOKEN (a Medplum access token), CLIENT
 * (the JSON `npm run -s token -- --client` prints), PATIENT_ID (default: Maria Lopez of the demo project).
 */
import { MedplumClient } from '@medplum/core';
import type { Communication } from '@medplum/fhirtypes';
import OpenAI from 'openai';

const baseUrl = process.env.FHIRGATE_URL ?? 'http://127.0.0.1:8103/';
const client = JSON.parse(process.env.CLIENT ?? '{}') as { client_id?: string; client_secret?: string; project_id?: string };
const projectId = client.project_id ?? 'a1f0c0de-0000-4000-8000-000000000001';
const patientId = process.env.PATIENT_ID ?? 'a1f0c0de-0000-4000-8000-000000000301';
if (!process.env.TOKEN || !client.client_id || !client.client_secret) {
  throw new Error('Set TOKEN=$(npm run -s token) and CLIENT=$(npm run -s token -- --client)');
}

// 1. The openai SDK, unchanged: the Medplum access token is the API key, the project goes in X-Project-ID.
const openai = new OpenAI({
  baseURL: new URL('v1', baseUrl).href,
  apiKey: process.env.TOKEN,
  defaultHeaders: { 'X-Project-ID': projectId },
});
const first = await openai.chat.completions.create({
  model: (await openai.models.list()).data[0].id,
  messages: [
    { role: 'system', content: 'You are a careful clinical assistant.' },
    { role: 'user', content: 'What should I check at the next visit?' },
  ],
  ...{ patient_id: patientId }, // fhirgate's request field: the patient the conversation is about
});
const { conversation_id: conversationId } = first as unknown as { conversation_id: string };
console.log(`answer:        ${first.choices[0].message.content}`);
console.log(`conversation:  ${conversationId}`);

// 2. Continue the conversation, streaming: its earlier turns go to the model as history.
const stream = await openai.chat.completions.create({
  model: first.model,
  stream: true,
  messages: [{ role: 'user', content: 'And which labs?' }],
  ...{ conversation_id: conversationId }, // fhirgate's request field: continue this conversation
});
process.stdout.write('streamed:      ');
for await (const chunk of stream) {
  process.stdout.write(chunk.choices[0]?.delta.content ?? '');
}
process.stdout.write('\n\n');

// 3. Read the audit trail back with MedplumClient, as the demo integration.
const medplum = new MedplumClient({ baseUrl });
await medplum.startClientLogin(client.client_id, client.client_secret);
const stored = await medplum.searchResources('Communication', { 'part-of': `Communication/${conversationId}`, _sort: 'sent' });
for (const communication of stored as Communication[]) {
  const kind = communication.category?.[0]?.coding?.[0]?.code;
  console.log(`${communication.sent}  ${kind?.padEnd(11)}  ${communication.status?.padEnd(9)}  ${communication.sender?.reference}  ${(communication.payload ?? []).map((item) => item.contentString ?? '').join('')}`);
}
