import { delimiter, sep } from 'node:path';

/**
 * The environment of a user's shell: npm's own additions for this test run taken out of PATH (its node_modules/.bin,
 * where the project's Node 24 is), so `npm` and `node` are the machine's.
 */
export function usersShell(): NodeJS.ProcessEnv {
  const path = (process.env.PATH ?? '').split(delimiter).filter((entry) => !entry.includes(`${sep}node_modules${sep}`) && !entry.endsWith(`${sep}node_modules`));
  const environment: NodeJS.ProcessEnv = { ...process.env, PATH: path.join(delimiter) };
  for (const name of Object.keys(environment)) {
    if (name.startsWith('npm_')) {
      delete environment[name];
    }
  }
  return environment;
}
