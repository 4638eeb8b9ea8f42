/**
 * The MCP server's tools: the chat's FHIR tools (chat/fhir-tools.ts), with the patient named by the client rather
 * than set by a turn, `find_patients`, and a patient's summary (patient-summary.ts, also a resource). Each runs
 * with the caller's repository, so the caller's AccessPolicy decides what is read, exactly as in the chat. A
 * refusal (the project's rule for MCP clients, a patient the caller may not read, bad input) is a tool error that
 * says why; every result that holds records of a patient is on record (an AuditEvent naming the user, the patient,
 * the records, the MCP client and whether they went de-identified) before the client is given it. Searches are
 * answered page by page (page-token.ts).
 */
import type { WithId } from '@medplum/core';
import type { FhirRepository } from '@medplum/fhir-router';
import type { AuditEvent, Patient, Reference } from '@medplum/fhirtypes';
import { ProtocolError, ProtocolErrorCode, ResourceTemplate, type CallToolResult, type McpServer, type ReadResourceResult } from '@modelcontextprotocol/server';
import type { CallerContext, HostLogger } from '../host.ts';
import { callerParty } from '../chat/caller-reference.ts';
import { MCP_CLIENT_PREFIX, MCP_SERVER_OBSERVER } from '../chat/fhir-vocabulary.ts';
import { buildDisclosureEvent, type Disclosure } from '../chat/disclosure-audit.ts';
import { fhirToolDefinitions, runFhirTool, SEARCH_TOOL, type FhirToolResult, type FhirToolsOptions } from '../chat/fhir-tools.ts';
import type { PatientContextOptions, PatientContextType } from '../chat/patient-context.ts';
import type { InputSchemas } from './input-schemas.ts';
import { findPatients, FIND_PATIENTS_SCHEMA, FIND_PATIENTS_TOOL, listedPatients, patientListing, quotedJson } from './find-patients.ts';
import { MCP_PATIENT_DATA_REFUSED, type McpPatientDataRule } from './mcp-patient-data.ts';
import { McpPatients, type NamedPatient } from './mcp-patients.ts';
import { PAGE_TOKEN_RESERVE, pageOffsetOf, pageTokenOf } from './page-token.ts';
import { patientSummary, SUMMARY_TEMPLATE, SUMMARY_TOOL, summaryUri } from './patient-summary.ts';

/** What the tools of one MCP request need: the caller, what the project shares, and where the records go. */
export interface McpToolScope {
  readonly caller: CallerContext;
  /** The types the project shares with AI clients; empty when it shares none. */
  readonly types: readonly PatientContextType[];
  readonly options: FhirToolsOptions;
  /** How the project's summary is built (its types are `types`). */
  readonly summary: PatientContextOptions;
  readonly rule: McpPatientDataRule;
  /** The server's de-identification key (`deIdentification.dateShiftKey`); `de-identify` answers nothing without it. */
  readonly dateShiftKey?: string;
  /** The project's system repository: a de-identified patient's identifiers are read whole, to be removed. */
  readonly systemRepo: () => Promise<FhirRepository>;
  /** Stores a disclosure's AuditEvent; resolves once it is stored. */
  readonly recordDisclosure: (event: AuditEvent) => Promise<void>;
  /** The MCP client as it named itself (clientInfo), when it did. */
  readonly client: () => { readonly name: string; readonly version: string } | undefined;
  /** The request's User-Agent, recorded when the client did not name itself in the request. */
  readonly userAgent?: string;
  readonly logger?: HostLogger;
  /** The process's compiled input schemas (built once, not per request). */
  readonly schemas: InputSchemas;
}

const PAGE_TOKEN = { type: 'string', description: 'The next_page of an earlier answer, to get the next page of the same search.' } as const;

