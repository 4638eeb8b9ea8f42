// The few HTTP chores every route shares: reading a body, parsing it as a JSON object, sending JSON.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { isPlainObject } from './behaviour.ts';

/** Reads the whole request body as UTF-8 text. */
export async function readBody(request: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) {
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** Parses text as a JSON object; undefined for invalid JSON or any other JSON value. */
export function parseJsonObject(text: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(text);
    return isPlainObject(value) ? value : undefined;
  } catch {
    return undefined;
  }
}

/** Sends a complete JSON response and calls `onFinished` once it is flushed (not if the client left first). */
export function sendJson(
  response: ServerResponse,
  status: number,
  headers: Record<string, string>,
  body: string,
  onFinished?: () => void,
): void {
  response.writeHead(status, {
    ...headers,
    'content-type': 'application/json',
    'content-length': String(Buffer.byteLength(body)),
  });
  response.end(body, onFinished);
}
