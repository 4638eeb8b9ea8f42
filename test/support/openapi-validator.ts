/**
 * Validates real requests and answers against fhirgate's OpenAPI description with ajv's JSON Schema 2020-12 (the
 * dialect of OpenAPI 3.1): an answer against the schema the description gives its path, method, status and media
 * type (every `data:` event of a stream against the stream's), a request body against its operation's. Records
 * which operations and statuses were seen, so a test can check that it covered the description.
 */
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import type { OpenApiDocument } from '../../plugin/openapi/openapi-document.ts';
import { sseEvents } from './sse-events.ts';

const DOCUMENT_ID = 'https://fhirgate.invalid/openapi.json';

/** An answer as it came off the socket. */
export interface SeenAnswer {
  readonly status: number;
  readonly contentType: string;
  readonly text: string;
}

/** A JSON pointer segment. */
function escape(segment: string): string {
  return segment.replaceAll('~', '~0').replaceAll('/', '~1');
}

export class OpenApiValidator {
  readonly #document: OpenApiDocument;
  readonly #ajv: Ajv2020;
  readonly #validators = new Map<string, ValidateFunction>();
  /** `METHOD path status`, for each answer validated. */
  readonly seen = new Set<string>();

  constructor(document: OpenApiDocument) {
    this.#document = document;
    this.#ajv = new Ajv2020({ strict: false, allErrors: true });
    this.#ajv.addFormat('date', /^\d{4}-\d{2}-\d{2}$/);
    this.#ajv.addSchema(document as object, DOCUMENT_ID);
  }

  /** The operations of the description, `METHOD path`. */
  operations(): string[] {
    return Object.entries(this.#document.paths).flatMap(([path, item]) => Object.keys(item).map((method) => `${method.toUpperCase()} ${path}`));
  }

  /** Throws, naming what does not match, unless `body` is valid for the request body of `method path`. */
  expectRequest(method: string, path: string, body: unknown): void {
    this.#check(`/paths/${escape(path)}/${method.toLowerCase()}/requestBody/content/application~1json/schema`, body, `${method} ${path} request`);
  }

  /**
   * Throws unless the answer is described: its status under the operation (or `status` named as a component
   * response, for a method the path does not serve), its media type under that, and its body, or each event of a
   * stream, valid for the schema there. Returns the parsed JSON body, or the stream's event objects.
   */
  expectAnswer(method: string, path: string, answer: SeenAnswer, componentResponse?: string): unknown {
    const mediaType = answer.contentType.split(';')[0].trim();
    const response = componentResponse ? `/components/responses/${componentResponse}` : this.#responsePointer(method, path, answer.status);
    const schema = `${response}/content/${escape(mediaType)}/schema`;
    const where = `${method} ${path} ${answer.status} ${mediaType}`;
    this.seen.add(`${method} ${path} ${answer.status}`);
    if (mediaType !== 'text/event-stream') {
      const body: unknown = JSON.parse(answer.text);
      this.#check(schema, body, where);
      return body;
    }
    const events = eventsOf(answer.text);
    expect(events.length).toBeGreaterThan(0);
    for (const [index, event] of events.entries()) {
      this.#check(schema, event.data, `${where}, event ${index}`);
      // `event: message` is SSE's default name (MCP's streams send it): only other names are a type.
      if (event.name !== undefined && event.name !== 'message') {
        expect((event.data as { type?: unknown }).type).toBe(event.name);
      }
    }
    return events.map((event) => event.data);
  }

  #responsePointer(method: string, path: string, status: number): string {
    const operation = this.#document.paths[path]?.[method.toLowerCase()];
    if (!operation) {
      throw new Error(`The description has no operation ${method} ${path}.`);
    }
    const response = operation.responses[String(status)] as { $ref?: string } | undefined;
    if (!response) {
      throw new Error(`The description of ${method} ${path} has no ${status} answer.`);
    }
    return response.$ref ? response.$ref.slice(1) : `/paths/${escape(path)}/${method.toLowerCase()}/responses/${status}`;
  }

  #check(pointer: string, value: unknown, where: string): void {
    let validate = this.#validators.get(pointer);
    if (!validate) {
      validate = this.#ajv.getSchema(`${DOCUMENT_ID}#${pointer}`);
      if (!validate) {
        throw new Error(`${where}: the description has no schema at ${pointer}.`);
      }
      this.#validators.set(pointer, validate);
    }
    if (!validate(value)) {
      throw new Error(`${where} does not match the description: ${JSON.stringify(validate.errors?.slice(0, 5))}\n${JSON.stringify(value).slice(0, 2000)}`);
    }
  }
}

const eventsOf = (text: string): { name?: string; data: unknown }[] => sseEvents<unknown>(text);
