import { AppError } from '../errors.ts';
import { unionSubject, type SubjectSource, type TurnSubject } from './turn-subject.ts';

const MARIA = 'Patient/maria';
const JAMES = 'Patient/james';
const conversation = (patient: string): SubjectSource => ({ patient, param: 'conversation_id', what: 'the conversation' });
const item = (patient: string, index: number): SubjectSource => ({ patient, param: `input.${index}.id`, what: 'the referenced item' });
const requested: TurnSubject = { reference: { reference: MARIA }, patient: { resourceType: 'Patient', id: 'maria' } };

function refusal(run: () => unknown): AppError {
  try {
    run();
  } catch (error) {
    if (AppError.isInstance(error)) {
      return error;
    }
    throw error;
  }
  throw new Error('not refused');
}

describe('the patient of a turn', () => {
  test('is the one patient_id names, the patient of what the turn takes in when it names none, and none when nothing is about a patient', () => {
    expect(unionSubject(undefined, [])).toBeUndefined();
    expect(unionSubject(requested, [conversation(MARIA), item(MARIA, 0)])).toBe(requested);
    expect(unionSubject(undefined, [item(MARIA, 2)])).toEqual({ reference: { reference: MARIA } });
    expect(unionSubject(undefined, [conversation(MARIA), item(MARIA, 0), item(MARIA, 1)])).toEqual({ reference: { reference: MARIA } });
  });

  test('a second patient is a 400 naming the field that brought it', () => {
    const afterPatientId = refusal(() => unionSubject(requested, [item(JAMES, 3)]));
    expect([afterPatientId.status, afterPatientId.details?.param]).toEqual([400, 'input.3.id']);
    expect(afterPatientId.message).toContain('the referenced item is about another patient than patient_id names');

    const conversationAfterPatientId = refusal(() => unionSubject(requested, [conversation(JAMES)]));
    expect(conversationAfterPatientId.details?.param).toBe('patient_id');

    const itemAfterConversation = refusal(() => unionSubject(undefined, [conversation(MARIA), item(JAMES, 0)]));
    expect(itemAfterConversation.details?.param).toBe('input.0.id');
    expect(itemAfterConversation.message).toContain('than the conversation is about');

    const twoItems = refusal(() => unionSubject(undefined, [item(MARIA, 0), item(JAMES, 1)]));
    expect(twoItems.details?.param).toBe('input.1.id');

    const conversationOfTwo = refusal(() => unionSubject(undefined, [conversation(MARIA), conversation(JAMES)]));
    expect([conversationOfTwo.details?.param, conversationOfTwo.message]).toEqual(['conversation_id', expect.stringContaining('the conversation is about more than one patient')]);
  });

  test('the refusal names no patient', () => {
    const error = refusal(() => unionSubject(undefined, [item(MARIA, 0), item(JAMES, 1)]));
    expect(error.message).not.toMatch(/maria|james/);
  });
});
