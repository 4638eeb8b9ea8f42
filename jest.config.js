/** Jest runs the TypeScript sources as ES modules (swc strips the types), on the Node that npm scripts put on PATH. */
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
  // Each test file loads its own copy of Medplum's definitions, and a process that runs file after file keeps
  // part of each; set, this limit also makes jest run the files in a worker it replaces once the worker holds
  // more than this after a file, instead of in its own process until the heap runs out.
  workerIdleMemoryLimit: '1GB',
};
