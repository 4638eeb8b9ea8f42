import type { AuditEvent, Reference } from '@medplum/fhirtypes';
import { buildDisclosureEvent, PSEUDONYMIZED, type Disclosure } from './disclosure-audit.ts';

const CALLER = { reference: 'Practitioner/alice', display: 'Alice Smith' };
const AGENT = { reference: 'Device/agent', display: 'fhirgate AI agent' };
const PATIENT = { reference: 'Patient/p1' };
const OBSERVATION = { reference: 'Observation/o1' };
const CONDITION = { reference: 'Condition/c1' };

function disclosure(overrides: Partial<Disclosure>): Disclosure {
  return { caller: CALLER, agent: AGENT, patient: PATIENT, shared: [PATIENT, OBSERVATION], replyId: 'reply-1', access: { kind: 'summary' }, ...overrides };
}

/** The entity of `event` whose role has `code` (object-role), each one. */
function entitiesWithRole(event: AuditEvent, code: string): NonNullable<AuditEvent['entity']> {
  return (event.entity ?? []).filter((entity) => entity.role?.code === code);
}

function whats(entities: NonNullable<AuditEvent['entity']>): (Reference | undefined)[] {
  return entities.map((entity) => entity.what);
}

describe('the AuditEvent of a disclosure to the model', () => {
  test('the patient summary: a search-type query by the caller, received by the AI agent, about the patient, for the reply', () => {
    const event = buildDisclosureEvent(disclosure({}));
    expect(event.resourceType).toBe('AuditEvent');
    expect(event.type).toEqual({ system: 'http://terminology.hl7.org/CodeSystem/audit-event-type', code: 'rest', display: 'RESTful Operation' });
    expect(event.subtype).toEqual([{ system: 'http://hl7.org/fhir/restful-interaction', code: 'search-type', display: 'search type' }]);
    expect(event.action).toBe('E');
    expect(event.outcome).toBe('0');
    expect(event.purposeOfEvent).toEqual([{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/v3-ActReason', code: 'TREAT', display: 'treatment' }] }]);
    expect(event.agent).toEqual([
      { who: CALLER, requestor: true },
      { who: AGENT, requestor: false, type: { text: 'recipient: the AI model, through fhirgate' } },
    ]);
    expect(event.source).toEqual({ observer: AGENT });
    expect(event.outcomeDesc).toBe('Patient context sent to the AI model for reply Communication/reply-1: 2 records');
  });

  test('`recorded` is the time the event was built', () => {
    const before = Date.now();
    const event = buildDisclosureEvent(disclosure({}));
    const recorded = Date.parse(event.recorded);
    expect(recorded).toBeGreaterThanOrEqual(before - 1);
    expect(recorded).toBeLessThanOrEqual(Date.now() + 1);
  });

  test('the patient is the patient entity once, each other record shared a domain resource, the reply a report', () => {
    const event = buildDisclosureEvent(disclosure({ shared: [PATIENT, OBSERVATION, CONDITION] }));
    expect(entitiesWithRole(event, '1')).toEqual([{ what: PATIENT, role: { system: 'http://terminology.hl7.org/CodeSystem/object-role', code: '1', display: 'Patient' } }]);
    expect(entitiesWithRole(event, '4')).toEqual([
      { what: OBSERVATION, role: { system: 'http://terminology.hl7.org/CodeSystem/object-role', code: '4', display: 'Domain Resource' } },
      { what: CONDITION, role: { system: 'http://terminology.hl7.org/CodeSystem/object-role', code: '4', display: 'Domain Resource' } },
    ]);
    expect(entitiesWithRole(event, '3')).toEqual([{ what: { reference: 'Communication/reply-1' }, role: { system: 'http://terminology.hl7.org/CodeSystem/object-role', code: '3', display: 'Report' } }]);
    // No query entity for the summary: it is not a tool's search.
    expect(entitiesWithRole(event, '24')).toEqual([]);
    expect(event.entity).toHaveLength(4);
  });

  test('a record counts in the description with its patient; one record is "1 record"', () => {
    expect(buildDisclosureEvent(disclosure({ shared: [PATIENT] })).outcomeDesc).toBe('Patient context sent to the AI model for reply Communication/reply-1: 1 record');
    expect(buildDisclosureEvent(disclosure({ shared: [OBSERVATION, CONDITION, PATIENT] })).outcomeDesc).toMatch(/: 3 records$/);
  });

  test("a FHIR tool's search: the query, base64 encoded, as the query entity; the tool call named", () => {
    const query = 'Observation?patient=Patient/p1&code=8867-4';
    const event = buildDisclosureEvent(disclosure({ access: { kind: 'query', query, toolCallId: 'call_7' } }));
    expect(event.subtype?.[0]?.code).toBe('search-type');
    expect(event.action).toBe('E');
    const [queryEntity] = entitiesWithRole(event, '24');
    expect(queryEntity).toEqual({
      type: { system: 'http://terminology.hl7.org/CodeSystem/audit-entity-type', code: '2', display: 'System Object' },
      role: { system: 'http://terminology.hl7.org/CodeSystem/object-role', code: '24', display: 'Query' },
      query: Buffer.from(query, 'utf8').toString('base64'),
    });
    expect(Buffer.from(queryEntity?.query ?? '', 'base64').toString('utf8')).toBe(query);
    expect(event.outcomeDesc).toBe('FHIR tool call call_7 (search) answered for the AI model for reply Communication/reply-1: 2 records');
  });

  test("a FHIR tool's read: a read, action R, no query entity", () => {
    const event = buildDisclosureEvent(disclosure({ shared: [OBSERVATION], access: { kind: 'read', toolCallId: 'call_8' } }));
    expect(event.subtype).toEqual([{ system: 'http://hl7.org/fhir/restful-interaction', code: 'read', display: 'read' }]);
    expect(event.action).toBe('R');
    expect(entitiesWithRole(event, '24')).toEqual([]);
    expect(event.outcomeDesc).toBe('FHIR tool call call_8 (read) answered for the AI model for reply Communication/reply-1: 1 record');
  });

  test("the records a request named (item_reference): a read, described as the request's", () => {
    const event = buildDisclosureEvent(disclosure({ access: { kind: 'input' } }));
    expect(event.subtype?.[0]?.code).toBe('read');
    expect(event.action).toBe('R');
    expect(event.outcomeDesc).toBe('Records about the patient named by the request (item_reference) sent to the AI model for reply Communication/reply-1: 2 records');
  });

  test('de-identified: the patient and each record labelled pseudonymised, the description names the form; the reply and query unlabelled', () => {
    const event = buildDisclosureEvent(disclosure({ deIdentified: true, access: { kind: 'query', query: 'Observation?patient=Patient/p1', toolCallId: 'c' } }));
    expect(entitiesWithRole(event, '1')[0]?.securityLabel).toEqual([PSEUDONYMIZED]);
    expect(entitiesWithRole(event, '4')[0]?.securityLabel).toEqual([PSEUDONYMIZED]);
    expect(entitiesWithRole(event, '3')[0]?.securityLabel).toBeUndefined();
    expect(entitiesWithRole(event, '24')[0]?.securityLabel).toBeUndefined();
    expect(PSEUDONYMIZED).toEqual({ system: 'http://terminology.hl7.org/CodeSystem/v3-ObservationValue', code: 'PSEUDED', display: 'pseudonymized' });
    expect(event.outcomeDesc).toBe(
      'FHIR tool call c (search) answered for the AI model for reply Communication/reply-1: 2 records, de-identified (names, identifiers, contact details and addresses replaced by pseudonyms, dates shifted)',
    );
  });

  test('not de-identified: no entity carries a label', () => {
    for (const deIdentified of [false, undefined]) {
      const event = buildDisclosureEvent(disclosure({ deIdentified }));
      expect((event.entity ?? []).filter((entity) => 'securityLabel' in entity)).toEqual([]);
      expect(event.outcomeDesc).not.toMatch(/de-identified/);
    }
  });
});

describe('a disclosure with no reply: an MCP client the recipient', () => {
  const recipient = { who: { reference: 'Device/mcp-client' }, text: 'Claude Desktop (MCP client)', name: 'claude-desktop' };

  test('the client is the recipient agent by its own name, fhirgate the observer; no report entity', () => {
    const event = buildDisclosureEvent(disclosure({ replyId: undefined, recipient }));
    expect(event.agent).toEqual([
      { who: CALLER, requestor: true },
      { who: recipient.who, name: 'claude-desktop', requestor: false, type: { text: 'recipient: Claude Desktop (MCP client)' } },
    ]);
    expect(event.source).toEqual({ observer: AGENT });
    expect(entitiesWithRole(event, '3')).toEqual([]);
    // The patient and the record shared: nothing else.
    expect(event.entity?.map((entity) => entity.what)).toStrictEqual([PATIENT, OBSERVATION]);
    expect(event.outcomeDesc).toBe('Patient summary answered for Claude Desktop (MCP client): 2 records');
  });

  test("a tool's search and read answered for the client, each naming the tool call", () => {
    const search = buildDisclosureEvent(disclosure({ replyId: undefined, recipient, access: { kind: 'query', query: 'Condition?patient=Patient/p1', toolCallId: 'search_conditions' } }));
    expect(search.outcomeDesc).toBe('FHIR tool search_conditions (search) answered for Claude Desktop (MCP client): 2 records');
    const read = buildDisclosureEvent(disclosure({ replyId: undefined, recipient, shared: [OBSERVATION], access: { kind: 'read', toolCallId: 'read_record' } }));
    expect(read.outcomeDesc).toBe('FHIR tool read_record (read) answered for Claude Desktop (MCP client): 1 record');
  });

  test('without a named recipient the description says "a client"', () => {
    expect(buildDisclosureEvent(disclosure({ replyId: undefined })).outcomeDesc).toBe('Patient summary answered for a client: 2 records');
    expect(buildDisclosureEvent(disclosure({ replyId: undefined, access: { kind: 'read', toolCallId: 't' } })).outcomeDesc).toBe('FHIR tool t (read) answered for a client: 2 records');
  });
});
