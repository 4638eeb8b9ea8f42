/**
 * The OAuth surface real Medplum clients need: `POST /oauth2/token` (client credentials, the authorization code of
 * an email and password sign-in, password-login.ts, and the refresh token of one with "Remember me", refresh-grant.ts), the public keys at `/.well-known/jwks.json`, and
 * `GET /auth/me`, the session `MedplumClient` reads after every login, and `/oauth2/logout` (GET or POST, as
 * Medplum's), which revokes the caller's Login, so its access token authenticates nobody from then on
 * (`MedplumClient.signOut()` calls it).
 */
import { createReference } from '@medplum/core';
import type { FhirRepository } from '@medplum/fhir-router';
import type { Login, ProjectMembership, Resource } from '@medplum/fhirtypes';
import express, { type NextFunction, type Request, type Response, type Router } from 'express';
import { AppError, toAppError } from '../../../errors.ts';
import type { CallerContext, HostLogger } from '../../../host.ts';
import { fromBodyParserError, readFormBody, readJsonBody } from '../../../http/json-body.ts';
import { holdUnauthenticatedPlace, type UnauthenticatedRequests } from '../../../http/unauthenticated-requests.ts';
import type { AccessTokenService } from './access-tokens.ts';
import { authenticateRequest } from './authenticate-request.ts';
import type { CallerCache } from './caller-cache.ts';
import { startLogin } from './logins.ts';
import { findClientMembership, readKeyClient } from './client-keys.ts';
import { exchangeAuthorizationCode } from './password-login.ts';
import { refreshLogin } from './refresh-grant.ts';
import type { SigningKeys } from './signing-keys.ts';

/** What the OAuth routes work with. */
export interface OAuthRoutesOptions {
  readonly store: FhirRepository;
  readonly tokens: AccessTokenService;
  readonly keys: SigningKeys;
  /** The host's cache of resolved callers, shared with its other routes. */
  readonly callers?: CallerCache;
  /** Places of the unauthenticated requests in flight: a token request is read before its client is known. */
  readonly unauthenticated: UnauthenticatedRequests;
  readonly maxJsonDepth: number;
  readonly logger?: HostLogger;
}

// A token request is a grant type, a client id and secret or a code and its verifier.
const TOKEN_BODY_LIMIT = 16 * 1024;

/** Creates the router for `/oauth2/token`, `/oauth2/logout`, `/.well-known/jwks.json` and `/auth/me`. */
export function createOAuthRoutes(options: OAuthRoutesOptions): Router {
  const { store, tokens, keys, callers, logger } = options;
  const router = express.Router();
  router.get('/.well-known/jwks.json', (_request, response) => {
    response.json(keys.jwks);
  });
  router.post(
    '/oauth2/token',
    holdUnauthenticatedPlace(options.unauthenticated),
    readFormBody(TOKEN_BODY_LIMIT),
    readJsonBody({ maxBytes: TOKEN_BODY_LIMIT, maxDepth: options.maxJsonDepth }),
    async (request: Request, response: Response) => {
      await handleTokenRequest(request, response, store, tokens);
    },
    // Every failure gets the OAuth error shape; the body is never echoed or logged (it may hold a client secret).
    (thrown: unknown, _request: Request, response: Response, next: NextFunction) => {
      if (response.headersSent) {
        next(thrown);
        return;
      }
      const error = toAppError(fromBodyParserError(thrown) ?? thrown);
      if (error.status >= 500) {
        logger?.error('Token request failed', { code: error.code, cause: error.cause instanceof Error ? error.cause.name : undefined });
      }
      sendTokenFailure(response, error);
    }
  );
  router.get('/auth/me', async (request, response) => {
    const caller = await authenticateRequest(request.headers, store, tokens, callers);
    if (!caller) {
      sendUnauthorized(response);
      return;
    }
    response.json(await describeSession(store, caller));
  });
  const logout = async (request: Request, response: Response): Promise<void> => {
    const caller = await authenticateRequest(request.headers, store, tokens, callers);
    if (!caller) {
      sendUnauthorized(response);
      return;
    }
    if (caller.login.id) {
      const login = await store.readResource<Login>('Login', caller.login.id);
      await store.updateResource<Login>({ ...login, revoked: true });
    }
    response.set('Cache-Control', 'no-store').json({ ok: true });
  };
  router.get('/oauth2/logout', logout);
  router.post('/oauth2/logout', logout);
  return router;
}

