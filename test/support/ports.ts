/** Loopback ports for tests: whether one is free now, and one the system has free (for a server a test starts). */
import { createServer, type AddressInfo } from 'node:net';

/** True when nothing listens on 127.0.0.1:`port` now. */
export function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/** A loopback port the system has free now (for a server of the test, or a child process, to listen on). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });
}
