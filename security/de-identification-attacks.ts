/**
 * De-identification (issue 33, items 7 to 9): a project of its own sends turns about its patient de-identified to
 * a model not cleared for patient data (`AI_PATIENT_DATA_POLICY=de-identify`), and the provider (the emulator)
 * plays the curious party: it knows when it received each request, reads everything in it, and tries to work out
 * who the patient is. An attack gets through when what the provider received holds one of the patient's real
 * identifiers (in any variant, in any position: function names, schema keys, metadata keys, call ids), the real
 * birth date, or enough to compute the conversation's exact date shift (from today's date in a system prompt, or
 * from vital signs taken minutes ago); or when the client gets a call of its own tool with the patient's
 * identifiers put back into the arguments (the client would carry them wherever the tool reaches).
 */
import type { Observation, Patient, Project } from '@medplum/fhirtypes';
import { dateShiftDays } from '../plugin/governance/de-identify-dates.ts';
import type { ReceivedRequest } from '../test/emulator/index.ts';
import { UNCLEARED_MODEL, type SecurityContext } from './context.ts';
import type { AttackOutcome } from './suite.ts';

const KIND = 'de-identification';
/** The key the suite's host derives date shifts with: the attacks compute the true shift to check the provider's guess. */
export const DATE_SHIFT_KEY = 'security-suite-date-shift-key-0123456789abcdef';
const DAY_MS = 86_400_000;
/** The shortest and longest shift (de-identify-dates.ts), in days back: what the provider knows of the rule. */
const SHIFT_RANGE = [30, 365] as const;
/** Dates within this many days of the request reach the provider relative to it (de-identify-present.ts). */
const PRESENT_WINDOW_DAYS = 30;

const PATIENT = {
  birthDate: '1958-03-14',
  mrn: 'MRN-004512',
  ssn: '123-45-6789',
  phone: '+1 555-010-0199',
  email: 'maria.lopez@example.org',
  line: '12 Elm Street',
  city: 'Springfield',
  postalCode: '62704',
} as const;

