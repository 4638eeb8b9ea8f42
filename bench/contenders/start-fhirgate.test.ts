/**
 * The bench's fhirgate is the host `npm start` runs: it writes its log line for every request (to a file, as a
 * deployment's log goes), and a measured turn about the demo patient gets the default patient context (the chart
 * summary, sent to the model), not a lighter turn than a client gets.
 */
import { readFileSync } from 'node:fs';
import { startLlmEmulator, type LlmEmulator } from '../../test/emulator/index.ts';
import { waitFor } from '../../test/support/wait-for.ts';
import { startFhirgate, type FhirgateContender } from './start-fhirgate.ts';
import { EXTENSION } from '../../plugin/chat/fhir-vocabulary.ts';

describe("the bench's fhirgate host", () => {
  let emulator: LlmEmulator;
  let fhirgate: FhirgateContender;
  beforeAll(async () => {
    emulator = await startLlmEmulator({ models: ['bench-model'] });
    fhirgate = await startFhirgate({ emulatorUrl: emulator.url, core: undefined, conversations: 1 });
  }, 120_000);
  afterAll(async () => {
    await fhirgate?.stop();
    await emulator?.close();
  });

  test('a measured turn is logged as npm start logs it, and shares the chart summary as a client gets it by default', async () => {
    // The lines of this request, by its id: lines of the start-up's own requests may still be reaching the file.
    const linesOf = (requestId: string): number =>
      readFileSync(fhirgate.hostLog, 'utf8').split('\n').filter((line) => line.includes('"msg":"fhirgate request"') && line.includes(`"requestId":"${requestId}"`)).length;
    const [body] = fhirgate.bodies(false);
    const response = await fetch(fhirgate.chatUrl, { method: 'POST', headers: fhirgate.headers, body });
    expect(response.status).toBe(200);
    await response.json();
    const requestId = response.headers.get('x-request-id') ?? '';
    expect(requestId).not.toBe('');

    // One line for the measured request (written as the answer finishes).
    await waitFor(async () => (linesOf(requestId) > 0 ? true : undefined), 5_000);
    expect(linesOf(requestId)).toBe(1);
    // The model was sent Maria Lopez's chart: the summary the API shares by default with a turn about a patient.
    const sent = emulator.received.at(-1)?.messages.map((message) => message.content).join('\n') ?? '';
    expect(sent).toMatch(/Lopez/);
  }, 60_000);

  test('turns without the chart continue conversations of their own, whose replies carry no chart summary', async () => {
    const conversationOf = (body: string): string => (JSON.parse(body) as { conversation_id: string }).conversation_id;
    const [plain] = fhirgate.bodiesWithoutChart(false);
    expect(JSON.parse(plain)).toMatchObject({ patient_context: 'none' });
    expect(fhirgate.bodies(false).map(conversationOf)).not.toContain(conversationOf(plain));

    // The conversation's prepared turns were answered without the chart: no reply of it records a chart summary.
    const search = `${new URL(fhirgate.chatUrl).origin}/fhir/R4/Communication?part-of=Communication/${conversationOf(plain)}&_count=50`;
    const page = (await (await fetch(search, { headers: fhirgate.headers })).json()) as { entry?: { resource: { extension?: { url: string }[] } }[] };
    const records = (page.entry ?? []).map((entry) => entry.resource);
    expect(records.length).toBeGreaterThanOrEqual(2);
    expect(records.flatMap((record) => record.extension ?? []).map((extension) => extension.url)).not.toContain(EXTENSION.patientContext);
  }, 60_000);
});
