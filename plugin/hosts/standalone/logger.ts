import type { HostLogger } from '../../host.ts';

const LEVELS = ['debug', 'info', 'warn', 'error'] as const;

/** A log level of the standalone host. */
export type LogLevel = (typeof LEVELS)[number];

/** Parses a log level name, defaulting to info. */
export function parseLogLevel(value: string | undefined): LogLevel {
  return LEVELS.find((level) => level === value?.toLowerCase()) ?? 'info';
}

/** One JSON object per line on stderr, like Medplum's server logger; `silent` for tests. */
export function createJsonLogger(minimum: LogLevel | 'silent', write: (line: string) => void = (line) => process.stderr.write(line)): HostLogger {
  const threshold = minimum === 'silent' ? LEVELS.length : LEVELS.indexOf(minimum);
  const log = (level: LogLevel) => (message: string, data?: Record<string, unknown>) => {
    if (LEVELS.indexOf(level) >= threshold) {
      write(`${JSON.stringify({ level: level.toUpperCase(), timestamp: new Date().toISOString(), msg: message, ...data })}\n`);
    }
  };
  return { debug: log('debug'), info: log('info'), warn: log('warn'), error: log('error') };
}
