import { AppError } from '../errors.ts';
import { inResponsesTerms } from './responses-routes.ts';

const refusal = (param: string): AppError => new AppError('invalid_request', `Invalid request: ${param} is not supported by the provider 'x' (Anthropic).`, { details: { param } });

describe('errors of the shared steps in the Responses API\'s terms', () => {
  test.each([
    ['response_format', 'text.format'],
    ['response_format.json_schema.schema', 'text.format.schema'],
    ['reasoning_effort', 'reasoning.effort'],
    ['verbosity', 'text.verbosity'],
    ['logprobs', 'include'],
    ['max_completion_tokens', 'max_output_tokens'],
    ['tools.2.function.strict', 'tools.2.strict'],
    ['messages', 'input'],
    ['service_tier', 'service_tier'],
    ['top_p', 'top_p'],
  ])('%s is named %s, in the message too', (chatParam, param) => {
    const error = inResponsesTerms(refusal(chatParam), {});
    expect(error.details?.param).toBe(param);
    expect(error.message).toBe(`Invalid request: ${param} is not supported by the provider 'x' (Anthropic).`);
    expect(error.code).toBe('invalid_request');
  });

  test('the conversation is named by the field the request continued it with', () => {
    const missing = new AppError('conversation_not_found', "Conversation 'c1' not found.", { details: { param: 'conversation_id' } });
    expect(inResponsesTerms(missing, { previous_response_id: 'resp_1' }).details?.param).toBe('previous_response_id');
    expect(inResponsesTerms(missing, { conversation: 'c1' }).details?.param).toBe('conversation');
    expect(inResponsesTerms(missing, { conversation: 'c1' }).status).toBe(404);
  });

  test('an error that names no field is left as it is', () => {
    const error = new AppError('upstream_error', 'The provider failed.');
    expect(inResponsesTerms(error, {})).toBe(error);
  });
});
