/** Jest runs the TypeScript sources as ES modules (swc strips the types), on the Node that npm scripts put on PATH. */
import { availableParallelism } from 'node:os';

export default {
  testEnvironment: 'node',
  extensionsToTreatAsEsm: ['.ts'],
  transform: {
    '^.+\\.ts$': ['@swc/jest', { jsc: { parser: { syntax: 'typescript' }, target: 'es2023' }, module: { type: 'es6' } }],
  },
  testMatch: ['<rootDir>/{plugin,bots,test,bench}/**/*.test.ts'],
  // dist/ is the build output (`npm run build`): its compiled copies must neither run as tests nor shadow modules.
  testPathIgnorePatterns: ['/node_modules/', '<rootDir>/dist/'],
  modulePathIgnorePatterns: ['<rootDir>/dist/'],
  testTimeout: 30000,
  // Jest's default, one worker fewer than the cores, leaves a machine of 2 cores running the files one at a time;
  // most of a file's time is spent waiting on the hosts, browsers and emulators it starts, so two workers there take
  // the suite from about 13 to about 7 minutes.
  maxWorkers: Math.max(2, availableParallelism() - 1),
  // Without REDIS_URL, a redis-server of the suite's own where one is installed (test/support/redis-for-tests.ts).
  globalSetup: '<rootDir>/test/support/redis-for-tests.ts',
  globalTeardown: '<rootDir>/test/support/stop-redis-for-tests.ts',
  // Each test file loads its own copy of Medplum's definitions, and a process that runs file after file keeps
  // part of each; set, this limit also makes jest run the files in a worker it replaces once the worker holds
  // more than this after a file, instead of in its own process until the heap runs out.
  workerIdleMemoryLimit: '1GB',
};
