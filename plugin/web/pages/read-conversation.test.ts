import type { MedplumClient } from '@medplum/core';
import type { Communication } from '@medplum/fhirtypes';
import { readConversation } from './read-conversation.ts';

const SYSTEM = 'urn:fhirgate:communication-category';

function record(id: string, code: string, text: string | undefined, status: Communication['status'] = 'completed'): Communication {
  return { resourceType: 'Communication', id, status, category: [{ coding: [{ system: SYSTEM, code }] }], payload: text ? [{ contentString: text }] : undefined };
}

describe('readConversation', () => {
  it('reads the thread oldest first, with one search of the conversation’s parts, a stopped reply marked', async () => {
    const searches: Record<string, string>[] = [];
    // The server answers newest first (`_sort=-sent`).
    const newestFirst = [record('r2', 'ai-response', 'Partly', 'stopped'), record('p2', 'ai-prompt', 'And after?'), record('r1', 'ai-response', 'Echo: hi'), record('p1', 'ai-prompt', 'hi')];
    const medplum = {
      searchResources: async (_type: string, query: Record<string, string>) => {
        searches.push(query);
        return newestFirst;
      },
    } as unknown as MedplumClient;

    expect((await readConversation(medplum, 'root-1')).messages).toEqual([
      { role: 'user', text: 'hi' },
      { role: 'assistant', text: 'Echo: hi', stopped: false, failed: false },
      { role: 'user', text: 'And after?' },
      { role: 'assistant', text: 'Partly', stopped: true, failed: false },
    ]);
    expect(searches).toEqual([expect.objectContaining({ 'part-of': 'Communication/root-1', 'category:not': 'ai-side-request', _sort: '-sent' })]);
  });

  it('names the conversation’s patient and, under each reply, the records of the chart it was given', async () => {
    const reply = { ...record('r1', 'ai-response', 'Her potassium is due.'), subject: { reference: 'Patient/p-1' }, about: [{ reference: 'Patient/p-1' }, { reference: 'Condition/c-1' }] };
    const prompt = { ...record('p1', 'ai-prompt', 'Is she due?'), subject: { reference: 'Patient/p-1' } };
    const medplum = { searchResources: async () => [reply, prompt] } as unknown as MedplumClient;
    const thread = await readConversation(medplum, 'root-1');
    expect(thread.patient).toEqual({ reference: 'Patient/p-1' });
    expect(thread.messages[1].shared?.map((shared) => shared.reference)).toEqual(['Patient/p-1', 'Condition/c-1']);
    expect(thread.messages[0].shared).toBeUndefined();
  });

  it('is about no patient when no record names one', async () => {
    const medplum = { searchResources: async () => [record('r1', 'ai-response', 'Echo: hi')] } as unknown as MedplumClient;
    expect((await readConversation(medplum, 'root-1')).patient).toBeUndefined();
  });
});
