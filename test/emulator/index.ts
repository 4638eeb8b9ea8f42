// The loopback LLM emulator's public surface: what fhirgate's end-to-end tests, `npm start`'s offline demo
// provider, the benchmarks and the chaos suite import.
export { BEHAVIOUR_HEADER, startLlmEmulator } from './server.ts';
export type { LlmEmulator, LlmEmulatorOptions } from './server.ts';
export { InvalidBehaviourError, parseBehaviour } from './behaviour.ts';
export type { EmulatorBehaviour, EmulatorToolCall } from './behaviour.ts';
export { REDACTED, fingerprintOf } from './recording.ts';
export type { ReceivedRequest, RequestOutcome, RequestTotals } from './recording.ts';
export type { NormalizedMessage, NormalizedTool, NormalizedToolCall, NormalizedToolChoice, ProviderName } from './provider-format.ts';
export { createDefaultReplyText, createLogprobs, createStructuredReplyText, countPromptTokens } from './reply-plan.ts';
export { exampleOf } from './json-schema-example.ts';
export type { NormalizedResponseFormat, OutputOptions } from './output-options.ts';
export { countTokens, splitIntoTokens } from './tokenizer.ts';
