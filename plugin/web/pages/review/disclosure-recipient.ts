/**
 * Where a disclosure sent a patient's records, read from its AuditEvent (plugin/chat/disclosure-audit.ts): to the
 * chat's AI model, for a reply fhirgate stored (its `3` Report entity), or to an MCP client (plugin/mcp/), which the
 * event names as its recipient agent (`MCP client: <name> <version>`, as the client declared itself) with no reply,
 * the tool it called being in the description. A chat reply records the model that wrote it.
 */
import type { AuditEvent, Communication } from '@medplum/fhirtypes';
import { EXTENSION, MODEL_MEDIUM_SYSTEM } from '../../../chat/fhir-vocabulary.ts';
import { repliesOf } from './export-bundle.ts';

/** Where a disclosure's records went. */
export type DisclosureRecipient =
  /** The chat's AI model, for the reply named (absent on an event that names none it may show). */
  | { readonly kind: 'model'; readonly reply?: string }
  /** An MCP client: its declared name and version, and the tool it called (when the description names it). */
  | { readonly kind: 'mcp'; readonly client: string; readonly tool?: string };

/** How fhirgate's MCP server names the client in a disclosure's recipient agent. */
const MCP_CLIENT_PREFIX = 'MCP client: ';
/** The observer of an MCP client's disclosure. */
const MCP_SERVER = 'fhirgate MCP server';
/** The start of an MCP tool's description: `FHIR tool <tool> (search|read) answered for ...`. */
const TOOL_DESCRIPTION = /^FHIR tool (\S+) \((?:search|read)\) answered for /;

/** Where `event`'s records went. */
export function disclosureRecipientOf(event: AuditEvent): DisclosureRecipient {
  const recipient = event.agent.find((agent) => agent.requestor === false)?.who?.display ?? '';
  if (recipient.startsWith(MCP_CLIENT_PREFIX) || event.source.observer.display === MCP_SERVER) {
    const client = recipient.startsWith(MCP_CLIENT_PREFIX) ? recipient.slice(MCP_CLIENT_PREFIX.length) : 'unnamed';
    return { kind: 'mcp', client, tool: TOOL_DESCRIPTION.exec(event.outcomeDesc ?? '')?.[1] };
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
