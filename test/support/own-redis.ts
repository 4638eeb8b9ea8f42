/**
 * A redis-server of the caller's own, on a free loopback port and as its child process, for Redis faults: paused
 * (SIGSTOP: connections stay open and nothing answers), killed (SIGKILL: connections refused), started again on
 * the same port. The Redis on REDIS_URL is shared and never touched by a fault.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createServer, connect } from 'node:net';

/** A running redis-server that the caller may pause, kill and start again. */
export interface OwnRedis {
  readonly port: number;
  /** `redis://127.0.0.1:<port>` */
  readonly url: string;
  /** SIGSTOP: the server holds its connections and answers nothing. */
  pause(): void;
  /** SIGCONT after `pause`. */
  resume(): void;
  /** SIGKILL, and waits until the process is gone: connections are refused. */
  kill(): Promise<void>;
  /** A new server on the same port (after `kill`), once it accepts connections. */
  restart(): Promise<void>;
  /** Ends the server, whatever its state. */
  stop(): Promise<void>;
}

/** Whether `redis-server` can be run here. */
export function hasRedisServer(): boolean {
  return spawnSync('redis-server', ['--version'], { stdio: 'ignore' }).status === 0;
}

/** Starts a redis-server on a free loopback port, without persistence. */
export async function startOwnRedis(): Promise<OwnRedis> {
  const port = await findFreePort();
  let child = await launch(port);
  const exited = (process: ChildProcess): Promise<void> =>
    process.exitCode !== null || process.signalCode !== null ? Promise.resolve() : new Promise((resolve) => process.once('exit', () => resolve()));
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    pause: () => child.kill('SIGSTOP'),
    resume: () => child.kill('SIGCONT'),
    kill: async () => {
      const gone = exited(child);
      child.kill('SIGKILL');
      await gone;
    },
    restart: async () => {
      child = await launch(port);
    },
    stop: async () => {
      const gone = exited(child);
      child.kill('SIGKILL');
      await gone;
    },
  };
}

async function launch(port: number): Promise<ChildProcess> {
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
  // Never outlives its starter, even one that exits without stopping it (SIGKILL also ends a paused server).
  const killOnExit = (): void => {
    child.kill('SIGKILL');
  };
  process.once('exit', killOnExit);
  child.once('exit', () => process.removeListener('exit', killOnExit));
  const deadline = Date.now() + 10_000;
  while (!(await accepts(port))) {
    if (child.exitCode !== null || Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`redis-server did not start on port ${port}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  return child;
}

function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

async function findFreePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === 'string') {
    throw new Error('expected a TCP address');
  }
  return address.port;
}
