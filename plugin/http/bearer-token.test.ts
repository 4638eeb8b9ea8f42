import { readBearerToken } from './bearer-token.ts';

test.each([
  ['Bearer abc.def.ghi', 'abc.def.ghi'],
  ['bearer abc', 'abc'],
  ['  BEARER \t abc  ', 'abc'],
  ['Bearer', undefined],
  ['Bearer ', undefined],
  ['Bearer abc def', undefined],
  ['Basic dXNlcjpwYXNz', undefined],
  ['Bearerabc', undefined],
  ['', undefined],
  [undefined, undefined],
])('Authorization %p gives the token %p', (authorization, token) => {
  expect(readBearerToken(authorization === undefined ? {} : { authorization })).toBe(token);
});