/** Registers the tools and the summary resource on a server made for one request. */
export function registerMcpTools(server: McpServer, scope: McpToolScope): void {
  const patients = new McpPatients(scope.caller, scope.rule, scope.dateShiftKey, scope.systemRepo);
  const patientId = {
    type: 'string',
    description: scope.rule === 'de-identify' ? 'The handle of the patient, as find_patients gives it.' : 'The id of the Patient (find_patients gives it).',
  } as const;
  for (const definition of fhirToolDefinitions(scope.types, scope.options, 'argument')) {
    const parameters = definition.parameters as { properties: Record<string, unknown>; required: string[] };
    const paged: Record<string, typeof PAGE_TOKEN> = definition.name === SEARCH_TOOL ? { page_token: PAGE_TOKEN } : {};
    const inputSchema = scope.schemas.of({
      ...parameters,
      properties: { patient_id: patientId, ...parameters.properties, ...paged },
      required: ['patient_id', ...parameters.required],
    });
    server.registerTool(definition.name, { description: definition.description, inputSchema, annotations: { readOnlyHint: true } }, async (input) =>
      guarded(scope, () => runChartTool(scope, patients, definition.name, input))
    );
  }
  server.registerTool(
    FIND_PATIENTS_TOOL,
    {
      description: `Finds patients the requesting user may see, by name, birth date or identifier. Returns at most ${scope.options.maxResults} patients a page, with the patient_id the other tools take.`,
      inputSchema: scope.schemas.of(FIND_PATIENTS_SCHEMA),
      annotations: { readOnlyHint: true },
    },
    async (input) => guarded(scope, () => runFindPatients(scope, patients, input))
  );
  server.registerTool(
    SUMMARY_TOOL,
    {
      description: "Summarises a patient's chart: demographics, active problems, medications, allergies, recent vital signs and labs, with the requesting user's permissions.",
      inputSchema: scope.schemas.of({ type: 'object', properties: { patient_id: patientId }, required: ['patient_id'], additionalProperties: false }),
      annotations: { readOnlyHint: true },
    },
    async (input) =>
      guarded(scope, async () => {
        const named = await patients.resolve(input.patient_id);
        return typeof named === 'string' ? refused(named) : { content: [{ type: 'text', text: await summarise(scope, named) }] };
      })
  );
  // Nothing is listed: which patients a caller may see is find_patients' to answer, and on record when it does.
  server.registerResource(
    'patient-summary',
    new ResourceTemplate(SUMMARY_TEMPLATE, { list: undefined }),
    { description: `A patient's chart summary, as ${SUMMARY_TOOL} gives it; {id} is the patient_id find_patients gives.`, mimeType: 'text/plain' },
    async (uri, variables) => readSummaryResource(scope, patients, uri, variables.id)
  );
}

/** A chart tool's call: the patient as the caller may read it, then the chat's tool, then the record. */
async function runChartTool(scope: McpToolScope, patients: McpPatients, name: string, input: Record<string, unknown>): Promise<CallToolResult> {
  const { patient_id: patientId, page_token: pageToken, ...rest } = input;
  const named = await patients.resolve(patientId);
  if (typeof named === 'string') {
    return refused(named);
  }
  // A page is the search the client asked for, as it asked (its own pseudonyms and dates: the digest reveals nothing).
  const search = [name, patientId, rest];
  const offset = name === SEARCH_TOOL ? pageOffsetOf(pageToken, search) : 0;
  if (typeof offset === 'string') {
    return refused(offset);
  }
  const { patient, form } = named;
  const args = form.arguments(rest);
  if (args.reference === `Patient/${String(patientId)}`) {
    args.reference = `Patient/${patient.id}`;
  }
  const page = name === SEARCH_TOOL ? { page: { offset, reserve: PAGE_TOKEN_RESERVE } } : {};
  const result = await runFhirTool({ repo: scope.caller.repo, patient, types: scope.types, options: scope.options, ...page }, { id: name, name, arguments: JSON.stringify(args) });
  if (result.shared.length === 0 && isErrorText(result)) {
    return refused(form.text(errorOf(result)));
  }
  if (result.shared.length > 0) {
    const access = result.access?.kind === 'query' ? { kind: 'query' as const, query: result.access.query, toolCallId: name } : { kind: 'read' as const, toolCallId: name };
    await disclose(scope, named, result.shared, access);
  }
  const text = form.text(result.text);
  return answer(result.nextOffset === undefined ? text : withNextPage(text, pageTokenOf(search, result.nextOffset)));
}

/** `find_patients`: the page of patients found, each named as the client names it, each disclosure on record. */
async function runFindPatients(scope: McpToolScope, patients: McpPatients, input: Record<string, unknown>): Promise<CallToolResult> {
  const { page_token: pageToken, ...rest } = input;
  const search = [FIND_PATIENTS_TOOL, rest];
  const offset = pageOffsetOf(pageToken, search);
  if (typeof offset === 'string') {
    return refused(offset);
  }
  const found = await findPatients(scope.caller.repo, rest, { count: scope.options.maxResults, offset });
  if (typeof found === 'string') {
    return refused(found);
  }
  const entries = await Promise.all(found.patients.map(async (patient) => ({ patient, form: await patients.formOf(patient) })));
  const listings = entries.map(({ patient, form }) => ({ id: form.patientId, ...form.strings(patientListing(patient)) }));
  const listed = listedPatients(listings, scope.options.maxCharacters, { reserve: PAGE_TOKEN_RESERVE, moreMatched: found.moreMatched });
  for (const named of entries.slice(0, listed.fitted)) {
    await disclose(scope, named, [{ reference: `Patient/${named.patient.id}` }], { kind: 'query', query: found.query, toolCallId: FIND_PATIENTS_TOOL });
  }
  const more = listed.fitted < entries.length || found.moreMatched;
  return answer(more ? withNextPage(listed.text, pageTokenOf(search, offset + Math.max(1, listed.fitted))) : listed.text);
}

