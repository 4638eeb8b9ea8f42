/**
 * What went wrong, as a clinician reads it: the spec's error `code`s of fhirgate's routes mapped to sentences,
 * with when a used-up budget resets, which models the project allows for a question about a patient, and whether
 * trying again can help. Never a raw body.
 */
import { FhirgateError } from './fhirgate-api.ts';

export interface ErrorSentence {
  readonly title: string;
  readonly message: string;
  /** Whether sending the same message again may work (a provider down, the server busy). */
  readonly retry: boolean;
}

/** What the page knew of the turn that failed, so the sentence can say what to do instead. */
export interface ErrorContext {
  /** When the error was met (a budget's reset is counted from it). */
  readonly now?: Date;
  /** Whether the turn was about a patient. */
  readonly aboutPatient?: boolean;
  /** The models the picker marks as taking a question about a patient (sent as it is, or de-identified first). */
  readonly patientDataModels?: readonly string[];
}

const BUDGETS: Readonly<Record<string, string>> = {
  budget_exceeded_user_day: 'Your AI budget for today',
  budget_exceeded_user_month: 'Your AI budget for this month',
  budget_exceeded_project_day: 'Your project’s AI budget for today',
  budget_exceeded_project_month: 'Your project’s AI budget for this month',
};

const WHEN: Intl.DateTimeFormatOptions = { dateStyle: 'medium', timeStyle: 'short' };

/** The sentence for an error of a chat turn. */
export function errorSentence(error: unknown, context: ErrorContext = {}): ErrorSentence {
  if (!(error instanceof FhirgateError)) {
    return { title: 'The reply did not come through', message: 'The server could not be reached. Check your connection and try again.', retry: true };
  }
  const code = error.code ?? '';
  if (code in BUDGETS) {
    return budgetSentence(error, BUDGETS[code], context.now ?? new Date());
  }
  switch (code) {
    case 'patient_data_not_allowed':
      return { title: 'Model not cleared for patient data', message: `This model may not be sent a question about a patient in your project. ${instead(context.patientDataModels)}`, retry: false };
    case 'model_not_allowed':
      return { title: 'Model not available to you', message: 'Your access does not include this model. Choose another model, or ask your administrator.', retry: false };
    case 'forbidden':
      return context.aboutPatient
        ? { title: 'Patient outside your care', message: 'Your access does not include this patient’s chart, so nothing was sent. Ask about a patient in your care, or ask without choosing a patient.', retry: false }
        : { title: 'Not allowed', message: 'Your access does not allow this.', retry: false };
    case 'not_found':
      return context.aboutPatient
        ? { title: 'Patient not found', message: 'This patient is not in your project’s records. Choose the patient again.', retry: false }
        : { title: 'Not found', message: 'This record does not exist, or you may not read it.', retry: false };
    case 'conversation_not_found':
      return { title: 'Conversation not found', message: 'This conversation does not exist, or you may not read it. Start a new conversation.', retry: false };
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
      return { title: 'AI is not set up', message: 'No AI model is set up for your project yet, or its settings cannot be read. Ask your administrator.', retry: false };
    case 'unauthenticated':
      return { title: 'Signed out', message: 'Your session has ended. Sign in again.', retry: false };
    case 'invalid_request':
      // The page keeps a conversation's patient; a second one could only come from another window.
      return context.aboutPatient && /patient/i.test(error.message)
        ? { title: 'Another patient’s conversation', message: 'This conversation is about another patient. Start a new conversation to ask about this one.', retry: false }
        : { title: 'The message was not accepted', message: error.message, retry: false };
    default:
      return error.status >= 500
        ? { title: 'The reply did not come through', message: 'Something went wrong on the server. Try again in a moment.', retry: true }
        : { title: 'The reply did not come through', message: error.message, retry: false };
  }
}

/** A used-up budget says whose and when it resets; one only held by replies still running is worth a retry. */
function budgetSentence(error: FhirgateError, whose: string, now: Date): ErrorSentence {
  if (/still running/i.test(error.message)) {
    return { title: 'Budget in use', message: `${whose} is taken up by replies still running. Try again once they finish.`, retry: true };
  }
  const resets = resetTime(error, now);
  const when = resets ? ` It resets ${resets.toLocaleString(undefined, WHEN)}.` : '';
  return { title: 'Budget used up', message: `${whose} is used up.${when}`, retry: false };
}

/** The time the server's message names (exact), else `Retry-After` counted from `now`. */
function resetTime(error: FhirgateError, now: Date): Date | undefined {
  const named = /resets at (\d{4}-\d{2}-\d{2}T[\d:.]+Z)/.exec(error.message)?.[1];
  if (named && !Number.isNaN(Date.parse(named))) {
    return new Date(named);
  }
  return error.retryAfterSeconds !== undefined ? new Date(now.getTime() + error.retryAfterSeconds * 1000) : undefined;
}

function instead(models: readonly string[] | undefined): string {
  if (models === undefined) {
    return 'Choose a model marked “sent as it is” or “de-identified first”.';
  }
  if (models.length === 0) {
    return 'None of your models takes questions about a patient: ask without choosing a patient, or ask your administrator.';
  }
  return `Choose one your project allows for patient data: ${models.join(', ')}.`;
}
