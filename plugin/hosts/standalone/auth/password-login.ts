/**
 * Email and password sign-in, as Medplum's (auth/login.ts, auth/me's sibling routes, oauth/token.ts) and as
 * `MedplumClient.startLogin` + `processCode` drive it (and `@medplum/react`'s `SignInForm`, which first asks
 * `POST /auth/method` `{email}` whether the email's domain signs in elsewhere: never here, so the answer is `{}`):
 * 1. `POST /auth/login` `{email, password, codeChallenge, codeChallengeMethod, projectId?, ...}`: the user's
 *    password is checked, a `Login` is started (not yet granted) with a one-time `code` and the PKCE challenge;
 *    with one membership (in `projectId`, when given) the answer is `{login, code}`, with several
 *    `{login, memberships}` and `POST /auth/profile` `{login, profile: <membership id>}` picks one;
 * 2. `POST /oauth2/token` `grant_type=authorization_code` (`code`, `code_verifier`): within a few minutes, once,
 *    with the verifier of the challenge, the login is granted and its access token issued.
 * A wrong password and an unknown email get the same answer, after the same work; neither is logged. Before the
 * password is hashed, a sign-in from a source or for an account locked out by failed attempts is refused (429,
 * sign-in-limits.ts), and the hashing itself takes a place among a few (429 when none is free soon,
 * password-checks.ts): a flood of sign-ins can neither guess on nor starve the host.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { Operator, badRequest, createReference, getDisplayString, type WithId } from '@medplum/core';
import type { FhirRepository } from '@medplum/fhir-router';
import type { Login, OperationOutcome, ProjectMembership, Reference, Resource, User } from '@medplum/fhirtypes';
import express, { type Response, type Router } from 'express';
import { z } from 'zod';
import type { HostLogger } from '../../../host.ts';
import { readJsonBody } from '../../../http/json-body.ts';
import { holdUnauthenticatedPlace, type UnauthenticatedRequests } from '../../../http/unauthenticated-requests.ts';
import { createOutcomeErrorHandler } from '../outcome-errors.ts';
import type { AccessTokenService } from './access-tokens.ts';
import { signLoginToken, type IssuedLogin } from './logins.ts';
import type { PasswordChecks } from './password-checks.ts';
import type { SignInLimiter } from './sign-in-limits.ts';

// How long a code may wait for its exchange (Medplum allows a login's code for a short while after the sign-in).
const CODE_LIFETIME_MS = 10 * 60 * 1000;

const INVALID_CREDENTIALS = badRequest('Email or password is invalid');

const loginBody = z.object({
  email: z.string().trim().min(1).max(320),
  password: z.string().min(1).max(1024),
  codeChallenge: z.string().min(1).max(256).optional(),
  codeChallengeMethod: z.enum(['plain', 'S256']).optional(),
  projectId: z.string().min(1).max(64).optional(),
  clientId: z.string().max(64).optional(),
  scope: z.string().max(1024).optional(),
  remember: z.boolean().optional(),
});

const profileBody = z.object({ login: z.string().min(1).max(64), profile: z.string().min(1).max(64) });

const methodBody = z.object({ email: z.email().max(320) });

// A sign-in is an email, a password and a PKCE challenge.
const LOGIN_BODY_LIMIT = 16 * 1024;

/** What the sign-in routes work with. */
export interface PasswordLoginRoutesOptions {
  /** Places of the unauthenticated requests in flight: a sign-in is read, and its password hashed, before anyone is known. */
  readonly unauthenticated: UnauthenticatedRequests;
  /** The host's bound on password checks running at once. */
  readonly passwords: PasswordChecks;
  /** Lockouts after failed sign-ins, per source and per account. */
  readonly limits: SignInLimiter;
  readonly maxJsonDepth: number;
  readonly logger?: HostLogger;
}

/** `POST /auth/method`, `POST /auth/login` and `POST /auth/profile`. */
export function createPasswordLoginRoutes(store: FhirRepository, options: PasswordLoginRoutesOptions): Router {
  const router = express.Router();
  router.post(
    ['/auth/method', '/auth/login', '/auth/profile'],
    holdUnauthenticatedPlace(options.unauthenticated),
    readJsonBody({ maxBytes: LOGIN_BODY_LIMIT, maxDepth: options.maxJsonDepth, type: ['application/json', 'application/*+json'] })
  );
  // Medplum answers an external identity provider's authorize URL for a domain configured with one; this host has
  // none, so every email signs in with its password. Medplum's answer for an invalid email, and nothing else.
  router.post('/auth/method', (request, response) => {
    if (!methodBody.safeParse(request.body).success) {
      sendOutcome(response, 400, badRequest('Valid email address is required', 'email'));
      return;
    }
    response.json({});
  });
  router.post('/auth/login', async (request, response) => {
    const body = loginBody.safeParse(request.body);
    if (!body.success) {
      sendOutcome(response, 400, badRequest(`Invalid login request: ${body.error.issues[0]?.path.join('.') || 'body'}`));
      return;
    }
    const { email, password, projectId } = body.data;
    const attempt = { sourceAddress: request.ip, email };
    const lockedOut = await options.limits.check(attempt);
    if (lockedOut) {
      throw lockedOut;
    }
    const user = await findUser(store, email.toLowerCase());
    if (!(await options.passwords.verify(password, user?.passwordHash)) || !user) {
      const lockout = await options.limits.failed(attempt);
      if (lockout) {
        throw lockout;
      }
      sendOutcome(response, 400, INVALID_CREDENTIALS);
      return;
    }
    const memberships = (await findMemberships(store, user)).filter((membership) => !projectId || membership.project.reference === `Project/${projectId}`);
    if (memberships.length === 0) {
      sendOutcome(response, 400, badRequest('User not found in the project'));
      return;
    }
    const login = await store.createResource<Login>({
      resourceType: 'Login',
      user: createReference(user),
      authMethod: 'password',
      authTime: new Date().toISOString(),
      code: randomBytes(32).toString('hex'),
      codeChallenge: body.data.codeChallenge,
      codeChallengeMethod: body.data.codeChallengeMethod,
      scope: body.data.scope ?? 'openid',
      // "Remember me", as Medplum: the session can be renewed with a refresh token (grant_type=refresh_token).
      refreshSecret: body.data.remember ? randomBytes(32).toString('hex') : undefined,
      granted: false,
      remoteAddress: request.ip,
    });
    if (memberships.length === 1) {
      response.json(await withMembership(store, login, memberships[0]));
      return;
    }
    response.json({ login: login.id, memberships: await Promise.all(memberships.map((membership) => withDisplays(store, membership))) });
  });
  router.post('/auth/profile', async (request, response) => {
    const body = profileBody.safeParse(request.body);
    const login = body.success ? await store.readResource<Login>('Login', body.data.login).catch(() => undefined) : undefined;
    if (!body.success || !login || login.granted || login.revoked || login.membership) {
      sendOutcome(response, 400, badRequest('Invalid login'));
      return;
    }
    const user = login.user?.reference;
    const membership = await store.readResource<ProjectMembership>('ProjectMembership', body.data.profile).catch(() => undefined);
    if (!membership || membership.user?.reference !== user || membership.active === false) {
      sendOutcome(response, 400, badRequest('Profile not found'));
      return;
    }
    response.json(await withMembership(store, login, membership));
  });
  // A body that is not JSON, too large or too deep, a lockout, no place for the password check: Medplum's error
  // shape (429s with Retry-After), never the body itself.
  router.use(['/auth/method', '/auth/login', '/auth/profile'], createOutcomeErrorHandler(options.logger));
  return router;
}

