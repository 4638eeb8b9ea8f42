/**
 * The flags of fhirgate's commands (`fhirgate`, `fhirgate provision`, `npm run -s token`, `npm run e2e`), read with
 * node:util's parseArgs the same way for each: `--help` (or `-h`) prints the command's usage, and a flag it does not
 * take is one line on stderr that names it, never a stack trace.
 */
import { parseArgs, type ParseArgsConfig } from 'node:util';

/** The flags of a command line, as parseArgs reads them with `config`. */
export type CommandLineValues<T extends ParseArgsConfig> = ReturnType<typeof parseArgs<T>>['values'];

/** What was asked on the command line: the flags to act on, or an exit code when the line was answered already. */
export type CommandLine<T extends ParseArgsConfig> = { readonly values: CommandLineValues<T> } | { readonly exitCode: number };

/** Exit code of a command line the command does not take (as for a shell built-in's misuse). */
export const USAGE_EXIT_CODE = 2;

/**
 * Reads `args` (the words after the command) with `config`: `--help` anywhere writes `usage` to stdout (exit 0), a
 * wrong flag or argument writes `<command>: <what is wrong>; --help lists the options.` to stderr (exit 2).
 */
export function readCommandLine<T extends ParseArgsConfig>(command: string, usage: string, args: readonly string[], config: T): CommandLine<T> {
  if (args.includes('--help') || args.includes('-h')) {
    process.stdout.write(usage.endsWith('\n') ? usage : `${usage}\n`);
    return { exitCode: 0 };
  }
  try {
    return { values: parseArgs({ ...config, args: [...args] }).values };
  } catch (error) {
    process.stderr.write(`${command}: ${describeParseError(error)}; --help lists the options.\n`);
    return { exitCode: USAGE_EXIT_CODE };
  }
}

/**
 * parseArgs's own message, first sentence only: "Unknown option '--foo'", "Option '--membership <value>' argument
 * missing". Its advice about `--` and positionals is for programmers, and runs over several lines.
 */
function describeParseError(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  const firstLine = message.split('\n', 1)[0] ?? message;
  const sentenceEnd = firstLine.indexOf('. ');
  return (sentenceEnd === -1 ? firstLine : firstLine.slice(0, sentenceEnd)).replace(/\.$/, '');
}
