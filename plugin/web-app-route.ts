/**
 * The web app (plugin/web/, built into dist/web/ by `npm run build:web`), served under `/fhirgate/app/` on the
 * server fhirgate is mounted in: the same origin as the server's API, so the app signs in with the server's own
 * login and calls the API with the user's token. Static files only; any other path under it is the app's page
 * (its router shows the page). `webApp: false` in the plugin's options turns it off.
 */
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import express, { type Router } from 'express';
import type { HostLogger } from './host.ts';

/** The path the app is served at, under the server's base. */
export const WEB_APP_PATH = '/fhirgate/app';

/**
 * The app's Content-Security-Policy: scripts, fetches, images and fonts from the server itself only, no plugins,
 * no framing, forms posting nowhere else. Styles may be inline: Mantine writes its theme's CSS variables in a
 * `<style>` element and components set `style` attributes.
 */
export const WEB_APP_CONTENT_SECURITY_POLICY = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data: blob:",
  "font-src 'self' data:",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'self'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

// From the sources (plugin/web-app-route.ts) the build is in dist/web/; from the package (dist/plugin/), in dist/web/ too.
const BUILT_APP = fileURLToPath(new URL(import.meta.url.endsWith('.ts') ? '../dist/web/' : '../web/', import.meta.url));

export function createWebAppRoute(logger: HostLogger | undefined, builtApp: string = BUILT_APP): Router {
  const router = express.Router();
  const built = existsSync(`${builtApp}index.html`);
  if (!built) {
    logger?.warn('fhirgate web app not built: run `npm run build:web`', { path: WEB_APP_PATH });
  }
  const app = express.Router();
  app.use((_request, response, next) => {
    // The app's own files only, and no framing by other sites. The policy replaces the server's own: Medplum's
    // (`default-src 'none'; base-uri 'none'`, right for its API) would block the page's script, styles and base.
    response.setHeader('Content-Security-Policy', WEB_APP_CONTENT_SECURITY_POLICY);
    response.setHeader('X-Content-Type-Options', 'nosniff');
    response.setHeader('X-Frame-Options', 'DENY');
    next();
  });
  if (built) {
    // Hashed file names under assets/: cached for good. The page itself is asked for again each time.
    app.use(
      '/assets',
      (_request, response, next) => {
        // A server that forbids caching everything (Medplum: `no-store`, right for its API) would otherwise have the
        // browser fetch the whole app again on every page: express.static keeps a Cache-Control already set.
        response.removeHeader('Cache-Control');
        response.removeHeader('Pragma');
        next();
      },
      express.static(`${builtApp}assets`, { immutable: true, maxAge: '365d', fallthrough: false, index: false })
    );
    const page = readFileSync(`${builtApp}index.html`, 'utf8');
    app.get(/.*/, (request, response) => {
      response.setHeader('Cache-Control', 'no-cache');
      // The page's asset URLs are relative: a base at the app's own path makes them right from a deep link too
      // (`/fhirgate/app/review/conversations/<id>`), whatever prefix the server mounts fhirgate at.
      const base = `<base href="${escapeAttribute(encodeURI(`${request.baseUrl}/`))}">`;
      response.type('html').send(page.replace('<head>', `<head>${base}`));
    });
  } else {
    app.get(/.*/, (_request, response) => {
      response.status(503).type('text/plain').send('The fhirgate web app is not built on this server. Run `npm run build:web` in fhirgate.\n');
    });
  }
  // `/fhirgate/app` without its slash: the page's relative asset URLs need it.
  router.get(WEB_APP_PATH, (request, response, next) => {
    if (request.path !== WEB_APP_PATH) {
      next();
      return;
    }
    const query = request.originalUrl.indexOf('?');
    response.redirect(308, `${request.baseUrl}${WEB_APP_PATH}/${query >= 0 ? request.originalUrl.slice(query) : ''}`);
  });
  router.use(`${WEB_APP_PATH}/`, app);
  return router;
}

function escapeAttribute(text: string): string {
  return text.replaceAll('&', '&amp;').replaceAll('"', '&quot;').replaceAll('<', '&lt;').replaceAll('>', '&gt;');
}
