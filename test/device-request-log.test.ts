/**
 * What the host's log tells an operator about a device's requests, on standalone hosts whose log lines the test
 * reads: `/graphql`'s request line names the device, and the code of a document it may not send; a request the
 * server could not complete is one error line with its request id, its code and the kind of its cause (never the
 * token, the key or the store's own words), and a refusal is none; a store whose file was deleted is such a line
 * too, with no cause. A host that gives no logger (the host port's `logger` is optional) answers alike: the token
 * is issued, and the failure is a GraphQL error.
 */
import { rm } from 'node:fs/promises';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { OperationOutcomeError, serverError } from '@medplum/core';
import type { FhirRepository } from '@medplum/fhir-router';
import type { Device } from '@medplum/fhirtypes';
import express from 'express';
import { createFhirgatePlugin } from '../plugin/create-plugin.ts';
import type { HostLogger } from '../plugin/host.ts';
import type { SeededProject } from '../plugin/hosts/standalone/seed.ts';
import type { FhirgateOptionsInput } from '../plugin/options.ts';
import { startTestHost, type TestHost } from './support/test-host.ts';
import { withWatchedReads, type WatchedReads } from './support/watched-reads.ts';

const SYSTEM = 'urn:example:ward-devices';
const MONITOR_KEY = 'Bedside-Monitor-Key-4Rk8Vw2Qz7';
const STORE_FAULT = 'The FHIR store could not complete the operation';

/** One line of the host's log. */
type LogLine = readonly [level: keyof HostLogger, message: string, fields: Record<string, unknown> | undefined];

function capturingLogger(lines: LogLine[]): HostLogger {
  return {
    debug: (message, fields) => lines.push(['debug', message, fields]),
    info: (message, fields) => lines.push(['info', message, fields]),
    warn: (message, fields) => lines.push(['warn', message, fields]),
    error: (message, fields) => lines.push(['error', message, fields]),
  };
}

function pluginFor(project: SeededProject): FhirgateOptionsInput {
  return {
    device_auth: {
      valid_keys: { 'bedside-1': MONITOR_KEY },
      jwt_secret: 'request-log-device-signing-secret-0123456789',
      identifier_system: SYSTEM,
      project_id: project.projectId,
      auto_register: true,
    },
  };
}

async function deviceToken(baseUrl: string): Promise<string> {
  const response = await fetch(`${baseUrl}account/api/token/device/`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ device_id: 'bedside-1', api_key: MONITOR_KEY }),
  });
  expect(response.status).toBe(200);
  return ((await response.json()) as { access: string }).access;
}