/** The authorization_code grant: the login of `code`, granted once, for the verifier of its challenge. */
export async function exchangeAuthorizationCode(
  store: FhirRepository,
  tokens: AccessTokenService,
  code: unknown,
  verifier: unknown
): Promise<(IssuedLogin & { membership: WithId<ProjectMembership> }) | { error: string; description: string }> {
  const invalid = { error: 'invalid_grant', description: 'Invalid or expired authorization code.' };
  if (typeof code !== 'string' || !/^[0-9a-f]{64}$/.test(code)) {
    return invalid;
  }
  const [login] = await store.searchResources<Login>({ resourceType: 'Login', filters: [{ code: 'code', operator: Operator.EXACT, value: code }], count: 1 });
  if (!login || login.code !== code || login.granted || login.revoked || !login.membership || Date.now() - Date.parse(login.authTime ?? '') > CODE_LIFETIME_MS) {
    return invalid;
  }
  if (!verifierMatches(login, verifier)) {
    return { error: 'invalid_grant', description: 'The code_verifier does not match the code challenge.' };
  }
  const membership = await store.readReference<ProjectMembership>(login.membership);
  // Granted before the token is signed, and the code dropped: a code never serves twice.
  const granted = await store.updateResource<Login>({ ...login, granted: true, code: undefined });
  return { login: granted, membership, ...(await signLoginToken(tokens, granted, membership)) };
}

function verifierMatches(login: Login, verifier: unknown): boolean {
  if (!login.codeChallenge) {
    return true;
  }
  if (typeof verifier !== 'string' || verifier.length === 0) {
    return false;
  }
  const expected = login.codeChallengeMethod === 'S256' ? createHash('sha256').update(verifier).digest('base64url') : verifier;
  const [a, b] = [Buffer.from(expected), Buffer.from(login.codeChallenge)];
  return a.length === b.length && timingSafeEqual(a, b);
}

async function withMembership(store: FhirRepository, login: WithId<Login>, membership: WithId<ProjectMembership>): Promise<{ login: string; code?: string }> {
  const updated = await store.updateResource<Login>({ ...login, membership: createReference(membership), project: membership.project, profileType: membership.profile.reference?.split('/')[0] as Login['profileType'], meta: { ...login.meta, project: membership.project.reference?.replace('Project/', '') } });
  return { login: updated.id, code: updated.code };
}

/**
 * A membership as the project chooser shows it (`@medplum/react`'s `ChooseProfileForm`): its project and profile
 * named, as Medplum's memberships carry their references' displays.
 */
async function withDisplays(store: FhirRepository, membership: WithId<ProjectMembership>): Promise<ProjectMembership> {
  const display = async (reference: Reference | undefined): Promise<string | undefined> =>
    reference?.display ?? (reference ? getDisplayString(await store.readReference(reference).catch(() => ({ resourceType: 'Basic' }) as Resource)) : undefined);
  return {
    ...membership,
    project: { ...membership.project, display: await display(membership.project) },
    profile: { ...membership.profile, display: await display(membership.profile) },
  };
}

async function findUser(store: FhirRepository, email: string): Promise<WithId<User> | undefined> {
  const users = await store.searchResources<User>({ resourceType: 'User', filters: [{ code: 'email', operator: Operator.EXACT, value: email }], count: 2 });
  return users.find((user) => user.email?.toLowerCase() === email);
}

async function findMemberships(store: FhirRepository, user: WithId<User>): Promise<WithId<ProjectMembership>[]> {
  const memberships = await store.searchResources<ProjectMembership>({
    resourceType: 'ProjectMembership',
    filters: [{ code: 'user', operator: Operator.EQUALS, value: `User/${user.id}` }],
  });
  return memberships.filter((membership) => membership.active !== false);
}

function sendOutcome(response: Response, status: number, outcome: OperationOutcome): void {
  response.status(status).json(outcome);
}
