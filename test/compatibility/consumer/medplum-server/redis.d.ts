// Medplum 5.1's packages/server/src/redis.ts (ioredis 5), as far as the mount uses it.
import type { Redis } from 'ioredis';

export type RedisWithoutDuplicate = Redis & { duplicate: never };

export declare function getRateLimitRedis(): RedisWithoutDuplicate;
