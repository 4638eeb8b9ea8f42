/**
 * What went wrong, as a clinician reads it: the spec's error `code`s of fhirgate's routes mapped to sentences,
 * with when a used-up budget resets and whether trying again can help. Never a raw body.
 */
import { FhirgateError } from './fhirgate-api.ts';

export interface ErrorSentence {
  readonly title: string;
  readonly message: string;
  /** Whether sending the same message again may work (a provider down, the server busy). */
  readonly retry: boolean;
}

const BUDGETS: Readonly<Record<string, string>> = {
  budget_exceeded_user_day: 'Your AI budget for today is used up.',
  budget_exceeded_user_month: 'Your AI budget for this month is used up.',
  budget_exceeded_project_day: 'Your project’s AI budget for today is used up.',
  budget_exceeded_project_month: 'Your project’s AI budget for this month is used up.',
};

/** The sentence for an error of a chat turn; `now` is when it was met. */
export function errorSentence(error: unknown, now: Date = new Date()): ErrorSentence {
  if (!(error instanceof FhirgateError)) {
    return { title: 'The reply did not come through', message: 'The server could not be reached. Check your connection and try again.', retry: true };
  }
  const code = error.code ?? '';
  if (code in BUDGETS) {
    const resets = error.retryAfterSeconds !== undefined ? new Date(now.getTime() + error.retryAfterSeconds * 1000) : undefined;
    const when = resets ? ` It resets ${resets.toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'short' })}.` : '';
    return { title: 'Budget used up', message: `${BUDGETS[code]}${when}`, retry: false };
  }
  switch (code) {
    case 'patient_data_not_allowed':
      return { title: 'Model not cleared for patient data', message: `${error.message} Choose a model marked “cleared” or “de-identified” for questions about a patient.`, retry: false };
    case 'model_not_allowed':
      return { title: 'Model not available to you', message: 'Your access does not include this model. Choose another model, or ask your administrator.', retry: false };
    case 'forbidden':
      return { title: 'Not allowed', message: 'Your access does not allow this, for example a patient outside your care.', retry: false };
    case 'not_found':
    case 'conversation_not_found':
      return { title: 'Not found', message: 'This conversation or record does not exist, or you may not read it.', retry: false };
    case 'conversation_not_owned':
      return { title: 'Someone else’s conversation', message: 'Another user started this conversation; start a new one to ask your question.', retry: false };
    case 'upstream_error':
    case 'upstream_timeout':
      return { title: 'The AI model is not answering', message: 'The model’s provider failed or took too long. Try again in a moment.', retry: true };
    case 'unavailable':
    case 'rate_limited':
    case 'conflict':
      return { title: 'The server is busy', message: 'The server could not take the message just now. Try again in a moment.', retry: true };
    case 'not_configured':
      return { title: 'AI is not set up', message: 'No AI model is set up for your project yet. Ask your administrator.', retry: false };
    case 'unauthenticated':
      return { title: 'Signed out', message: 'Your session has ended. Sign in again.', retry: false };
    default:
      return { title: 'The reply did not come through', message: error.message, retry: error.status >= 500 };
  }
}
