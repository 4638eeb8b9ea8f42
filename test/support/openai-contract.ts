/**
 * OpenAI's contract as the official `openai` package publishes it: JSON Schemas generated, when a test runs, from the
 * SDK's type declarations (test/support/openai-contract-types.ts names the types), and a validator that names the
 * field an answer gets wrong. Updating the SDK updates the contract: a field OpenAI makes required fails the test.
 *
 * Objects stay open (`additionalProperties` allowed): the contract lets a server add fields, as fhirgate adds
 * `conversation_id`, `communication_id` and `fhirgate` on models.
 */
import { fileURLToPath } from 'node:url';
import { Ajv, type ErrorObject as AjvError, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import { createGenerator } from 'ts-json-schema-generator';

/** The answers the contract describes, by the name of their type in openai-contract-types.ts. */
export type ContractType =
  | 'ContractChatCompletion'
  | 'ContractChatCompletionChunk'
  | 'ContractResponse'
  | 'ContractResponseStreamEvent'
  | 'ContractModel'
  | 'ContractModelList'
  | 'ContractErrorBody';

const CONTRACT_TYPES: readonly ContractType[] = [
  'ContractChatCompletion',
  'ContractChatCompletionChunk',
  'ContractResponse',
  'ContractResponseStreamEvent',
  'ContractModel',
  'ContractModelList',
  'ContractErrorBody',
];

/** The part of a JSON Schema this file reads and amends. */
interface Definition {
  type?: unknown;
  const?: unknown;
  $ref?: string;
  properties?: Record<string, Definition>;
  required?: string[];
  anyOf?: Definition[];
}

type GeneratedSchema = { definitions?: Record<string, Definition> } & Record<string, unknown>;

/**
 * Fields OpenAI's API reference (its OpenAPI description) requires that the SDK's declarations leave optional or do
 * not name yet; each is required here as the reference says. When the SDK catches up, its entry does nothing.
 */
const REQUIRED_BY_THE_REFERENCE: readonly { definition: string; property: string; schema?: Record<string, unknown> }[] = [
  // `logprobs` of an output text part: an array, required (the SDK: optional).
  { definition: 'ResponseOutputText', property: 'logprobs' },
  // `name` of `response.function_call_arguments.done`: the function's name, required (the SDK: not declared).
  { definition: 'ResponseFunctionCallArgumentsDoneEvent', property: 'name', schema: { type: 'string' } },
];

/**
 * Properties the SDK declares optional and not nullable that OpenAI's own answers send as null: `usage` of a
 * response in progress (`response.created` in the API reference's examples has `"usage": null`).
 */
const NULL_ON_THE_WIRE: readonly { definition: string; property: string }[] = [{ definition: 'Response', property: 'usage' }];

/** Properties the SDK computes on the client: declared on its types, never on the wire. */
const SDK_ONLY: readonly { definition: string; property: string }[] = [{ definition: 'Response', property: 'output_text' }];

const TYPES_FILE = fileURLToPath(new URL('./openai-contract-types.ts', import.meta.url));
const TSCONFIG = fileURLToPath(new URL('../../tsconfig.json', import.meta.url));
const ID = (type: string): string => `https://fhirgate.invalid/openai-contract/${type}.json`;

/** The schemas, as the test made them: generated once per test run (each test file's module registry). */
export class OpenAiContract {
  readonly #ajv: Ajv;
  readonly #validators = new Map<string, ValidateFunction>();
  /** `response.*` event type → its definition's name. */
  readonly #eventDefinitions: ReadonlyMap<string, string>;
  /** How long generating the schemas took, in milliseconds. */
  readonly generationMs: number;

  private constructor(schemas: ReadonlyMap<ContractType, GeneratedSchema>, generationMs: number) {
    this.generationMs = generationMs;
    this.#ajv = new Ajv({ strict: false, allErrors: true });
    addFormats.default(this.#ajv);
    for (const [type, schema] of schemas) {
      this.#ajv.addSchema({ ...schema, $id: ID(type) });
    }
    this.#eventDefinitions = eventDefinitions(schemas.get('ContractResponseStreamEvent') as GeneratedSchema);
  }

  /** Generates the schemas from the installed SDK's declarations (a few seconds: one TypeScript program). */
  static generate(): OpenAiContract {
    const started = performance.now();
    const generator = createGenerator({ path: TYPES_FILE, tsconfig: TSCONFIG, skipTypeCheck: true, additionalProperties: true, expose: 'all', topRef: true, jsDoc: 'none' });
    const schemas = new Map(CONTRACT_TYPES.map((type) => [type, asTheReferenceSays(generator.createSchema(type) as GeneratedSchema)]));
    return new OpenAiContract(schemas, performance.now() - started);
  }

  /** The `type` of every event a Responses stream may send, as the SDK declares them. */
  get responseEventTypes(): string[] {
    return [...this.#eventDefinitions.keys()];
  }

  /** Throws, naming the fields at fault, unless `value` is a valid `type`. */
  expectValid(type: ContractType, value: unknown, where: string): void {
    this.#check(`${ID(type)}`, value, `${where} (${type.replace(/^Contract/, '')})`);
  }

  /** Throws unless `event` is valid for the definition of its own `type` (so a failure names that event's fields). */
  expectResponseEvent(event: unknown, where: string): void {
    const type = (event as { type?: unknown }).type;
    const definition = typeof type === 'string' ? this.#eventDefinitions.get(type) : undefined;
    if (!definition) {
      throw new Error(`${where}: '${String(type)}' is not an event type of OpenAI's Responses stream.`);
    }
    this.#check(`${ID('ContractResponseStreamEvent')}#/definitions/${encodeURIComponent(definition)}`, event, `${where} (${definition})`);
  }

  #check(ref: string, value: unknown, where: string): void {
    let validate = this.#validators.get(ref);
    if (!validate) {
      validate = this.#ajv.getSchema(ref);
      if (!validate) {
        throw new Error(`The contract has no schema ${ref}.`);
      }
      this.#validators.set(ref, validate);
    }
    if (!validate(value)) {
      throw new Error(`${where} breaks OpenAI's contract:\n${describe(validate.errors ?? [])}\n${JSON.stringify(value).slice(0, 1500)}`);
    }
  }
}

/** The SDK's schema, with the reference's required fields required and the SDK's own properties left out. */
function asTheReferenceSays(schema: GeneratedSchema): GeneratedSchema {
  const definitions = schema.definitions ?? {};
  for (const { definition, property, schema: propertySchema } of REQUIRED_BY_THE_REFERENCE) {
    const target = definitions[definition];
    if (target) {
      target.properties = { ...(propertySchema && !target.properties?.[property] ? { [property]: propertySchema } : {}), ...target.properties };
      target.required = [...new Set([...(target.required ?? []), property])];
    }
  }
  for (const { definition, property } of NULL_ON_THE_WIRE) {
    const target = definitions[definition]?.properties;
    if (target?.[property] && !target[property].anyOf?.some((member) => member.type === 'null')) {
      target[property] = { anyOf: [target[property], { type: 'null' }] };
    }
  }
  for (const { definition, property } of SDK_ONLY) {
    const target = definitions[definition];
    if (target?.required) {
      target.required = target.required.filter((name) => name !== property);
    }
  }
  return schema;
}

/** Each event of the stream union, by the constant of its `type`. */
function eventDefinitions(schema: GeneratedSchema): Map<string, string> {
  const definitions = schema.definitions ?? {};
  const union = definitions.ResponseStreamEvent?.anyOf ?? [];
  const byType = new Map<string, string>();
  for (const member of union) {
    const name = decodeURIComponent(member.$ref?.replace('#/definitions/', '') ?? '');
    const type = definitions[name]?.properties?.type?.const;
    if (typeof type === 'string') {
      byType.set(type, name);
    }
  }
  return byType;
}

/**
 * The errors that say most: the deepest first (a union's other branches fail higher up), a missing field named
 * as its path (`/choices/0/logprobs: required, missing`).
 */
function describe(errors: readonly AjvError[]): string {
  const lines = errors.map((error) => {
    const depth = error.instancePath.split('/').length;
    const missing = error.keyword === 'required' ? (error.params as { missingProperty?: string }).missingProperty : undefined;
    const text = missing !== undefined ? `${error.instancePath}/${missing}: required, missing` : `${error.instancePath || '/'}: ${error.message ?? error.keyword}`;
    return { depth: depth + (missing !== undefined ? 1 : 0), text };
  });
  const unique = [...new Map(lines.sort((a, b) => b.depth - a.depth).map((line) => [line.text, line])).values()];
  return unique
    .slice(0, 8)
    .map((line) => `  ${line.text}`)
    .join('\n');
}

let generated: OpenAiContract | undefined;

/** The contract, generated on first use and kept for the rest of the test file. */
export function openAiContract(): OpenAiContract {
  generated ??= OpenAiContract.generate();
  return generated;
}
