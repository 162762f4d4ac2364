/**
 * Gathering a tick's socket writes (pure Node, over a loopback socket): every byte arrives, in order, whether written
 * in one burst or across ticks, and the writes of one tick leave as one chunk.
 */
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { coalesceWrites } from '../../src/shared/coalesce-writes.js';
import { until } from '../support/wait.js';

const closers: (() => void)[] = [];
afterEach(() => {
  for (const c of closers.splice(0)) c();
});

async function pair(): Promise<{ client: net.Socket; received: Buffer[]; total: () => Buffer }> {
  const received: Buffer[] = [];
  const server = net.createServer((s) => s.on('data', (d: Buffer) => received.push(d)));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as net.AddressInfo;
  const client = net.connect({ port, host: '127.0.0.1', noDelay: true });
  await new Promise<void>((r) => client.once('connect', r));
  closers.push(() => {
    client.destroy();
    server.close();
  });
  return { client, received, total: () => Buffer.concat(received) };
}

describe('coalesceWrites', () => {
  it('delivers every write in order, handing the socket one batch per tick', async () => {
    const { client, total } = await pair();
    // Count what reaches the socket's own write methods (one system call each).
    let handed = 0;
    const inner = client as unknown as Record<'_write' | '_writev', (...a: unknown[]) => unknown>;
    for (const m of ['_write', '_writev'] as const) {
      const original = inner[m].bind(client);
      inner[m] = (...a: unknown[]) => {
        handed += 1;
        return original(...a);
      };
    }
    coalesceWrites(client);
    coalesceWrites(client); // idempotent: a second wrapper would not change anything either
    let expected = '';
    for (let tick = 0; tick < 3; tick++) {
      for (let i = 0; i < 500; i++) {
        const line = `t${tick}-m${i};`;
        expected += line;
        expect(client.write(line)).toBe(true);
      }
      await new Promise((r) => setImmediate(r));
    }
    await until('every byte at the server', () => total().length === Buffer.byteLength(expected), { timeoutMs: 5000, everyMs: 5 });
    expect(total().toString()).toBe(expected);
    // Without coalescing the socket gets a call per write (1,500 here).
    expect(handed).toBe(3);
  });

  it('leaves anything that is not a socket alone', () => {
    expect(() => coalesceWrites(undefined)).not.toThrow();
    expect(() => coalesceWrites({ write: 1 })).not.toThrow();
  });
});