function postGraphql(baseUrl: string, token: string, query: string): Promise<Response> {
  return fetch(`${baseUrl}graphql`, { method: 'POST', headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${token}` }, body: JSON.stringify({ query }) });
}

describe('a device on /graphql, in the host log', () => {
  let host: TestHost;
  let reads: WatchedReads<FhirRepository>;
  const lines: LogLine[] = [];
  const errorLines = (): LogLine[] => lines.filter(([level]) => level === 'error');
  const requestLine = (requestId: string | null): Record<string, unknown> | undefined =>
    lines.find(([level, message, fields]) => level === 'info' && message === 'fhirgate request' && fields?.requestId === requestId)?.[2];

  beforeAll(async () => {
    host = await startTestHost({
      logger: capturingLogger(lines),
      wrapStore: (store) => {
        reads = withWatchedReads<FhirRepository>(store);
        return reads.repo;
      },
      pluginFor,
    });
  });

  afterAll(async () => {
    await host?.close();
  });

  const monitorDevice = async (): Promise<string> => {
    const bundle = await host.store.search<Device>({ resourceType: 'Device', filters: [{ code: 'identifier', operator: 'eq', value: `${SYSTEM}|bedside-1` }] });
    return `Device/${bundle.entry?.[0]?.resource?.id}`;
  };

  test("a document the device may not send: 200 with FORBIDDEN, and its request line names the device and the refusal's code", async () => {
    const token = await deviceToken(host.url);
    const response = await postGraphql(host.url, token, '{ PatientList { id } }');
    expect(response.status).toBe(200);
    expect(((await response.json()) as { errors: { extensions: { code: string } }[] }).errors.map((error) => error.extensions.code)).toEqual(['FORBIDDEN']);
    expect(requestLine(response.headers.get('x-request-id'))).toEqual(
      expect.objectContaining({ route: '/graphql', status: 200, caller: await monitorDevice(), code: 'forbidden' }),
    );
  });

  test('a request the store cannot complete: a 500 in GraphQL terms and one error line (request id, code, kind of cause), nothing secret; refusals log no error', async () => {
    const token = await deviceToken(host.url);
    const errorsBefore = errorLines().length;
    const unauthenticated = await postGraphql(host.url, 'not-a-token', '{ ObservationList { id } }');
    expect(unauthenticated.status).toBe(401);
    const forbidden = await postGraphql(host.url, token, '{ PatientList { id } }');
    expect(forbidden.status).toBe(200);
    expect(errorLines()).toHaveLength(errorsBefore);

    reads.fail('Device', new OperationOutcomeError(serverError(new Error(STORE_FAULT))));
    const failed = await postGraphql(host.url, token, '{ ObservationList { id } }').finally(() => reads.heal());
    expect(failed.status).toBe(500);
    expect(await failed.json()).toEqual({ errors: [{ message: 'The server could not complete the request.', extensions: { code: 'INTERNAL_SERVER_ERROR' } }] });
    const requestId = failed.headers.get('x-request-id');
    expect(errorLines().slice(errorsBefore)).toEqual([['error', 'GraphQL request failed', { requestId, code: 'internal_error', cause: 'OperationOutcomeError' }]]);
    expect(requestLine(requestId)).toEqual(expect.objectContaining({ route: '/graphql', status: 500, caller: await monitorDevice(), code: 'internal_error' }));
    const log = JSON.stringify(lines);
    for (const secret of [token, MONITOR_KEY, STORE_FAULT]) {
      expect(log).not.toContain(secret);
    }
  });

  test("a host that gives no logger issues the device's token, and answers a failed request as a GraphQL error", async () => {
    const project = host.project as SeededProject;
    const plugin = createFhirgatePlugin({ ...host.standalone.host, logger: undefined }, pluginFor(project));
    const server = await new Promise<Server>((resolve) => {
      const listening = express().use(plugin).listen(0, '127.0.0.1', () => resolve(listening));
    });
    try {
      const baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
      const token = await deviceToken(baseUrl);
      reads.fail('Device', new OperationOutcomeError(serverError(new Error(STORE_FAULT))));
      const failed = await postGraphql(baseUrl, token, '{ ObservationList { id } }').finally(() => reads.heal());
      expect(failed.status).toBe(500);
      expect(await failed.json()).toEqual({ errors: [{ message: 'The server could not complete the request.', extensions: { code: 'INTERNAL_SERVER_ERROR' } }] });
    } finally {
      await plugin.close();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});

describe('a store whose file was deleted, in the host log', () => {
  test("a device's request is a 503 in GraphQL terms, on one error line with its request id and code", async () => {
    const lines: LogLine[] = [];
    const host = await startTestHost({ logger: capturingLogger(lines), pluginFor });
    try {
      const token = await deviceToken(host.url);
      await rm(host.dataDir, { recursive: true, force: true });
      // The health check notices (as a write would): from then on the store refuses reads too.
      expect((await fetch(`${host.url}healthcheck`)).status).toBe(503);

      const failed = await postGraphql(host.url, token, '{ ObservationList { id } }');
      expect(failed.status).toBe(503);
      expect(await failed.json()).toEqual({ errors: [{ message: expect.stringMatching(/file was deleted while the server ran/), extensions: { code: 'SERVICE_UNAVAILABLE' } }] });
      const requestId = failed.headers.get('x-request-id');
      const errors = lines.filter(([level]) => level === 'error');
      expect(errors).toEqual([['error', 'GraphQL request failed', { requestId, code: 'unavailable' }]]);
      expect(errors[0]?.[2]?.cause).toBeUndefined();
    } finally {
      await host.close();
    }
  });
});
