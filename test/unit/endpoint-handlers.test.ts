/**
 * How every endpoint (AMQP and STOMP) calls the core's handlers: a throwing handler is logged and stops there; a
 * second open() is a programmer error.
 */
import { describe, expect, it } from 'vitest';
import pino from 'pino';
import { Writable } from 'node:stream';
import { deliver, openedTwice, tellLost } from '../../src/endpoints/endpoint-handlers.js';
import type { SourceDelivery } from '../../src/core/message.js';
import { TransientError, isProgrammerError } from '../../src/shared/errors.js';

function capture(): { log: pino.Logger; lines: { level: number; msg: string }[] } {
  const lines: { level: number; msg: string }[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(JSON.parse(chunk.toString()) as { level: number; msg: string });
      done();
    },
  });
  return { log: pino({ level: 'debug' }, stream), lines };
}

const delivery = { seq: 7, redelivered: false } as unknown as SourceDelivery;
const flush = (): Promise<void> => new Promise((r) => setImmediate(r));

describe('endpoint handlers', () => {
  it('a delivery handler that throws is logged as an error, and nothing is thrown to the client library', async () => {
    const { log, lines } = capture();
    expect(() =>
      deliver(
        {
          onDelivery: () => {
            throw new Error('boom');
          },
          onLost: () => undefined,
        },
        delivery,
        log,
      ),
    ).not.toThrow();
    await flush();
    expect(lines).toEqual([expect.objectContaining({ level: 50, msg: 'the delivery handler threw; the message stays unacked', seq: 7 })]);
  });

  it('an onLost handler that throws is logged as an error, and nothing is thrown', async () => {
    const { log, lines } = capture();
    const seen: TransientError[] = [];
    const lost = new TransientError('gone');
    tellLost((e) => seen.push(e), lost, log);
    expect(seen).toEqual([lost]);
    expect(() =>
      tellLost(
        () => {
          throw new Error('boom');
        },
        lost,
        log,
      ),
    ).not.toThrow();
    await flush();
    expect(lines).toEqual([expect.objectContaining({ level: 50, msg: 'onLost handler threw' })]);
  });

  it('a second open() is a TypeError, never retried', () => {
    const err = openedTwice("stomp a source '/queue/q'");
    expect(err).toBeInstanceOf(TypeError);
    expect(isProgrammerError(err)).toBe(true);
    expect(err.message).toBe("stomp a source '/queue/q': open() called twice; build a new endpoint per session");
  });
});
