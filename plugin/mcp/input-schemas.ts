/**
 * The tools' input schemas, each compiled once per process: every MCP request gets a fresh server (mcp-route.ts),
 * and the SDK's `fromJsonSchema` compiles its validator (Ajv) when it is called, which was most of what building
 * that server cost (scenario 12 of the benchmarks). A schema depends only on what the project shares and on its
 * rule for MCP clients, so requests of projects alike share one compiled schema; nothing of a caller is in it.
 */
import { fromJsonSchema, type JsonSchemaType, type StandardSchemaWithJSON } from '@modelcontextprotocol/server';

/** Schemas kept at most: a few per distinct project configuration; beyond it the oldest is compiled again when asked. */
const MAX_SCHEMAS = 256;

/** Compiled input schemas, by their JSON Schema's text. */
export class InputSchemas {
  readonly #compiled = new Map<string, StandardSchemaWithJSON<Record<string, unknown>, Record<string, unknown>>>();

  /** The compiled schema of `schema`, compiled now if it was not yet. */
  of(schema: JsonSchemaType): StandardSchemaWithJSON<Record<string, unknown>, Record<string, unknown>> {
    const key = JSON.stringify(schema);
    const kept = this.#compiled.get(key);
    if (kept) {
      return kept;
    }
    const compiled = fromJsonSchema<Record<string, unknown>>(schema);
    this.#compiled.set(key, compiled);
    if (this.#compiled.size > MAX_SCHEMAS) {
      this.#compiled.delete(this.#compiled.keys().next().value ?? '');
    }
    return compiled;
  }
}