export async function deIdentificationAttacks(context: SecurityContext): Promise<void> {
  const { log, host, emulator } = context;
  const project = await host.seedProject();
  const patientId = project.ids['patient-in-care-team-1'];
  const system = await host.standalone.host.getSystemRepo(project.projectId);
  const patient = await system.readResource<Patient>('Patient', patientId);
  await system.updateResource<Patient>({
    ...patient,
    birthDate: PATIENT.birthDate,
    identifier: [
      { system: 'urn:oid:2.16.840.1.113883.19.5', value: PATIENT.mrn },
      { system: 'http://hl7.org/fhir/sid/us-ssn', value: PATIENT.ssn },
    ],
    telecom: [
      { system: 'phone', value: PATIENT.phone },
      { system: 'email', value: PATIENT.email },
    ],
    address: [{ line: [PATIENT.line], city: PATIENT.city, postalCode: PATIENT.postalCode, state: 'IL' }],
  });
  const subject = { reference: `Patient/${patientId}` };
  const observation = (effective: Date, text: string, value: number, unit: string): Observation => ({
    resourceType: 'Observation',
    status: 'final',
    subject,
    code: { text },
    effectiveDateTime: effective.toISOString(),
    valueQuantity: { value, unit },
  });
  // Vital signs taken minutes ago, and a lab of three months ago: the chart summary sends both with their dates.
  await system.createResource(observation(new Date(Date.now() - 5 * 60_000), 'Heart rate', 88, '/min'));
  await system.createResource(observation(new Date(Date.now() - 90 * DAY_MS), 'HbA1c', 6.4, '%'));
  const stored = await host.store.readResource<Project>('Project', project.projectId);
  await host.store.updateResource<Project>({ ...stored, setting: [...(stored.setting ?? []), { name: 'AI_PATIENT_DATA_POLICY', valueString: 'de-identify' }] });
  const token = await host.accessTokenFor(project.ids['practitioner-membership']);

  const identifying = [
    'maria', 'lopez', '004512', '123-45-6789', '123456789', '555-010-0199', '5550100199', 'elm street', 'elm st', 'springfield', '62704',
    patientId, patientId.replaceAll('-', ''), '1958-03-14', '19580314', '14-mar-58', '14/03/1958', '03/14/1958', 'march 14, 1958',
  ];
  const todayText = (): string => new Date().toISOString().slice(0, 10);
  /** What agent frameworks put first: today's date. */
  const systemPrompt = (): string => `You are a careful clinical assistant. Today's date is ${todayText()}. The current time is ${new Date().toISOString()}.`;

  /** Sends a turn, and judges what the provider received and what the client got back. */
  const attack = async (path: 'chat/completions' | 'responses', body: Record<string, unknown>, clientTool = false): Promise<AttackOutcome> => {
    const before = emulator.received.length;
    const response = await fetch(`${host.url}v1/${path}`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${token}`, 'X-Project-ID': project.projectId },
      body: JSON.stringify({ model: `openai/${UNCLEARED_MODEL}`, patient_id: patientId, ...body }),
    });
    const answer = await response.text();
    if (response.status >= 400) {
      return { status: response.status, letThrough: false, note: response.status >= 500 ? answer.slice(0, 200) : undefined };
    }
    const received = emulator.received.slice(before);
    const trueShift = -dateShiftDays(DATE_SHIFT_KEY, project.projectId, response.headers.get('X-Conversation-ID') ?? '');
    const leaks = received.flatMap((request) => providerFindings(request, identifying, trueShift));
    if (received.length === 0) {
      leaks.push('the provider was not called');
    }
    if (clientTool) {
      const argumentsReceived = argumentsIn(answer);
      // Each call's arguments, and all of them joined (a stream may send a call's arguments in pieces).
      const exported = identifying.filter((value) => [...argumentsReceived, argumentsReceived.join('')].some((text) => text.toLowerCase().includes(value)));
      if (argumentsReceived.length === 0) {
        leaks.push('no call of the client tool came back');
      } else if (exported.length > 0) {
        leaks.push(`the client's tool call came back re-identified (${exported.join(', ')})`);
      }
    }
    return { status: response.status, letThrough: leaks.length > 0, note: leaks.length > 0 ? [...new Set(leaks)].join('; ') : undefined };
  };
  const chat = (user: string, extra: Record<string, unknown> = {}, withToday = true): Promise<AttackOutcome> =>
    attack('chat/completions', { messages: [...(withToday ? [{ role: 'system', content: systemPrompt() }] : []), { role: 'user', content: user }], ...extra });

  // Item 7: the dates a provider can tie to the present.
  await log.run(KIND, "today's date in a system prompt gives the date shift, and with it the birth date", async () => {
    const outcome = await chat('Summarise her chart, with her date of birth.');
    const sent = emulator.received.at(-1);
    const newest = sent && calendarDates(JSON.stringify(sent.body)).filter((date) => date.getTime() <= sent.receivedAt).sort((a, b) => b.getTime() - a.getTime())[0];
    log.figure(
      'de-identification: shifts left to a provider',
      newest ? `${shiftsLeft(newest, new Date(sent.receivedAt))} of ${SHIFT_RANGE[1] - SHIFT_RANGE[0] + 1} (newest calendar date ${daysBack(newest, new Date(sent.receivedAt))} days back)` : 'no calendar date sent'
    );
    return outcome;
  });
  await log.run(KIND, 'vital signs taken minutes ago give the date shift', () => chat('How is her heart rate today?', {}, false));

  // Item 9: variants of her identifiers in what the user types.
  const variants: [string, string][] = [
    ['her name run together', 'Is MariaLopez on the ward list?'],
    ['the birth date as digits', 'DOB 19580314 on the label.'],
    ['the birth date with a two-digit year', 'Born 14-Mar-58 per the referral.'],
    ['an abbreviated street', 'She moved to 12 Elm St last year.'],
    ["the MRN's digits alone", 'Chart number 004512 is hers.'],
    ["the patient's id without hyphens", `Record ${patientId.replaceAll('-', '')} in the old system.`],
    ['an e-mail address made from her name', 'Write to mlopez@mail.example or maria.lopez@mail.example.'],
  ];
  for (const [name, text] of variants) {
    await log.run(KIND, `${name} reaches a model not cleared`, () => chat(text));
  }

  // Item 9: positions of the request other than the messages' text.
  const lookup = { type: 'function', function: { name: 'lookup_MariaLopez', description: 'Looks her up.', parameters: { type: 'object', properties: { query: { type: 'string' } } } } };
  const positions: [string, Record<string, unknown>][] = [
    ['a function name', { tools: [lookup] }],
    ['a function name in tool_choice', { tools: [lookup], tool_choice: { type: 'function', function: { name: 'lookup_MariaLopez' } } }],
    ['a JSON-schema property key of a tool', { tools: [{ type: 'function', function: { name: 'lookup', parameters: { type: 'object', properties: { maria_lopez_ssn: { type: 'string' } } } } }] }],
    ['a JSON-schema property key and name of the response format', { response_format: { type: 'json_schema', json_schema: { name: 'summary_MariaLopez', schema: { type: 'object', properties: { maria_lopez: { type: 'string' } } } } } }],
    ['a metadata key', { store: true, metadata: { 'maria.lopez@example.org': 'x', MariaLopez: 'y' } }],
  ];
  for (const [name, extra] of positions) {
    await log.run(KIND, `${name} reaches a model not cleared`, () => chat('Any news?', extra));
  }
  await log.run(KIND, "an assistant's call (its function name, and a tool_call_id holding the SSN's digits) reaches a model not cleared", () =>
    attack('chat/completions', {
      tools: [lookup],
      messages: [
        { role: 'system', content: systemPrompt() },
        { role: 'user', content: 'Look her up.' },
        { role: 'assistant', content: null, tool_calls: [{ id: 'call_123456789', type: 'function', function: { name: 'lookup_MariaLopez', arguments: '{"query":"x"}' } }] },
        { role: 'tool', tool_call_id: 'call_123456789', content: 'nothing found' },
        { role: 'user', content: 'And now?' },
      ],
    })
  );

  // Item 8: a model that writes the pseudonyms into the client's own tool.
  const search = { type: 'function', function: { name: 'web_search', description: 'Searches the web.', parameters: { type: 'object', properties: { query: { type: 'string' } } } } };
  const exfiltrating = `Look her up. [emulator-behaviour ${JSON.stringify({ toolCalls: [[{ name: 'web_search', arguments: { query: `${PATIENT.ssn} ${PATIENT.phone} ${PATIENT.line} ${PATIENT.mrn}` } }]] })}]`;
  for (const stream of [false, true]) {
    await log.run(KIND, `chat completions${stream ? ', streamed' : ''}: a call of the client's own tool comes back with her identifiers put back`, () =>
      attack('chat/completions', { stream, tools: [search], messages: [{ role: 'system', content: systemPrompt() }, { role: 'user', content: exfiltrating }] }, true)
    );
    await log.run(KIND, `Responses API${stream ? ', streamed' : ''}: a call of the client's own tool comes back with her identifiers put back`, () =>
      attack('responses', { stream, instructions: systemPrompt(), tools: [{ type: 'function', ...search.function }], input: exfiltrating }, true)
    );
  }
}

