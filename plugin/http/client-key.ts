/**
 * API keys for tools that hold one fixed key: a Medplum `ClientApplication`'s id and secret, written as one string
 * `<client id>:<secret>` and sent as the bearer token (what OpenAI-style clients send), or as Medplum's own Basic
 * auth (`Basic base64(<client id>:<secret>)`). The key is checked on every request, as Medplum checks Basic auth:
 * a rotated or removed secret, a ClientApplication switched off or a membership made inactive stops it at once.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { readBearerToken } from './bearer-token.ts';

/** A ClientApplication's credentials, as a request carried them. */
export interface ClientKey {
  readonly clientId: string;
  readonly secret: string;
}

// A FHIR id (Medplum's are UUIDs); a JWT has no colon, so a bearer token with one after an id is a key.
const FHIR_ID = /^[A-Za-z0-9\-.]{1,64}$/;

/** The bearer token's client key, or undefined when the bearer token is not one (a JWT, or no bearer token). */
export function readBearerClientKey(headers: IncomingHttpHeaders): ClientKey | undefined {
  const token = readBearerToken(headers);
  return token === undefined ? undefined : parseClientKey(token);
}

/** The client key of a request: its bearer token written as `<client id>:<secret>`, or its Basic credentials. */
export function readClientKey(headers: IncomingHttpHeaders): ClientKey | undefined {
  const bearer = readBearerClientKey(headers);
  if (bearer) {
    return bearer;
  }
  const basic = /^Basic\s+([A-Za-z0-9+/=_-]+)\s*$/i.exec(headers.authorization ?? '')?.[1];
  return basic ? parseClientKey(Buffer.from(basic, 'base64').toString('utf8')) : undefined;
}

/** `<client id>:<secret>` as Basic auth's token (base64), as Medplum's server reads it. */
export function basicTokenOf(key: ClientKey): string {
  return Buffer.from(`${key.clientId}:${key.secret}`, 'utf8').toString('base64');
}

function parseClientKey(text: string): ClientKey | undefined {
  const separator = text.indexOf(':');
  if (separator <= 0) {
    return undefined;
  }
  const clientId = text.slice(0, separator);
  const secret = text.slice(separator + 1);
  return FHIR_ID.test(clientId) && secret.length > 0 && !/\s/.test(secret) ? { clientId, secret } : undefined;
}
