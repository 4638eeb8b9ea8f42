/**
 * `npm run build`'s first step (`prebuild`): empties dist/ of an earlier build, so that nothing compiled from a source
 * since removed is packed, but leaves dist/web/ in place. The web app's build replaces it file by file and removes what
 * it no longer has (scripts/build-web-app.ts), so a server serving the app meanwhile (`npm start`, or a test's host
 * beside `npm pack`) keeps finding its page's files.
 */
import { existsSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';

const DIST = 'dist';
const KEPT = 'web';

if (existsSync(DIST)) {
  for (const entry of readdirSync(DIST)) {
    if (entry !== KEPT) {
      rmSync(join(DIST, entry), { recursive: true, force: true });
    }
  }
}