/** The summary as the client gets it, on record first. */
async function summarise(scope: McpToolScope, named: NamedPatient): Promise<string> {
  const summary = await patientSummary(scope.caller.repo, named, { ...scope.summary, resourceTypes: scope.types });
  await disclose(scope, named, summary.shared, { kind: 'summary' });
  return summary.text;
}

/** `resources/read` of a summary: refusals are the request's errors (a resource has no error result), saying why. */
async function readSummaryResource(scope: McpToolScope, patients: McpPatients, uri: URL, id: string | string[] | undefined): Promise<ReadResourceResult> {
  const answered = await guarded(scope, async () => {
    const named = await patients.resolve(typeof id === 'string' ? decodeURIComponent(id) : undefined);
    return typeof named === 'string' ? refused(named) : answer(await summarise(scope, named));
  });
  const text = answered.content.map((part) => (part.type === 'text' ? part.text : '')).join('');
  if (answered.isError) {
    throw new ProtocolError(ProtocolErrorCode.InvalidParams, text);
  }
  return { contents: [{ uri: typeof id === 'string' ? summaryUri(decodeURIComponent(id)) : uri.href, mimeType: 'text/plain', text }] };
}

/** Puts one disclosure on record: the user, the patient, the records, the MCP client as recipient, the form. */
async function disclose(scope: McpToolScope, named: { readonly patient: WithId<Patient>; readonly form: { readonly deIdentified: boolean } }, shared: readonly Reference[], access: Disclosure['access']): Promise<void> {
  const client = scope.client();
  const clientName = client ? `${client.name} ${client.version}` : `unnamed in this request (User-Agent: ${scope.userAgent ?? 'none'})`;
  const event = buildDisclosureEvent({
    caller: callerParty(scope.caller.profile) as Disclosure['caller'],
    agent: { display: MCP_SERVER_OBSERVER },
    // The name is the client's own, searchable as `agent-name` ("every disclosure to Claude Code"); the display says what it is.
    recipient: { who: { display: `${MCP_CLIENT_PREFIX}${clientName}` }, name: client ? clientName : undefined, text: `the MCP client ${clientName}, through fhirgate's MCP server` },
    patient: { reference: `Patient/${named.patient.id}` },
    shared,
    access,
    deIdentified: named.form.deIdentified,
  });
  await scope.recordDisclosure(event);
}

/** The project's rule first; a store that fails is a tool error without its details (they go to the log). */
async function guarded(scope: McpToolScope, run: () => Promise<CallToolResult>): Promise<CallToolResult> {
  if ((scope.rule !== 'allow' && scope.rule !== 'de-identify') || scope.types.length === 0) {
    return refused(MCP_PATIENT_DATA_REFUSED);
  }
  if (scope.rule === 'de-identify' && scope.dateShiftKey === undefined) {
    scope.logger?.error('fhirgate MCP: the project gives patient data de-identified, but the server has no de-identification key (deIdentification.dateShiftKey)');
    return refused("This project gives MCP clients patient data de-identified, but the server has no key to de-identify with (the plugin option deIdentification.dateShiftKey). Ask the server's operator.");
  }
  try {
    return await run();
  } catch (error) {
    scope.logger?.error('fhirgate MCP tool failed', { error: String(error) });
    return refused('The FHIR store could not answer; nothing was disclosed. Try again later.');
  }
}

/** A result's JSON with the token of its next page. */
function withNextPage(text: string, token: string): string {
  const value = JSON.parse(text) as Record<string, unknown>;
  return quotedJson({ ...value, next_page: token });
}

function answer(text: string): CallToolResult {
  return { content: [{ type: 'text', text }] };
}

function refused(message: string): CallToolResult {
  return { content: [{ type: 'text', text: message }], isError: true };
}

function isErrorText(result: FhirToolResult): boolean {
  return errorOf(result) !== '';
}

function errorOf(result: FhirToolResult): string {
  try {
    const value = JSON.parse(result.text) as { error?: unknown };
    return typeof value.error === 'string' ? value.error : '';
  } catch {
    return '';
  }
}
