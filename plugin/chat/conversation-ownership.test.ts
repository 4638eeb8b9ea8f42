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

describe('who continues a conversation: what is not a starter, and what is not the setting', () => {
  test('a party known only by its display, or by nothing, started no conversation: a name shown is not who wrote it', () => {
    expect(partyKey({ display: 'Dr Alice' })).toBeUndefined();
    expect(startedBy(root({ display: 'Dr Alice' }), { display: 'Dr Alice' })).toBe(false);
    expect(startedBy(root(undefined), {})).toBe(false);
    expect(startedBy(root({ identifier: { system: 'urn:fhirgate:caller' } }), { identifier: { system: 'urn:fhirgate:caller' } })).toBe(false);
  });

  test('a logical reference is told apart by its system as well as its value', () => {
    expect(startedBy(root({ identifier: { system: 'urn:a', value: 'x' } }), { identifier: { system: 'urn:b', value: 'x' } })).toBe(false);
    expect(startedBy(root({ identifier: { value: 'x' } }), { identifier: { value: 'x' } })).toBe(true);
  });

  test("only the project's AI_SHARED_CONVERSATIONS setting shares conversations, wherever it is among the others", () => {
    const others: ProjectSetting[] = [{ name: 'AI_PATIENT_DATA_POLICY', valueString: 'true' }, { name: 'OTHER', valueBoolean: true }];
    expect(sharesConversations(project(...others))).toBe(false);
    expect(sharesConversations(project(...others, { name: SHARED_CONVERSATIONS_SETTING, valueBoolean: true }))).toBe(true);
    expect(sharesConversations(project(...others, { name: SHARED_CONVERSATIONS_SETTING, valueString: 'false' }))).toBe(false);
  });

  test('the setting with no value, or with a value that is neither true nor false, is a 503 saying what it takes', () => {
    for (const setting of [{}, { valueString: '' }, { valueString: 'yes' }, { valueString: 'truefalse' }]) {
      let failure: unknown;
      try {
        sharesConversations(project({ name: SHARED_CONVERSATIONS_SETTING, ...setting }));
      } catch (error) {
        failure = error;
      }
      expect(AppError.isInstance(failure) && [failure.status, failure.code, failure.details]).toEqual([503, 'not_configured', { setting: SHARED_CONVERSATIONS_SETTING }]);
      expect((failure as Error).message).toContain(`${SHARED_CONVERSATIONS_SETTING} must be true or false`);
    }
  });

  test('the refusal names the conversation and the setting that would allow it; by default the field is conversation_id', () => {
    let refusal: unknown;
    try {
      requireMayContinue(root(ALICE), COLIN, project());
    } catch (error) {
      refusal = error;
    }
    expect(AppError.isInstance(refusal) && refusal.details).toEqual({ param: 'conversation_id' });
    expect(AppError.isInstance(refusal) && refusal.message).toContain("conversation 'c1' was started by another user");
    expect(AppError.isInstance(refusal) && refusal.message).toContain(SHARED_CONVERSATIONS_SETTING);
    expect(() => requireMayContinue(root(ALICE), COLIN, project(), 'previous_response_id')).toThrow(expect.objectContaining({ details: { param: 'previous_response_id' } }));
  });
});
