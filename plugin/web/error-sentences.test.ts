import { FhirgateError } from './fhirgate-api.ts';
import { errorSentence } from './error-sentences.ts';

const WHEN: Intl.DateTimeFormatOptions = { dateStyle: 'medium', timeStyle: 'short' };

describe('errorSentence', () => {
  it('says a used-up budget’s scope and when it resets, with no retry', () => {
    const now = new Date('2026-03-01T22:00:00Z');
    const sentence = errorSentence(new FhirgateError(429, 'Budget exceeded', 'budget_exceeded_user_day', 7200), { now });
    expect(sentence.title).toBe('Budget used up');
    expect(sentence.message).toContain('Your AI budget for today is used up.');
    expect(sentence.message).toContain(new Date('2026-03-02T00:00:00Z').toLocaleString(undefined, WHEN));
    expect(sentence.retry).toBe(false);
  });

  it('reads the reset time the server’s message names, exactly, before a rounded Retry-After', () => {
    const message = 'Your monthly token budget (10 tokens, AI_BUDGET_PROJECT_MONTH_TOKENS) is used up; it resets at 2026-04-01T00:00:00Z.';
    const sentence = errorSentence(new FhirgateError(429, message, 'budget_exceeded_project_month', 59), { now: new Date('2026-03-31T23:59:00.400Z') });
    expect(sentence.message).toBe(`Your project’s AI budget for this month is used up. It resets ${new Date('2026-04-01T00:00:00Z').toLocaleString(undefined, WHEN)}.`);
  });

  it('offers a retry when a budget is only held by replies still running', () => {
    const message = 'Your daily token budget (10 tokens, AI_BUDGET_USER_DAY_TOKENS) is taken up by the turns still running; retry once they end.';
    expect(errorSentence(new FhirgateError(429, message, 'budget_exceeded_user_day', 5))).toMatchObject({ title: 'Budget in use', retry: true });
  });

  it('names the models the project allows instead of one not cleared for patient data', () => {
    const sentence = errorSentence(new FhirgateError(403, 'The model x is not cleared.', 'patient_data_not_allowed'), { aboutPatient: true, patientDataModels: ['openai/gpt-4o', 'ollama/llama3.2'] });
    expect(sentence).toMatchObject({ title: 'Model not cleared for patient data', retry: false });
    expect(sentence.message).toContain('openai/gpt-4o, ollama/llama3.2');
    expect(errorSentence(new FhirgateError(403, 'x', 'patient_data_not_allowed'), { patientDataModels: [] }).message).toContain('ask without choosing a patient');
  });

  it('says a patient is outside the user’s care when a turn about a patient is refused', () => {
    expect(errorSentence(new FhirgateError(403, 'Forbidden', 'forbidden'), { aboutPatient: true })).toMatchObject({ title: 'Patient outside your care', retry: false });
    expect(errorSentence(new FhirgateError(403, 'Forbidden', 'forbidden')).title).toBe('Not allowed');
  });

  it('offers a retry when the provider is down, never a raw body', () => {
    expect(errorSentence(new FhirgateError(500, 'x', 'upstream_error'))).toMatchObject({ title: 'The AI model is not answering', retry: true });
    expect(errorSentence(new FhirgateError(500, '{"stack":"..."}', 'internal_error')).message).not.toContain('stack');
    expect(errorSentence(new TypeError('Failed to fetch'))).toMatchObject({ retry: true });
  });
});
