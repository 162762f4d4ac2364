/**
 * amqplib's channel numbers as patched here (patches/amqplib+2.3.1.patch, patches/README.md): a released channel's
 * number is handed out again only once its last frames left its write buffer. Each channel writes through a buffer of
 * its own and amqplib's muxer serves a new channel's buffer before a backed-up old one; a channel closed by the broker
 * (its close-ok queued behind publishes the socket had no room for) whose number went at once to a new channel had
 * that channel's channel.open reach RabbitMQ before the close-ok, and RabbitMQ closed the whole connection (504
 * CHANNEL_ERROR "second 'channel.open' seen") — every bridge on a shared connection with it. Run against the installed
 * amqplib with a socket of the test's own that holds its writes until released.
 */
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { Duplex } from 'node:stream';
import { setImmediate as tick } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';

const require = createRequire(import.meta.url);
const lib = join(dirname(require.resolve('amqplib')), 'lib');
interface AmqplibConnection {
  channels: ({ buffer: { write(b: Buffer): boolean } } | null)[];
  freshChannel(channel: { onBufferDrain(): void }): number;
  releaseChannel(n: number): void;
  sendMethod(channel: number, method: number, fields: Record<string, unknown>): boolean;
}
const { Connection } = require(join(lib, 'connection.js')) as { Connection: new (s: Duplex) => AmqplibConnection };
const defs = require(join(lib, 'defs.js')) as { ChannelOpen: number; ChannelCloseOk: number };

/** A socket that keeps every write waiting until `release()`, then takes everything. */
class HeldSocket extends Duplex {
  readonly written: Buffer[] = [];
  private held = true;
  private waiting: (() => void)[] = [];

  override _write(chunk: Buffer, _enc: BufferEncoding, done: () => void): void {
    this.written.push(chunk);
    if (this.held) this.waiting.push(done);
    else done();
  }

  override _read(): void {
    // Nothing comes from the broker in this test.
  }

  release(): void {
    this.held = false;
    for (const done of this.waiting.splice(0)) done();
  }

  /** The method frames written, in order, as `channel:class.method`. */
  methods(): string[] {
    return this.written.filter((b) => b[0] === 1 && b.length < 1024).map((b) => `${b.readUInt16BE(1)}:${b.readUInt16BE(7)}.${b.readUInt16BE(9)}`);
  }
}

const CLOSE_OK = '20.41';
const OPEN = '20.10';
const channel = { onBufferDrain: () => undefined };

describe("amqplib's channel numbers, as patched", () => {
  it("a channel closed with frames still queued keeps its number until they left: the new channel's open never overtakes the old one's close-ok", async () => {
    const socket = new HeldSocket();
    const c = new Connection(socket);
    const old = c.freshChannel(channel);
    expect(old).toBe(1);
    // A publish the socket has no room for (over its 16 KiB high-water mark), ten more behind it, then the close-ok for
    // the broker's close: the muxer takes one frame from each buffer in turn.
    c.channels[old]!.buffer.write(Buffer.alloc(64 * 1024, 0x70));
    for (let i = 0; i < 10; i++) c.channels[old]!.buffer.write(Buffer.alloc(100, 0x70));
    c.sendMethod(old, defs.ChannelCloseOk, {});
    await tick();
    c.releaseChannel(old);

    const next = c.freshChannel(channel);
    c.sendMethod(next, defs.ChannelOpen, { outOfBand: '' });
    socket.release();
    for (let i = 0; i < 10; i++) await tick();

    // On the wire: the old channel's close-ok, and no channel.open on its number before it.
    const methods = socket.methods();
    const closeOk = methods.indexOf(`${old}:${CLOSE_OK}`);
    expect(closeOk, JSON.stringify(methods)).toBeGreaterThanOrEqual(0);
    const openOnOld = methods.indexOf(`${old}:${OPEN}`);
    expect(openOnOld === -1 || openOnOld > closeOk, `channel.open on ${old} before its close-ok: ${JSON.stringify(methods)}`).toBe(true);
    expect(next, 'the released number is not handed out while its close-ok is queued').not.toBe(old);
    // Once the old buffer is drained, its number is free again: numbers do not leak.
    expect(c.freshChannel(channel)).toBe(old);
  });

  it('a channel released with nothing queued frees its number within a few turns of the event loop; a thousand opened and released in turn reuse the same few numbers', async () => {
    const socket = new HeldSocket();
    socket.release();
    const c = new Connection(socket);
    const seen = new Set<number>();
    for (let i = 0; i < 1000; i++) {
      const n = c.freshChannel(channel);
      seen.add(n);
      c.sendMethod(n, defs.ChannelOpen, { outOfBand: '' });
      await tick();
      c.releaseChannel(n);
      await tick();
      await tick();
    }
    expect(seen.size).toBeLessThanOrEqual(3);
    expect(socket.methods().filter((m) => m.endsWith(OPEN))).toHaveLength(1000);
  });
});
