/**
 * Scenario 8: what one chat turn asks of the FHIR store, by kind of turn: reads, searches and writes, as fhirgate
 * reports them in `X-Fhirgate-Repository-Operations` (docs/observability.md). Inside a Medplum server each costs
 * quota points (read 1, search 20, write 100) and PostgreSQL round trips; the standalone host's store counts the
 * same operations. Counts, not timings: one turn of each kind is enough, after one turn that finds the project's AI
 * agent Device (once per process and project).
 */
import type { ScenarioSection, TargetResult } from '../lib/section.ts';
import { isFhirgateContender } from '../contenders/start-fhirgate.ts';
import { PROMPT } from '../contenders/contender.ts';
import type { BenchContext } from './bench-context.ts';

interface Operations {
  readonly reads: number;
  readonly searches: number;
  readonly writes: number;
}

interface Turn {
  readonly conversationId: string;
  readonly operations: Operations;
}

export async function measureRepositoryOperations(context: BenchContext): Promise<ScenarioSection> {
  const fhirgate = context.contenders.find(isFhirgateContender);
  if (!fhirgate) throw new Error('scenario 8 needs the fhirgate contender');
  await context.emulator.setBehaviour({ latencyMs: 0, replyTokens: 20 });
  const post = async (url: string, body: Record<string, unknown>): Promise<{ body: Record<string, unknown>; operations: Operations }> => {
    const response = await fetch(url, { method: 'POST', headers: fhirgate.headers, body: JSON.stringify(body) });
    const answer = (await response.json()) as Record<string, unknown>;
    const header = response.headers.get('x-fhirgate-repository-operations');
    if (!response.ok || !header) throw new Error(`fhirgate answered ${response.status} without the operations header: ${JSON.stringify(answer).slice(0, 300)}`);
    const counts = Object.fromEntries(header.split('; ').map((part) => part.split('=')));
    return { body: answer, operations: { reads: Number(counts.reads), searches: Number(counts.searches), writes: Number(counts.writes) } };
  };
  const turn = async (fields: Record<string, unknown>): Promise<Turn> => {
    const { body, operations } = await post(fhirgate.chatUrl, { messages: [{ role: 'user', content: PROMPT }], ...fields });
    return { conversationId: String(body.conversation_id), operations };
  };
  // The Responses API: the answer's id is the response previous_response_id names.
  const responsesUrl = fhirgate.chatUrl.replace(/\/chat\/completions$/, '/responses');
  const respond = async (fields: Record<string, unknown>): Promise<Turn & { readonly responseId: string }> => {
    const { body, operations } = await post(responsesUrl, { input: PROMPT, ...fields });
    return { conversationId: String((body.conversation as { id?: string } | undefined)?.id), responseId: String(body.id), operations };
  };
  const patient = { patient_id: fhirgate.patientId, patient_context: 'none' };
  await turn({ patient_context: 'none' });
  const fresh = await turn({ patient_context: 'none' });
  const continued = await turn({ patient_context: 'none', conversation_id: fresh.conversationId });
  const aboutPatient = await turn(patient);
  const continuedAboutPatient = await turn({ ...patient, conversation_id: aboutPatient.conversationId });
  const sharing = await turn({ patient_id: fhirgate.patientId, patient_context: 'summary' });
  const continuedSharing = await turn({ patient_id: fhirgate.patientId, patient_context: 'summary', conversation_id: sharing.conversationId });
  const firstResponse = await respond({});
  const continuedResponse = await respond({ previous_response_id: firstResponse.responseId });
  const rows: [string, Turn, string][] = [
    ['new conversation', fresh, 'root, prompt, reply'],
    ['continued turn', continued, "the root's read (the caller's AccessPolicy decides), the history's search, prompt and reply"],
    ['new conversation about a patient', aboutPatient, "the patient's read (the caller's AccessPolicy decides), root, prompt, reply"],
    ['continued turn about a patient (scenarios 1–4)', continuedAboutPatient, 'the root and the patient read, the history, prompt and reply'],
    ['new conversation sharing the chart (summary)', sharing, "the patient's read, a search per shared type (5), root, prompt, reply, the disclosure's AuditEvent"],
    ['continued turn sharing the chart', continuedSharing, 'the root and the patient, the history and a search per shared type, prompt, reply, AuditEvent'],
    ['Responses turn continued with previous_response_id', continuedResponse, 'that response and the root read, the history (whose page also says the response is still the latest), prompt and reply'],
  ];
  const total = (operations: Operations): number => operations.reads + 20 * operations.searches + 100 * operations.writes;
  const targets: TargetResult[] = [
    {
      description: 'continued turn (chat completions or Responses): ≤ 1 search and ≤ 2 writes, besides the reads the caller\'s AccessPolicy decides (the root; the patient a request names; the previous response)',
      measured:
        `${continuedAboutPatient.operations.searches} search(es), ${continuedAboutPatient.operations.writes} writes, ${continuedAboutPatient.operations.reads} reads; ` +
        `Responses: ${continuedResponse.operations.searches}, ${continuedResponse.operations.writes}, ${continuedResponse.operations.reads}`,
      target: '≤ 1 search, ≤ 2 writes',
      met: [continued, continuedAboutPatient, continuedResponse].every((measured) => measured.operations.searches <= 1 && measured.operations.writes <= 2),
    },
    {
      description: 'new conversation: ≤ 3 writes',
      measured: `${fresh.operations.writes} writes`,
      target: '≤ 3 writes',
      met: fresh.operations.writes <= 3 && aboutPatient.operations.writes <= 3,
    },
  ];
  return {
    title: '8. Repository operations per turn',
    method:
      'One non-streaming turn of each kind against fhirgate (the host of scenarios 1–4), after one turn that finds the project\'s AI agent Device; the counts are what the turn asked of the ' +
      "store through the host's repositories, as fhirgate reports them in its X-Fhirgate-Repository-Operations header (the host's own token check is not counted). " +
      'Medplum points: what the same operations would cost against a Medplum server\'s FHIR quota (read 1, search 20, write 100), whichever repository makes them.',
    table: {
      columns: ['turn', 'reads', 'searches', 'writes', 'Medplum points', 'what they are'],
      rows: rows.map(([name, measured, what]) => [name, measured.operations.reads, measured.operations.searches, measured.operations.writes, total(measured.operations), what]),
    },
    targets,
    notes: [],
  };
}
