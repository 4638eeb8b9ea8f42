import express, { type NextFunction, type Request, type Response } from 'express';
import request from 'supertest';
import { AppError, toAppError } from '../errors.ts';
import { fromBodyParserError, isNestedDeeperThan, readJsonBody } from './json-body.ts';

/** An app that answers the parsed body back, and any error as `{status, code, message}`. */
function appWith(limits: { maxBytes: number; maxDepth: number; anyContentType?: boolean }) {
  return express()
    .post('/', readJsonBody(limits), (incoming: Request, response: Response) => {
      response.json({ received: incoming.body as unknown });
    })
    .use((thrown: unknown, _incoming: Request, response: Response, _next: NextFunction) => {
      const error = toAppError(thrown);
      response.status(error.status).json({ code: error.code, message: error.message });
    });
}

const nested = (depth: number): string => `${'['.repeat(depth)}1${']'.repeat(depth)}`;

describe('readJsonBody', () => {
  const app = appWith({ maxBytes: 64 * 1024, maxDepth: 8 });
  const post = (body: string) => request(app).post('/').set('Content-Type', 'application/json').send(body);

  test('a body nested exactly as deep as allowed is read; one level more is a 400 that names the nesting', async () => {
    expect((await post(`{"a":${nested(7)}}`).expect(200)).body).toEqual({ received: { a: JSON.parse(nested(7)) } });
    const refused = await post(`{"a":${nested(8)}}`).expect(400);
    expect(refused.body).toEqual({ code: 'invalid_request', message: 'The request body nests arrays and objects more than 8 levels deep.' });
  });

  test('a body nested 30,000 levels deep (within the size) is a 400, not a crash', async () => {
    const refused = await post(nested(30_000)).expect(400);
    expect(refused.body.message).toMatch(/more than 8 levels deep/);
  });

  test('a body over the size is a 413, one that is not JSON a 400; neither answer quotes the body', async () => {
    const tooLarge = await post(JSON.stringify({ text: 'x'.repeat(70 * 1024) })).expect(413);
    expect(tooLarge.body.code).toBe('payload_too_large');
    const malformed = await post('{"client_secret":"s3cr3t-value"').expect(400);
    expect(malformed.body).toEqual({ code: 'invalid_request', message: 'The request body is not valid JSON.' });
    expect(malformed.text).not.toContain('s3cr3t-value');
  });

  test('a body that is valid JSON but not an object or an array is a 400 that says what it is, without quoting it', async () => {
    for (const [body, kind] of [['null', 'null'], ['"s3cr3t-value"', 'a string'], [' 42', 'a number'], ['true', 'a boolean']]) {
      const refused = await post(body).expect(400);
      expect([body, refused.body]).toEqual([body, { code: 'invalid_request', message: `The request body must be a JSON object, not ${kind}.` }]);
      expect(refused.text).not.toContain('s3cr3t-value');
    }
    // Not JSON at all, whatever it starts with.
    for (const body of ['s3cr3t-value', 'nul', '"unterminated']) {
      expect((await post(body).expect(400)).body.message).toBe('The request body is not valid JSON.');
    }
  });

  test('other content types are left unread', async () => {
    const response = await request(app).post('/').set('Content-Type', 'text/plain').send('[[[[[[[[[[1]]]]]]]]]]').expect(200);
    expect(response.body).toEqual({});
  });
});

describe('readJsonBody with anyContentType', () => {
  const app = appWith({ maxBytes: 1024, maxDepth: 2, anyContentType: true });

  test("a JSON body is read whatever type it declares: curl -d's form type, text/plain, multipart", async () => {
    for (const contentType of ['application/x-www-form-urlencoded', 'text/plain', 'multipart/form-data; boundary=x']) {
      const response = await request(app).post('/').set('Content-Type', contentType).send('{"model":"demo/echo"}').expect(200);
      expect([contentType, response.body]).toEqual([contentType, { received: { model: 'demo/echo' } }]);
    }
  });

  test('a body that is not JSON is the 400 that says so, and the limits hold', async () => {
    const form = (body: string) => request(app).post('/').set('Content-Type', 'application/x-www-form-urlencoded').send(body);
    expect((await form('messages=hello').expect(400)).body).toEqual({ code: 'invalid_request', message: 'The request body is not valid JSON.' });
    expect((await form('[[[1]]]').expect(400)).body.message).toBe('The request body nests arrays and objects more than 2 levels deep.');
    expect((await form(JSON.stringify({ text: 'x'.repeat(2048) })).expect(413)).body.code).toBe('payload_too_large');
  });
});

describe('isNestedDeeperThan', () => {
  test.each([
    [1, 0, false],
    [null, 0, false],
    [{}, 1, false],
    [{}, 0, true],
    [[[1]], 2, false],
    [[[1]], 1, true],
    [{ a: [{ b: {} }] }, 4, false],
    [{ a: [{ b: {} }] }, 3, true],
    [[1, [2, [3]], { x: 'y' }], 3, false],
  ])('%j deeper than %i: %s', (value, maxDepth, deeper) => {
    expect(isNestedDeeperThan(value, maxDepth)).toBe(deeper);
  });
});

describe('fromBodyParserError', () => {
  test('body-parser errors become AppErrors without the parser error (it holds the body) as their cause', () => {
    const parseFailure = Object.assign(new SyntaxError('Unexpected token'), { type: 'entity.parse.failed', status: 400, body: '{"secret":' });
    const error = fromBodyParserError(parseFailure);
    expect(error).toBeInstanceOf(AppError);
    expect(error?.status).toBe(400);
    expect(error?.cause).toBeUndefined();
    expect(fromBodyParserError({ type: 'entity.too.large', status: 413 })?.status).toBe(413);
    expect(fromBodyParserError({ type: 'parameters.too.many', status: 413 })?.status).toBe(413);
    expect(fromBodyParserError({ type: 'request.size.invalid', status: 400 })?.code).toBe('invalid_request');
    expect(fromBodyParserError(new Error('not a body error'))).toBeUndefined();
  });
});
