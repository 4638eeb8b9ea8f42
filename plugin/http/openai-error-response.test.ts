import express from 'express';
import request from 'supertest';
import { AppError } from '../errors.ts';
import { sendOpenAiError } from './openai-error-response.ts';

/** A route that answers with `error`, as the /v1 routes do. */
function answering(error: AppError): express.Express {
  const app = express();
  app.post('/', (_request, response) => sendOpenAiError(response, error));
  return app;
}

describe('sendOpenAiError: whether the openai SDKs may retry on their own (x-should-retry)', () => {
  test.each([
    ['a refusal with nothing stored that may pass', new AppError('unavailable', 'Shutting down.', { isRetryable: true, retryAfterSeconds: 1 }), 503, 'true'],
    ['a turn still running under the same key', new AppError('conflict', 'In progress.', { isRetryable: true, retryAfterSeconds: 1 }), 409, 'true'],
    ['a provider failure after fhirgate retried', new AppError('upstream_error', 'The LLM provider failed.'), 500, 'false'],
    ['a budget used up until its period ends', new AppError('budget_exceeded_user_day', 'Used up.', { retryAfterSeconds: 3600 }), 429, 'false'],
    ['an invalid request', new AppError('invalid_request', 'Invalid request: fallbacks: no.', { details: { param: 'fallbacks' } }), 400, 'false'],
    ['an internal error', new AppError('internal_error', 'The server could not complete the request.'), 500, 'false'],
  ])('%s: %s, x-should-retry %s', async (_name, error, status, shouldRetry) => {
    const response = await request(answering(error)).post('/');
    expect(response.status).toBe(status);
    expect(response.headers['x-should-retry']).toBe(shouldRetry);
    expect(response.body).toEqual({ error: expect.objectContaining({ message: error.message, code: error.code }) });
  });

  test('Retry-After where the error names one', async () => {
    const response = await request(answering(new AppError('unavailable', 'Busy.', { isRetryable: true, retryAfterSeconds: 1.2 }))).post('/');
    expect(response.headers['retry-after']).toBe('2');
  });
});
