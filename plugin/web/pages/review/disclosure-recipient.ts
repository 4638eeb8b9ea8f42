/**
 * Where a disclosure sent a patient's records, read from its AuditEvent (plugin/chat/disclosure-audit.ts): to the
 * chat's AI model, for a reply fhirgate stored (its `3` Report entity), or to an MCP client (plugin/mcp/), which the
 * event names as its recipient agent (`MCP client: <name> <version>`, as the client declared itself) with no reply,
 * the tool it called being in the description. A chat reply records the model that wrote it.
 */
import type { AuditEvent, Communication } from '@medplum/fhirtypes';
import { EXTENSION, MCP_CLIENT_PREFIX, MCP_SERVER_OBSERVER as MCP_SERVER, MCP_SUMMARY_TOOL as SUMMARY_TOOL, MODEL_MEDIUM_SYSTEM } from '../../../chat/fhir-vocabulary.ts';
import { repliesOf } from './export-bundle.ts';

/** Where a disclosure's records went. */
export type DisclosureRecipient =
  /** The chat's AI model, for the reply named (absent on an event that names none it may show). */
  | { readonly kind: 'model'; readonly reply?: string }
  /** An MCP client: its declared name and version, and the tool it called (when the description names it). */
  | { readonly kind: 'mcp'; readonly client: string; readonly tool?: string };

/** The start of an MCP tool's description: `FHIR tool <tool> (search|read) answered for ...`. */
const TOOL_DESCRIPTION = /^FHIR tool (\S+) \((?:search|read)\) answered for /;
/** The start of the summary tool's (or resource's) description. */
const SUMMARY_DESCRIPTION = /^Patient summary answered for /;

/** Where `event`'s records went. */
export function disclosureRecipientOf(event: AuditEvent): DisclosureRecipient {
  const recipient = event.agent.find((agent) => agent.requestor === false)?.who?.display ?? '';
  if (recipient.startsWith(MCP_CLIENT_PREFIX) || event.source.observer.display === MCP_SERVER) {
    const client = recipient.startsWith(MCP_CLIENT_PREFIX) ? recipient.slice(MCP_CLIENT_PREFIX.length) : 'unnamed';
    const description = event.outcomeDesc ?? '';
    return { kind: 'mcp', client, tool: TOOL_DESCRIPTION.exec(description)?.[1] ?? (SUMMARY_DESCRIPTION.test(description) ? SUMMARY_TOOL : undefined) };
  }
  return { kind: 'model', reply: repliesOf([event])[0] };
}

/** The model that wrote a reply (`provider/model`): its `medium`, or for a reply stored before that, its extension. */
export function modelOfReply(reply: Communication): string | undefined {
  const medium = reply.medium?.flatMap((concept) => concept.coding ?? []).find((coding) => coding.system === MODEL_MEDIUM_SYSTEM)?.code;
  return medium ?? reply.extension?.find((extension) => extension.url === EXTENSION.model)?.valueString;
}

/** The id of the conversation a reply belongs to (its `partOf`, the conversation's root). */
export function conversationOfReply(reply: Communication): string | undefined {
  return reply.partOf?.[0]?.reference?.split('/')[1];
}
