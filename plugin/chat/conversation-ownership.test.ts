import type { Communication, Project, ProjectSetting } from '@medplum/fhirtypes';
import { AppError } from '../errors.ts';
import { callerParty } from './caller-reference.ts';
import { mayContinue, partyKey, requireMayContinue, sharesConversations, startedBy, SHARED_CONVERSATIONS_SETTING } from './conversation-ownership.ts';

const project = (...setting: ProjectSetting[]): Project => ({ resourceType: 'Project', id: 'p1', setting });
const root = (sender: Communication['sender']): Communication & { id: string } => ({ resourceType: 'Communication', id: 'c1', status: 'in-progress', sender });
const ALICE = { reference: 'Practitioner/alice' };
const COLIN = { reference: 'Practitioner/colin' };

describe('who continues a conversation', () => {
  test('its starter, by the root\'s sender; a caller recorded as a logical reference too', () => {
    expect(startedBy(root(ALICE), ALICE)).toBe(true);
    expect(startedBy(root(ALICE), COLIN)).toBe(false);
    expect(startedBy(root(undefined), ALICE)).toBe(false);
    const client = callerParty({ reference: 'ClientApplication/app' });
    expect(partyKey(client)).toBe('urn:fhirgate:caller|ClientApplication/app');
    expect(startedBy(root(client as Communication['sender']), callerParty({ reference: 'ClientApplication/app' }))).toBe(true);
    expect(startedBy(root(client as Communication['sender']), callerParty({ reference: 'ClientApplication/other' }))).toBe(false);
  });

  test('others only in a project that shares conversations', () => {
    expect(sharesConversations(project())).toBe(false);
    expect(mayContinue(root(ALICE), COLIN, project())).toBe(false);
    for (const setting of [{ valueBoolean: true }, { valueString: 'true' }, { valueString: ' TRUE ' }]) {
      expect(mayContinue(root(ALICE), COLIN, project({ name: SHARED_CONVERSATIONS_SETTING, ...setting }))).toBe(true);
    }
    for (const setting of [{ valueBoolean: false }, { valueString: 'false' }]) {
      expect(sharesConversations(project({ name: SHARED_CONVERSATIONS_SETTING, ...setting }))).toBe(false);
    }
  });

  test('a refusal is 403 conversation_not_owned naming the field; a setting that does not parse is a 503 naming it', () => {
    let refusal: unknown;
    try {
      requireMayContinue(root(ALICE), COLIN, project(), 'conversation_id');
    } catch (error) {
      refusal = error;
    }
    expect(AppError.isInstance(refusal) && [refusal.status, refusal.code, refusal.details?.param]).toEqual([403, 'conversation_not_owned', 'conversation_id']);
    expect(() => requireMayContinue(root(ALICE), ALICE, project({ name: SHARED_CONVERSATIONS_SETTING, valueString: 'maybe' }))).not.toThrow();
    expect(() => sharesConversations(project({ name: SHARED_CONVERSATIONS_SETTING, valueString: 'maybe' }))).toThrow(expect.objectContaining({ code: 'not_configured', details: { setting: SHARED_CONVERSATIONS_SETTING } }));
  });
});
