/**
 * The MCP server's tools: the chat's FHIR tools (chat/fhir-tools.ts), with the patient named by the client rather
 * than set by a turn, and `find_patients`. Each runs with the caller's repository, so the caller's AccessPolicy
 * decides what is read, exactly as in the chat. A refusal (the project's rule for MCP clients, a patient the caller
 * may not read, bad input) is a tool error that says why; every result that holds records of a patient is on record
 * (an AuditEvent naming the user, the patient, the records and the MCP client) before the client is given it.
 */
import { type WithId } from '@medplum/core';
import type { AuditEvent, Patient, Reference } from '@medplum/fhirtypes';
import { fromJsonSchema, type CallToolResult, type McpServer } from '@modelcontextprotocol/server';
import type { CallerContext, HostLogger } from '../host.ts';
import { callerParty } from '../chat/caller-reference.ts';
import { buildDisclosureEvent, type Disclosure } from '../chat/disclosure-audit.ts';
import { fhirToolDefinitions, runFhirTool, type FhirToolResult, type FhirToolsOptions } from '../chat/fhir-tools.ts';
import type { PatientContextType } from '../chat/patient-context.ts';
import { isOutcomeStatus } from '../medplum-errors.ts';
import { findPatients, FIND_PATIENTS_SCHEMA, FIND_PATIENTS_TOOL } from './find-patients.ts';
import { MCP_PATIENT_DATA_REFUSED, type McpPatientDataRule } from './mcp-patient-data.ts';

/** What the tools of one MCP request need: the caller, what the project shares, and where the records go. */
export interface McpToolScope {
  readonly caller: CallerContext;
  /** The types the project shares with AI clients; empty when it shares none. */
  readonly types: readonly PatientContextType[];
  readonly options: FhirToolsOptions;
  readonly rule: McpPatientDataRule;
  /** Stores a disclosure's AuditEvent; resolves once it is stored. */
  readonly recordDisclosure: (event: AuditEvent) => Promise<void>;
  /** The MCP client as it named itself (clientInfo), when it did. */
  readonly client: () => { readonly name: string; readonly version: string } | undefined;
  /** The request's User-Agent, recorded when the client did not name itself in the request. */
  readonly userAgent?: string;
  readonly logger?: HostLogger;
}

const PATIENT_ID = { type: 'string', description: 'The id of the Patient (find_patients gives it).' } as const;

/** Registers the tools on a server made for one request. */
export function registerMcpTools(server: McpServer, scope: McpToolScope): void {
  for (const definition of fhirToolDefinitions(scope.types, scope.options)) {
    const parameters = definition.parameters as { properties: Record<string, unknown>; required: string[] };
    const inputSchema = fromJsonSchema<Record<string, unknown>>({
      ...parameters,
      properties: { patient_id: PATIENT_ID, ...parameters.properties },
      required: ['patient_id', ...parameters.required],
    });
    const description = (definition.description ?? '').replaceAll("the current patient's", "a patient's").replace('The patient is set by the server. ', '');
    server.registerTool(definition.name, { description, inputSchema, annotations: { readOnlyHint: true } }, async (input) =>
      guarded(scope, () => runChartTool(scope, definition.name, input))
    );
  }
  server.registerTool(
    FIND_PATIENTS_TOOL,
    {
      description: `Finds patients the requesting user may see, by name, birth date or identifier. Returns at most ${scope.options.maxResults} patients with their ids.`,
      inputSchema: fromJsonSchema<Record<string, unknown>>(FIND_PATIENTS_SCHEMA),
      annotations: { readOnlyHint: true },
    },
    async (input) =>
      guarded(scope, async () => {
        const found = await findPatients(scope.caller.repo, input, scope.options.maxResults);
        if (typeof found === 'string') {
          return refused(found);
        }
        for (const patient of found.patients) {
          await disclose(scope, patient, [{ reference: `Patient/${patient.id}` }], { kind: 'query', query: found.query, toolCallId: FIND_PATIENTS_TOOL });
        }
        return { content: [{ type: 'text', text: found.text }] };
      })
  );
}

/** A chart tool's call: the patient as the caller may read it, then the chat's tool, then the record. */
async function runChartTool(scope: McpToolScope, name: string, input: Record<string, unknown>): Promise<CallToolResult> {
  const { patient_id: patientId, ...rest } = input;
  const patient = await readPatient(scope, patientId);
  if (typeof patient === 'string') {
    return refused(patient);
  }
  const result = await runFhirTool({ repo: scope.caller.repo, patient, types: scope.types, options: scope.options }, { id: name, name, arguments: JSON.stringify(rest) });
  if (result.shared.length === 0) {
    return isErrorText(result) ? refused(errorOf(result)) : { content: [{ type: 'text', text: result.text }] };
  }
  const access = result.access?.kind === 'query' ? { kind: 'query' as const, query: result.access.query, toolCallId: name } : { kind: 'read' as const, toolCallId: name };
  await disclose(scope, patient, result.shared, access);
  return { content: [{ type: 'text', text: result.text }] };
}

async function readPatient(scope: McpToolScope, patientId: unknown): Promise<WithId<Patient> | string> {
  if (typeof patientId !== 'string' || !/^[A-Za-z0-9\-.]{1,64}$/.test(patientId)) {
    return 'patient_id must be the id of a Patient, e.g. from find_patients.';
  }
  try {
    return await scope.caller.repo.readResource<Patient>('Patient', patientId);
  } catch (error) {
    if (isOutcomeStatus(error, 403, 404, 410)) {
      return `Patient/${patientId} is not a patient the requesting user may see.`;
    }
    throw error;
  }
}

/** Puts one disclosure on record: the user, the patient, the records, the MCP client as recipient. */
async function disclose(scope: McpToolScope, patient: WithId<Patient>, shared: readonly Reference[], access: Disclosure['access']): Promise<void> {
  const client = scope.client();
  const named = client ? `${client.name} ${client.version}` : `unnamed in this request (User-Agent: ${scope.userAgent ?? 'none'})`;
  const event = buildDisclosureEvent({
    caller: callerParty(scope.caller.profile) as Disclosure['caller'],
    agent: { display: 'fhirgate MCP server' },
    recipient: { who: { display: `MCP client: ${named}` }, text: `the MCP client ${named}, through fhirgate's MCP server` },
    patient: { reference: `Patient/${patient.id}` },
    shared,
    access,
  });
  await scope.recordDisclosure(event);
}

/** The project's rule first; a store that fails is a tool error without its details (they go to the log). */
async function guarded(scope: McpToolScope, run: () => Promise<CallToolResult>): Promise<CallToolResult> {
  if (scope.rule !== 'allow' || scope.types.length === 0) {
    return refused(MCP_PATIENT_DATA_REFUSED);
  }
  try {
    return await run();
  } catch (error) {
    scope.logger?.error('fhirgate MCP tool failed', { error: String(error) });
    return refused('The FHIR store could not answer; nothing was disclosed. Try again later.');
  }
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
