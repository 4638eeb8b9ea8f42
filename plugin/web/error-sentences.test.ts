import { FhirgateError } from './fhirgate-api.ts';
import { errorSentence } from './error-sentences.ts';

describe('errorSentence', () => {
  it('says a used-up budget’s scope and when it resets, with no retry', () => {
    const now = new Date('2026-03-01T22:00:00Z');
    const sentence = errorSentence(new FhirgateError(429, 'Budget exceeded', 'budget_exceeded_user_day', 7200), now);
    expect(sentence.title).toBe('Budget used up');
    expect(sentence.message).toContain('Your AI budget for today is used up.');
    expect(sentence.message).toContain(new Date('2026-03-02T00:00:00Z').toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'short' }));
    expect(sentence.retry).toBe(false);
  });

  it('offers a retry when the provider is down, and none for a model not cleared', () => {
    expect(errorSentence(new FhirgateError(500, 'x', 'upstream_error'))).toMatchObject({ title: 'The AI model is not answering', retry: true });
    expect(errorSentence(new FhirgateError(403, 'The model x is not cleared.', 'patient_data_not_allowed'))).toMatchObject({ title: 'Model not cleared for patient data', retry: false });
    expect(errorSentence(new TypeError('Failed to fetch'))).toMatchObject({ retry: true });
  });
});
