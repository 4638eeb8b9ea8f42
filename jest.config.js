/** Jest runs the TypeScript sources as ES modules (swc strips the types), on the Node that npm scripts put on PATH. */
export default {
  testEnvironment: 'node',
  extensionsToTreatAsEsm: ['.ts'],
  transform: {
    '^.+\\.ts$': ['@swc/jest', { jsc: { parser: { syntax: 'typescript' }, target: 'es2023' }, module: { type: 'es6' } }],
  },
  testMatch: ['<rootDir>/{plugin,bots,test}/**/*.test.ts'],
  testTimeout: 30000,
};