async function handleTokenRequest(request: Request, response: Response, store: FhirRepository, tokens: AccessTokenService): Promise<void> {
  const body = (request.body ?? {}) as Record<string, unknown>;
  if (body.grant_type === 'authorization_code') {
    const exchanged = await exchangeAuthorizationCode(store, tokens, body.code, body.code_verifier);
    if ('error' in exchanged) {
      sendTokenError(response, 400, exchanged.error, exchanged.description);
      return;
    }
    const { login } = exchanged;
    const refreshToken = login.refreshSecret ? await tokens.signRefresh(login.id, login.refreshSecret) : undefined;
    sendTokens(response, exchanged.accessToken, exchanged.expiresInSeconds, login.scope ?? 'openid', exchanged.membership, refreshToken);
    return;
  }
  if (body.grant_type === 'refresh_token') {
    const refreshed = await refreshLogin(store, tokens, body.refresh_token);
    if ('error' in refreshed) {
      sendTokenError(response, 400, refreshed.error, refreshed.description);
      return;
    }
    sendTokens(response, refreshed.accessToken, refreshed.expiresInSeconds, refreshed.login.scope ?? 'openid', refreshed.membership, refreshed.refreshToken);
    return;
  }
  if (body.grant_type !== 'client_credentials') {
    sendTokenError(response, 400, 'unsupported_grant_type', 'This host supports the client_credentials, authorization_code and refresh_token grants.');
    return;
  }
  const credentials = readClientCredentials(request, body);
  if (!credentials) {
    sendTokenError(response, 400, 'invalid_request', 'Missing client_id or client_secret.');
    return;
  }
  const client = await readKeyClient(store, { clientId: credentials.id, secret: credentials.secret }).catch(() => undefined);
  if (!client) {
    sendTokenError(response, 401, 'invalid_client', 'Invalid client credentials.');
    return;
  }
  const membership = await findClientMembership(store, client);
  if (!membership) {
    sendTokenError(response, 400, 'invalid_request', 'The client has no active project membership.');
    return;
  }
  const scope = typeof body.scope === 'string' && body.scope ? body.scope : 'openid';
  const issued = await startLogin(store, tokens, {
    membership,
    authMethod: 'client',
    client: createReference(client),
    scope,
    remoteAddress: request.ip,
  });
  sendTokens(response, issued.accessToken, issued.expiresInSeconds, scope, membership);
}

function sendTokens(response: Response, accessToken: string, expiresInSeconds: number, scope: string, membership: ProjectMembership, refreshToken?: string): void {
  response.set('Cache-Control', 'no-store').json({
    token_type: 'Bearer',
    access_token: accessToken,
    ...(refreshToken ? { refresh_token: refreshToken } : {}),
    expires_in: expiresInSeconds,
    scope,
    project: membership.project,
    profile: membership.profile,
  });
}

function readClientCredentials(request: Request, body: Record<string, unknown>): { id: string; secret: string } | undefined {
  const basic = request.headers.authorization?.match(/^Basic\s+(.+)$/i)?.[1];
  if (basic) {
    const decoded = Buffer.from(basic, 'base64').toString('utf8');
    const separator = decoded.indexOf(':');
    if (separator > 0) {
      try {
        return { id: decodeURIComponent(decoded.slice(0, separator)), secret: decodeURIComponent(decoded.slice(separator + 1)) };
      } catch {
        throw new AppError('invalid_request', 'The Basic credentials are not valid percent-encoding.');
      }
    }
  }
  const { client_id: id, client_secret: secret } = body;
  return typeof id === 'string' && typeof secret === 'string' && id && secret ? { id, secret } : undefined;
}


function sendUnauthorized(response: Response): void {
  response.status(401).json({ resourceType: 'OperationOutcome', issue: [{ severity: 'error', code: 'login', details: { text: 'Unauthorized' } }] });
}

function sendTokenError(response: Response, status: number, error: string, description: string): void {
  response.status(status).set('Cache-Control', 'no-store').json({ error, error_description: description });
}

/** An AppError in OAuth's error shape (RFC 6749, 5.2), with its status. */
function sendTokenFailure(response: Response, error: AppError): void {
  if (error.retryAfterSeconds !== undefined) {
    response.setHeader('Retry-After', String(Math.ceil(error.retryAfterSeconds)));
  }
  const code = error.status >= 500 ? 'server_error' : error.code === 'rate_limited' ? 'temporarily_unavailable' : 'invalid_request';
  sendTokenError(response, error.status, code, error.status >= 500 ? 'The server could not complete the request.' : error.message);
}

/** The session as Medplum's `/auth/me` answers it; never a secret (client secrets, password hashes). */
async function describeSession(store: FhirRepository, caller: CallerContext): Promise<Record<string, unknown>> {
  const profile = await store.readReference(caller.profile).catch(() => undefined);
  const user = caller.membership.user ? await store.readReference(caller.membership.user).catch(() => undefined) : undefined;
  const { secret: _projectSecret, ...project } = caller.project;
  return {
    user: user ? withoutSecrets(user) : undefined,
    project,
    membership: caller.membership,
    profile: profile ? withoutSecrets(profile) : undefined,
    config: { resourceType: 'UserConfiguration', name: 'fhirgate', menu: [] },
  };
}

function withoutSecrets(resource: Resource): Resource {
  const { secret: _secret, retiringSecret: _retiring, passwordHash: _hash, mfaSecret: _mfa, ...rest } = resource as Resource &
    Record<'secret' | 'retiringSecret' | 'passwordHash' | 'mfaSecret', unknown>;
  return rest as Resource;
}
