/** Jest's global teardown (jest.config.js): stops the redis-server `npm test` started, if it started one. */
export { stopRedisForTests as default } from './redis-for-tests.ts';
