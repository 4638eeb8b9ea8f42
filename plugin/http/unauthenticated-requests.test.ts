import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express, { type NextFunction, type Request, type Response } from 'express';
import { toAppError } from '../errors.ts';
import { sendWithBodyHeldBack, type HeldRequest } from '../../test/support/raw-http.ts';
import { readJsonBody } from './json-body.ts';
import { holdUnauthenticatedPlace, UnauthenticatedRequests } from './unauthenticated-requests.ts';

describe('UnauthenticatedRequests', () => {
  test('gives out places up to its limit; a place given back twice counts once', () => {
    const places = new UnauthenticatedRequests(2);
    const first = places.tryEnter();
    const second = places.tryEnter();
    expect(first && second).toBeDefined();
    expect(places.tryEnter()).toBeUndefined();
    first?.();
    first?.();
    expect(places.inFlight).toBe(1);
    expect(places.tryEnter()).toBeDefined();
    expect(places.tryEnter()).toBeUndefined();
  });
});

describe('holdUnauthenticatedPlace on a listening server', () => {
  let server: Server;
  let url: string;
  const places = new UnauthenticatedRequests(2);

  beforeAll(async () => {
    const app = express()
      .post('/token', holdUnauthenticatedPlace(places), readJsonBody({ maxBytes: 1024, maxDepth: 8 }), (_incoming: Request, response: Response) => {
        response.json({ ok: true });
      })
      .use((thrown: unknown, _incoming: Request, response: Response, _next: NextFunction) => {
        const error = toAppError(thrown);
        if (error.retryAfterSeconds !== undefined) response.setHeader('Retry-After', String(error.retryAfterSeconds));
        response.status(error.status).json({ code: error.code, message: error.message });
      });
    server = app.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  });

  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  const post = async (): Promise<globalThis.Response> =>
    fetch(`${url}token`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{"a":1}' });
  const settle = async (inFlight: number): Promise<void> => {
    while (places.inFlight !== inFlight) await new Promise((resolve) => setTimeout(resolve, 10));
  };

  test('requests that hold their bodies back take the places; the next is refused with 429 at once; places come back when they go', async () => {
    const held: HeldRequest[] = [];
    for (let index = 0; index < 2; index++) {
      held.push(await sendWithBodyHeldBack(url, 'POST', '/token', { 'Content-Type': 'application/json' }, 100, '{"a":'));
    }
    await settle(2);
    const refused = await post();
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toBe('1');
    expect(await refused.json()).toEqual({ code: 'rate_limited', message: 'Too many unauthenticated requests are in progress on this server; retry shortly.' });
    expect(held.every((request) => request.status() === undefined)).toBe(true);

    held.forEach((request) => request.socket.destroy());
    await settle(0);
    const answered = await post();
    expect(answered.status).toBe(200);
    expect(await answered.json()).toEqual({ ok: true });
    expect(places.inFlight).toBe(0);
  });
});
