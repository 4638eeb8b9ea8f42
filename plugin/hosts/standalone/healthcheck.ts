/**
 * `GET /healthcheck`, shaped like Medplum's: `ok`, `version`, `platform`, `runtime`, and whether the store and
 * Redis answer. A load balancer takes an instance out when it answers 503 (store or Redis down). The store is down
 * too when its file is no longer where it was opened (the data folder deleted): it answers reads from a file the
 * next start will not find, and refuses every write.
 */
import { Operator } from '@medplum/core';
import type { FhirRepository } from '@medplum/fhir-router';
import type { RequestHandler } from 'express';
import type { Redis } from 'ioredis';
import { FHIRGATE_VERSION } from '../../version.ts';

/** The handler, for a store and an optional Redis client. */
export function createHealthcheck(store: FhirRepository, redis: Redis | undefined): RequestHandler {
  return async (_request, response) => {
    const [storeOk, redisOk] = await Promise.all([checkStore(store), redis ? checkRedis(redis) : undefined]);
    const ok = storeOk && redisOk !== false;
    response.status(ok ? 200 : 503).json({
      ok,
      version: FHIRGATE_VERSION,
      platform: process.platform,
      runtime: process.version,
      store: storeOk,
      ...(redisOk === undefined ? {} : { redis: redisOk }),
    });
  };
}

/** A store that can tell whether its file is still there (the SQLite store); others are only asked to search. */
interface FileBackedStore {
  checkStorage(): void;
}

function isFileBacked(store: FhirRepository): store is FhirRepository & FileBackedStore {
  return typeof (store as Partial<FileBackedStore>).checkStorage === 'function';
}

async function checkStore(store: FhirRepository): Promise<boolean> {
  try {
    if (isFileBacked(store)) {
      store.checkStorage();
    }
    await store.search({ resourceType: 'Project', count: 1, filters: [{ code: '_id', operator: Operator.EQUALS, value: 'healthcheck' }] });
    return true;
  } catch {
    return false;
  }
}

// A Redis that is down holds a command in its offline queue; the check gives up sooner.
const REDIS_CHECK_TIMEOUT_MS = 1000;

async function checkRedis(redis: Redis): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), REDIS_CHECK_TIMEOUT_MS);
  });
  try {
    return await Promise.race([redis.ping().then((answer) => answer === 'PONG'), timeout]);
  } catch {
    return false;
  } finally {
    clearTimeout(timer);
  }
}
