import { createServer, type Server } from 'node:net';
import { checkPortIsFree, describeListenFailure } from './listen-failure.ts';

describe('a port the host cannot listen on', () => {
  let taken: Server;
  let port: number;

  beforeAll(async () => {
    taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    port = (taken.address() as { port: number }).port;
  });

  afterAll(() => new Promise<void>((resolve) => taken.close(() => resolve())));

  test('a port in use is one line naming it and the PORT to start on instead', async () => {
    await expect(checkPortIsFree({ port, hostname: '127.0.0.1', startCommand: 'npm start' })).rejects.toMatchObject({
      name: 'StartUpError',
      message: `port ${port} on 127.0.0.1 is already in use (by another fhirgate, or another program). Stop it, or start this one on another port: PORT=${port + 1} npm start`,
    });
  });

  test('a free port, and port 0, pass; the probe leaves the port free for the host', async () => {
    const free = createServer();
    await new Promise<void>((resolve) => free.listen(0, '127.0.0.1', resolve));
    const freePort = (free.address() as { port: number }).port;
    await new Promise<void>((resolve) => free.close(() => resolve()));

    await expect(checkPortIsFree({ port: freePort, hostname: '127.0.0.1', startCommand: 'fhirgate' })).resolves.toBeUndefined();
    await expect(checkPortIsFree({ port: 0, hostname: '127.0.0.1', startCommand: 'fhirgate' })).resolves.toBeUndefined();
    const host = createServer();
    await new Promise<void>((resolve, reject) => host.once('error', reject).listen(freePort, '127.0.0.1', resolve));
    await new Promise<void>((resolve) => host.close(() => resolve()));
  });

  test('privileges and addresses are named too; any other failure is left as it is', () => {
    const address = { port: 80, hostname: '203.0.113.9', startCommand: 'fhirgate' };
    expect(describeListenFailure(Object.assign(new Error('listen EACCES'), { code: 'EACCES' }), address)?.message).toBe(
      'port 80 on 203.0.113.9 needs privileges this process does not have. Use a port above 1023: PORT=8103 fhirgate'
    );
    expect(describeListenFailure(Object.assign(new Error('listen EADDRNOTAVAIL'), { code: 'EADDRNOTAVAIL' }), address)?.message).toMatch(
      /^HOST=203\.0\.113\.9 is not an address of this machine/
    );
    expect(describeListenFailure(new Error('something else'), address)).toBeUndefined();
  });
});
