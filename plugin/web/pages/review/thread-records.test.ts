import type { Communication } from '@medplum/fhirtypes';
import { threadEntries } from './thread-records.ts';

const category = (code: string): Communication['category'] => [{ coding: [{ system: 'urn:fhirgate:communication-category', code }] }];

describe("a conversation's thread for a reviewer", () => {
  test('lists prompts and replies in the order sent, with the reply model, tokens and what the model was sent', () => {
    const reply: Communication = {
      resourceType: 'Communication',
      id: 'reply',
      status: 'stopped',
      category: category('ai-response'),
      sent: '2026-01-01T10:00:02Z',
      payload: [{ contentString: 'Echo: hi' }],
      extension: [
        { url: 'urn:fhirgate:extension:model', valueString: 'openai/gpt-4o-mini' },
        { url: 'urn:fhirgate:extension:usage', extension: [{ url: 'prompt-tokens', valueInteger: 5 }, { url: 'completion-tokens', valueInteger: 2 }, { url: 'total-tokens', valueInteger: 7 }, { url: 'estimated', valueBoolean: true }] },
        { url: 'urn:fhirgate:extension:patient-context', valueString: 'Patient: Maria Lopez' },
      ],
    };
    const prompt: Communication = {
      resourceType: 'Communication',
      id: 'prompt',
      status: 'completed',
      category: category('ai-prompt'),
      sent: '2026-01-01T10:00:01Z',
      payload: [{ contentString: 'hi' }],
      extension: [{ url: 'urn:fhirgate:extension:chat-request', valueString: '{"model":"m","messages":[]}' }],
    };
    const root: Communication = { resourceType: 'Communication', id: 'root', status: 'in-progress', category: category('ai-conversation'), sent: '2026-01-01T10:00:00Z' };

    const entries = threadEntries([reply, root, prompt]);

    expect(entries.map((entry) => [entry.kind, entry.text])).toEqual([['prompt', 'hi'], ['reply', 'Echo: hi']]);
    expect(entries[0].request).toBe(JSON.stringify({ model: 'm', messages: [] }, undefined, 2));
    expect(entries[1]).toMatchObject({ status: 'stopped', model: 'openai/gpt-4o-mini', tokens: { prompt: 5, completion: 2, total: 7, estimated: true }, patientContext: 'Patient: Maria Lopez' });
  });

  test('a reply shows its cost, its latency from its prompt, the de-identified request and the records it shared', () => {
    const prompt: Communication = { resourceType: 'Communication', id: 'p', status: 'completed', category: category('ai-prompt'), sent: '2026-01-01T10:00:00.000Z' };
    const reply: Communication = {
      resourceType: 'Communication',
      id: 'r',
      status: 'completed',
      category: category('ai-response'),
      sent: '2026-01-01T10:00:01.250Z',
      inResponseTo: [{ reference: 'Communication/p' }],
      about: [{ reference: 'Patient/maria' }, { reference: 'Observation/k' }],
      extension: [
        { url: 'urn:fhirgate:extension:usage', extension: [{ url: 'total-tokens', valueInteger: 9 }, { url: 'cost', valueMoney: { value: 0.0042, currency: 'USD' } }] },
        { url: 'urn:fhirgate:extension:de-identified', extension: [{ url: 'date-shift-days', valueInteger: 12 }, { url: 'request', valueString: '[{"role":"user",' }, { url: 'request', valueString: '"content":"Is PT-1 due?"}]' }] },
      ],
    };
    const journalled: Communication = { ...reply, id: 'j', sent: '2026-01-01T10:00:00.001Z', extension: [] };

    const entries = threadEntries([journalled, reply, prompt]);
    const entry = entries.find((candidate) => candidate.id === 'r');
    const fromJournal = entries.find((candidate) => candidate.id === 'j');

    expect(entry).toMatchObject({ id: 'r', costUsd: 0.0042, latencyMs: 1250, shared: ['Patient/maria', 'Observation/k'], promptReference: 'Communication/p' });
    expect(entry?.deIdentifiedRequest).toBe(JSON.stringify([{ role: 'user', content: 'Is PT-1 due?' }], undefined, 2));
    expect(fromJournal).toMatchObject({ id: 'j', latencyMs: undefined, costUsd: undefined, deIdentifiedRequest: undefined });
  });
});
