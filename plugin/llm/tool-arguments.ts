/**
 * The arguments of a call as an object, for the providers whose wire format takes an object, not JSON text
 * (Anthropic's `tool_use.input`, Ollama's `tool_calls[].function.arguments`). The port keeps the text exactly as the
 * model wrote it (`ChatToolCall.arguments`), and a history may hold text that is not a JSON object: a model wrote
 * broken JSON, or another provider's model answered an earlier step. Such text cannot be sent as it is, and the
 * request must still be accepted, since the call's result follows it.
 */

/** Where the text of arguments that are not a JSON object travels, so the model still sees what was written. */
export const UNPARSED_ARGUMENTS_KEY = '_unparsed_arguments';

/**
 * The arguments text as an object: a JSON object as it is; empty text (a call without arguments, as some models
 * write it) as `{}`; anything else (invalid JSON, or JSON that is not an object) as `{_unparsed_arguments: text}`.
 */
export function toArgumentsObject(text: string): Record<string, unknown> {
  if (text.trim() === '') {
    return {};
  }
  try {
    const parsed: unknown = JSON.parse(text);
    if (typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)) {
      return { ...parsed };
    }
  } catch {
    // Not JSON: kept as text below.
  }
  return { [UNPARSED_ARGUMENTS_KEY]: text };
}