/**
 * What the provider could find in one request: her identifiers, and what it works out of the dates. It knows the
 * rule (docs/governance.md: a shift of 30 to 365 days back, dates within 30 days of the request written relative
 * to it) and when it received the request; it guesses the shift from a date the client labelled today, and from the
 * newest calendar date (records are often minutes old), then moves the birth date it was sent back by that guess.
 */
function providerFindings(request: ReceivedRequest, identifying: readonly string[], trueShift: number): string[] {
  const text = JSON.stringify(request.body);
  const lower = text.toLowerCase();
  const findings = identifying.filter((value) => lower.includes(value)).map((value) => `the provider received '${value}'`);
  const today = new Date(request.receivedAt);
  const dates = calendarDates(text);
  const todayLabelled = [...text.matchAll(/today(?:'s date)? is ([^."]{6,40})/gi)].flatMap((match) => calendarDates(match[1]));
  const newest = dates.filter((date) => date.getTime() <= today.getTime()).sort((a, b) => b.getTime() - a.getTime())[0];
  const guesses = [...todayLabelled.map((date) => daysBack(date, today)), ...(newest ? [daysBack(newest, today)] : [])];
  if (guesses.includes(trueShift)) {
    findings.push(`the exact date shift (${trueShift} days) follows from ${todayLabelled.some((date) => daysBack(date, today) === trueShift) ? "the date labelled today" : 'the newest date'}`);
  }
  const born = /born ([^,"\\]{6,30})/i.exec(text);
  const sentBirthDate = born ? calendarDates(born[1])[0] : undefined;
  if (sentBirthDate && guesses.some((guess) => new Date(sentBirthDate.getTime() + guess * DAY_MS).toISOString().startsWith('1958-03-14'))) {
    findings.push('the real birth date follows from the birth date sent and the shift');
  }
  return findings;
}

/** How many shifts the provider is left with, after the newest calendar date it was sent (for the figures). */
function shiftsLeft(newestCalendarDate: Date, today: Date): number {
  // A calendar date is a real date more than the window back, moved back by the shift: the shift is at most this.
  const largest = Math.min(SHIFT_RANGE[1], daysBack(newestCalendarDate, today) - PRESENT_WINDOW_DAYS - 1);
  return Math.max(0, largest - SHIFT_RANGE[0] + 1);
}

function daysBack(date: Date, today: Date): number {
  return Math.round((Date.UTC(today.getUTCFullYear(), today.getUTCMonth(), today.getUTCDate()) - Date.UTC(date.getUTCFullYear(), date.getUTCMonth(), date.getUTCDate())) / DAY_MS);
}

/** The calendar dates written in `text` (year first, or with a month's name). */
function calendarDates(text: string): Date[] {
  const found: Date[] = [];
  for (const match of text.matchAll(/(?<!\d)(\d{4})-(\d{2})-(\d{2})(?!\d)/g)) {
    found.push(new Date(Date.UTC(Number(match[1]), Number(match[2]) - 1, Number(match[3]))));
  }
  for (const match of text.matchAll(/\b(January|February|March|April|May|June|July|August|September|October|November|December) (\d{1,2}), (\d{4})/g)) {
    found.push(new Date(`${match[1]} ${match[2]}, ${match[3]} UTC`));
  }
  return found.filter((date) => !Number.isNaN(date.getTime()));
}

/** The arguments of the tool calls in an answer, JSON or streamed, chat completions or Responses. */
function argumentsIn(answer: string): string[] {
  return [...answer.matchAll(/"arguments":"((?:[^"\\]|\\.)*)"/g)].map((match) => JSON.parse(`"${match[1]}"`) as string).filter((text) => text !== '');
}
