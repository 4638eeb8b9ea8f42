/**
 * The web app's build (`npm run build:web`): the React app in plugin/web/ bundled into static assets in dist/web/,
 * which the plugin serves under `/fhirgate/app/` (plugin/web-app-route.ts). Relative asset URLs, so the same build
 * works under whatever prefix the server mounts fhirgate at.
 */
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

export const WEB_APP_SOURCE = fileURLToPath(new URL('.', import.meta.url));
export const WEB_APP_OUT_DIR = fileURLToPath(new URL('../../dist/web/', import.meta.url));

// Mantine's breakpoints, which @medplum/react's styles name as `$mantine-breakpoint-*` in media queries (Mantine's
// PostCSS preset fills them in; this is that one part of it).
const MANTINE_BREAKPOINTS: Readonly<Record<string, string>> = { xs: '36em', sm: '48em', md: '62em', lg: '75em', xl: '88em' };

const mantineBreakpoints = {
  postcssPlugin: 'mantine-breakpoints',
  AtRule: {
    media(rule: { params: string }): void {
      rule.params = rule.params.replace(/\$mantine-breakpoint-(xs|sm|md|lg|xl)/g, (_match, size: string) => MANTINE_BREAKPOINTS[size]);
    },
  },
};

export default defineConfig({
  root: WEB_APP_SOURCE,
  base: './',
  logLevel: 'warn',
  css: { postcss: { plugins: [mantineBreakpoints] } },
  build: {
    outDir: WEB_APP_OUT_DIR,
    emptyOutDir: true,
    // The app is one page; what it loads is measured (gzip) and reported by scripts/build-web-app.ts.
    chunkSizeWarningLimit: 2000,
    reportCompressedSize: false,
    rolldownOptions: {
      // Mantine and React Router mark their modules `'use client'` (for React Server Components); a browser bundle has no use for it.
      onwarn(warning, warn) {
        if (warning.code !== 'MODULE_LEVEL_DIRECTIVE') {
          warn(warning);
        }
      },
    },
  },
});
