/**
 * Build step after `tsc -p tsconfig.build.json`: tsc rewrites relative `.ts` import specifiers to `.js` in the
 * JavaScript it emits but leaves them as written in the declaration files (microsoft/TypeScript#61037), where
 * they would name files dist/ does not contain. This rewrites them to `.js` and fails the build if any emitted
 * file still imports a relative `.ts` path.
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const OUT_DIR = process.argv[2] ?? 'dist';

// `from './x.ts'`, `import './x.ts'`, `import('./x.ts')`: relative specifiers only; packages are left alone.
const RELATIVE_TS_SPECIFIER = /(\b(?:from|import)\s*\(?\s*)(['"])(\.{1,2}\/[^'"\n]*?)\.ts\2/g;

/** Every file under a folder, recursively. */
function listFiles(folder: string): string[] {
  return readdirSync(folder, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? listFiles(join(folder, entry.name)) : [join(folder, entry.name)]
  );
}

const emitted = listFiles(OUT_DIR);
let rewritten = 0;
for (const file of emitted.filter((name) => name.endsWith('.d.ts'))) {
  const text = readFileSync(file, 'utf8');
  const fixed = text.replace(RELATIVE_TS_SPECIFIER, '$1$2$3.js$2');
  if (fixed !== text) {
    writeFileSync(file, fixed);
    rewritten += 1;
  }
}

const leftovers = emitted
  .filter((name) => name.endsWith('.js') || name.endsWith('.d.ts'))
  .filter((name) => new RegExp(RELATIVE_TS_SPECIFIER.source).test(readFileSync(name, 'utf8')));
if (leftovers.length > 0) {
  process.stderr.write(`Relative .ts imports left in the build output: ${leftovers.join(', ')}\n`);
  process.exit(1);
}
process.stdout.write(`${OUT_DIR}/: ${emitted.length} files, .js import specifiers in ${rewritten} declaration files rewritten\n`);
