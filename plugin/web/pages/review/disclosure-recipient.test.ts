import type { AuditEvent, Communication } from '@medplum/fhirtypes';
import { buildDisclosureEvent, type Disclosure } from '../../../chat/disclosure-audit.ts';
import { conversationOfReply, disclosureRecipientOf, modelOfReply } from './disclosure-recipient.ts';

const CALLER = { reference: 'Practitioner/carter' } as Disclosure['caller'];
const PATIENT = { reference: 'Patient/maria' };

/** A disclosure to an MCP client, as fhirgate's MCP server records it (plugin/mcp/mcp-tools.ts). */
function mcpDisclosure(named: string, access: Disclosure['access']): AuditEvent {
  return buildDisclosureEvent({
    caller: CALLER,
    agent: { display: 'fhirgate MCP server' },
    recipient: { who: { display: `MCP client: ${named}` }, text: `the MCP client ${named}, through fhirgate's MCP server` },
    patient: PATIENT,
    shared: [PATIENT, { reference: 'Observation/k' }],
    access,
  });
}

describe('where a disclosure sent the records', () => {
  test("an MCP client's: the client as it named itself and the tool it called", () => {
    const search = mcpDisclosure('Claude Code 2.1.0', { kind: 'query', query: 'Observation?patient=maria', toolCallId: 'search_patient_records' });
    expect(disclosureRecipientOf(search)).toEqual({ kind: 'mcp', client: 'Claude Code 2.1.0', tool: 'search_patient_records' });
    const read = mcpDisclosure('unnamed in this request (User-Agent: node)', { kind: 'read', toolCallId: 'read_record' });
    expect(disclosureRecipientOf(read)).toEqual({ kind: 'mcp', client: 'unnamed in this request (User-Agent: node)', tool: 'read_record' });
    const summary = mcpDisclosure('Cursor 1.7.2', { kind: 'summary' });
    expect(disclosureRecipientOf(summary)).toEqual({ kind: 'mcp', client: 'Cursor 1.7.2', tool: 'get_patient_summary' });
  });

  test("the chat's: the AI model, for the reply it was sent for", () => {
    const event = buildDisclosureEvent({ caller: CALLER, agent: { reference: 'Device/agent', display: 'fhirgate AI agent' }, patient: PATIENT, shared: [PATIENT], replyId: 'r1', access: { kind: 'summary' } });
    expect(disclosureRecipientOf(event)).toEqual({ kind: 'model', reply: 'Communication/r1' });
  });

  test('a reply names its model in its medium, or in its extension when stored before that, and its conversation', () => {
    const reply: Communication = {
      resourceType: 'Communication',
      status: 'completed',
      partOf: [{ reference: 'Communication/root' }],
      medium: [{ coding: [{ system: 'urn:fhirgate:ai-model', code: 'openai/gpt-4o-mini' }] }],
    };
    expect(modelOfReply(reply)).toBe('openai/gpt-4o-mini');
    expect(conversationOfReply(reply)).toBe('root');
    expect(modelOfReply({ ...reply, medium: undefined, extension: [{ url: 'urn:fhirgate:extension:model', valueString: 'other/gpt-4o-mini' }] })).toBe('other/gpt-4o-mini');
    expect(modelOfReply({ ...reply, medium: undefined })).toBeUndefined();
  });
});
