/**
 * A port the host cannot listen on, said in one line with what to do: checked before start-up touches the data
 * folder (so a taken port leaves nothing behind), and again when the server itself listens (another process may
 * take the port in between).
 */
import { createServer } from 'node:net';
import { StartUpError } from './start-up-error.ts';

/** Where the host listens, and the command that starts it (`npm start` from the sources, `fhirgate` installed). */
export interface ListenAddress {
  readonly port: number;
  readonly hostname: string;
  readonly startCommand: string;
}

/** Resolves when `address` can be listened on now (a port of 0 always can); rejects with a StartUpError otherwise. */
export async function checkPortIsFree(address: ListenAddress): Promise<void> {
  if (address.port === 0) {
    return;
  }
  await new Promise<void>((resolve, reject) => {
    const probe = createServer();
    probe.once('error', (error) => reject(describeListenFailure(error, address) ?? error));
    probe.listen(address.port, address.hostname, () => probe.close(() => resolve()));
  });
}

/** The one-line reason for a failure to listen, or undefined for a failure that is not about the address. */
export function describeListenFailure(error: unknown, { port, hostname, startCommand }: ListenAddress): StartUpError | undefined {
  const code = typeof error === 'object' && error !== null && 'code' in error ? (error as { code: unknown }).code : undefined;
  switch (code) {
    case 'EADDRINUSE':
      return new StartUpError(
        `port ${port} on ${hostname} is already in use (by another fhirgate, or another program). Stop it, or start this one on another port: PORT=${port + 1} ${startCommand}`,
        { cause: error }
      );
    case 'EACCES':
      return new StartUpError(`port ${port} on ${hostname} needs privileges this process does not have. Use a port above 1023: PORT=8103 ${startCommand}`, {
        cause: error,
      });
    case 'EADDRNOTAVAIL':
      return new StartUpError(
        `HOST=${hostname} is not an address of this machine. HOST=127.0.0.1 listens on loopback only, HOST=0.0.0.0 on every interface.`,
        { cause: error }
      );
    default:
      return undefined;
  }
}
