import type { IncomingHttpHeaders } from 'node:http';

/**
 * The bearer token of a request, or undefined when the Authorization header carries none.
 *
 * No `split` with a regular expression: in a process where V8's RegExp fast paths are off (something in Medplum
 * 5.1.29's server turns them off), splitting a 1 KB token that way took 50–180 µs, twice a turn
 * (docs/compatibility.md, "fhirgate's CPU per turn").
 */
export function readBearerToken(headers: IncomingHttpHeaders): string | undefined {
  const header = headers.authorization?.trim();
  const gap = header ? WHITESPACE_RUN.exec(header) : null;
  if (!header || !gap) {
    return undefined;
  }
  const token = header.slice(gap.index + gap[0].length);
  return header.slice(0, gap.index).toLowerCase() === 'bearer' && !WHITESPACE.test(token) ? token : undefined;
}

const WHITESPACE_RUN = /\s+/;
const WHITESPACE = /\s/;
