/**
 * `fetch` as a browser page on `origin` makes a cross-origin request: with its `Origin`, after a preflight
 * (`OPTIONS`) when the request is not a simple one (a method other than GET, HEAD or POST, or a header beyond the
 * CORS-safelisted ones, such as `Authorization` or a JSON `Content-Type`), and refused with a `TypeError`, as the
 * browser refuses it, when the server's CORS headers do not let the page have the answer. For checking, with
 * MedplumClient itself, the HTTP exchanges a browser application makes against a server of another origin.
 */

const SIMPLE_METHODS = ['GET', 'HEAD', 'POST'];
const SIMPLE_CONTENT_TYPES = ['application/x-www-form-urlencoded', 'multipart/form-data', 'text/plain'];

/** The fetch of a page served from `origin`; `log` collects each exchange as `METHOD path`. */
export function browserFetch(origin: string, log: string[] = []): typeof fetch {
  return async (input, init) => {
    const url = new URL(input instanceof Request ? input.url : input.toString());
    const method = (init?.method ?? 'GET').toUpperCase();
    const headers = new Headers(init?.headers);
    const credentialed = init?.credentials === 'include';
    if (url.origin === origin) {
      return fetch(input, init);
    }
    const unsafe = [...headers.keys()].filter((name) => !isSafelisted(name, headers.get(name) ?? ''));
    if (!SIMPLE_METHODS.includes(method) || unsafe.length > 0) {
      log.push(`OPTIONS ${url.pathname}`);
      const preflight = await fetch(url, {
        method: 'OPTIONS',
        headers: { Origin: origin, 'Access-Control-Request-Method': method, ...(unsafe.length > 0 ? { 'Access-Control-Request-Headers': unsafe.sort().join(',') } : {}) },
      });
      await preflight.arrayBuffer();
      const allowedMethods = listOf(preflight.headers.get('access-control-allow-methods'));
      const allowedHeaders = listOf(preflight.headers.get('access-control-allow-headers'));
      if (
        !preflight.ok ||
        !allowsOrigin(preflight.headers, origin, credentialed) ||
        (!SIMPLE_METHODS.includes(method) && !allowedMethods.includes(method.toLowerCase())) ||
        unsafe.some((name) => !allowedHeaders.includes(name))
      ) {
        throw new TypeError(`Failed to fetch: the preflight of ${method} ${url.pathname} from ${origin} was refused (CORS)`);
      }
    }
    headers.set('Origin', origin);
    log.push(`${method} ${url.pathname}`);
    const response = await fetch(url, { ...init, headers });
    if (!allowsOrigin(response.headers, origin, credentialed)) {
      await response.arrayBuffer();
      throw new TypeError(`Failed to fetch: ${method} ${url.pathname} from ${origin} has no CORS headers for it`);
    }
    return response;
  };
}

function isSafelisted(name: string, value: string): boolean {
  if (['accept', 'accept-language', 'content-language'].includes(name)) {
    return true;
  }
  return name === 'content-type' && SIMPLE_CONTENT_TYPES.includes(value.split(';')[0].trim().toLowerCase());
}

function allowsOrigin(headers: Headers, origin: string, credentialed: boolean): boolean {
  const allowed = headers.get('access-control-allow-origin');
  return credentialed ? allowed === origin && headers.get('access-control-allow-credentials') === 'true' : allowed === origin || allowed === '*';
}

function listOf(value: string | null): string[] {
  return (value ?? '').split(',').map((item) => item.trim().toLowerCase()).filter(Boolean);
}
