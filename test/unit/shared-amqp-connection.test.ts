/**
 * The sharing logic of one process connection (src/endpoints/amqp/shared-connection.ts) against a fake broker
 * connection: who connects, who hears what, when it closes. Against the real RabbitMQ (many bridges on one connection,
 * a broker-side close, a channel error of one bridge): test/integration/amqp-endpoints.test.ts and
 * test/integration/shared-connections.test.ts.
 */
import { EventEmitter } from 'node:events';
import type { ChannelModel } from 'amqplib';
import { describe, expect, it } from 'vitest';
import type { AmqpConnectionConfig } from '../../src/config/protocols/amqp-schema.js';
import { parseBroker } from '../../src/config/protocols/amqp-address.js';
import type { AmqpSession } from '../../src/endpoints/amqp/connect.js';
import { SharedAmqpConnection, type AmqpLeaseEvents } from '../../src/endpoints/amqp/shared-connection.js';
import { TransientError } from '../../src/shared/errors.js';
import { silentLogger } from '../../src/shared/log.js';

const conn: AmqpConnectionConfig = { name: 'rabbit', type: 'amqp', urls: ['amqp://127.0.0.1:5672'], heartbeat: 10, connectTimeout: 1000 };

/** A broker connection that does what the test says: channels until channelMax, close, blocked. */
class FakeModel extends EventEmitter {
  closed = false;
  channels = 0;
  readonly connection = { channelMax: 3 };

  createChannel(): Promise<EventEmitter> {
    if (this.channels >= this.connection.channelMax) return Promise.reject(new Error('No channels left to allocate'));
    this.channels += 1;
    return Promise.resolve(new EventEmitter());
  }

  createConfirmChannel(): Promise<EventEmitter> {
    return this.createChannel();
  }

  close(): Promise<void> {
    this.closed = true;
    this.emit('close');
    return Promise.resolve();
  }

  /** The broker closes it (320 CONNECTION_FORCED). */
  forced(): void {
    this.closed = true;
    this.emit('close', Object.assign(new Error('Connection closed: 320 (CONNECTION-FORCED) with message "CONNECTION_FORCED - test"'), { code: 320 }));
  }
}

function world(opts: { fail?: () => Error | undefined } = {}) {
  const models: FakeModel[] = [];
  const names: string[] = [];
  let idle = 0;
  const connect = async (_c: AmqpConnectionConfig, o: { connectionName: string }): Promise<AmqpSession> => {
    // A tick, so that callers can pile up on one attempt.
    await new Promise((r) => setImmediate(r));
    const failure = opts.fail?.();
    if (failure) throw failure;
    const model = new FakeModel();
    models.push(model);
    names.push(o.connectionName);
    return { model: model as unknown as ChannelModel, broker: parseBroker(conn.urls[0]!), where: 'rabbit (127.0.0.1:5672)', user: 'guest' };
  };
  const shared = new SharedAmqpConnection(conn, 'publish', 'publish', silentLogger, { changed: () => undefined, idle: () => (idle += 1) }, connect);
  return { shared, models, names, idleCount: () => idle };
}

function listener() {
  const heard = { lost: [] as TransientError[], blocked: [] as boolean[] };
  const events: AmqpLeaseEvents = { lost: (e) => heard.lost.push(e), blocked: (b) => heard.blocked.push(b) };
  return { heard, events };
}

describe('a shared AMQP connection', () => {
  it('is made once for every caller that asks while it connects; each gets a lease on the same connection', async () => {
    const w = world();
    const leases = await Promise.all(Array.from({ length: 50 }, () => w.shared.acquire(listener().events)));
    expect(w.models).toHaveLength(1);
    expect(new Set(leases.map((l) => l.connectionName))).toEqual(new Set([w.names[0]]));
    expect(w.names[0]).toMatch(/^broker-bridge rabbit publish #\d+\.\d+$/);
    expect(w.shared.state).toMatchObject({ leases: 50, channels: 0 });
  });

  it('a failed connect fails every caller waiting on it, and the next caller tries again', async () => {
    let failures = 1;
    const w = world({ fail: () => (failures-- > 0 ? new TransientError('connection to rabbit (127.0.0.1:5672) was refused') : undefined) });
    const results = await Promise.allSettled([w.shared.acquire(listener().events), w.shared.acquire(listener().events)]);
    expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected']);
    expect(w.shared.idle).toBe(true);
    const lease = await w.shared.acquire(listener().events);
    expect(lease.connectionName).toBe(w.names[0]);
    expect(w.models).toHaveLength(1);
  });

  it('a lost connection reaches every lease once; the next acquire makes a new connection', async () => {
    const w = world();
    const a = listener();
    const b = listener();
    const la = await w.shared.acquire(a.events);
    await w.shared.acquire(b.events);
    w.models[0]!.forced();
    w.models[0]!.emit('close', new Error('again'));
    expect(a.heard.lost).toHaveLength(1);
    expect(b.heard.lost).toHaveLength(1);
    expect(a.heard.lost[0]!.message).toMatch(/^connection to rabbit \(127\.0\.0\.1:5672\) was closed by the broker \(320/);
    // A lease whose connection is gone has nothing left to let go of, and hears nothing more.
    la.release();
    expect(w.shared.state).toBeUndefined();
    const c = listener();
    const lc = await w.shared.acquire(c.events);
    expect(w.models).toHaveLength(2);
    expect(lc.connectionName).not.toBe(la.connectionName);
    expect(a.heard.lost).toHaveLength(1);
  });

  it('closes when the last lease lets go, not before; a release twice counts once', async () => {
    const w = world();
    const la = await w.shared.acquire(listener().events);
    const lb = await w.shared.acquire(listener().events);
    la.release();
    la.release();
    expect(w.models[0]!.closed).toBe(false);
    expect(w.shared.state?.leases).toBe(1);
    lb.release();
    expect(w.models[0]!.closed).toBe(true);
    expect(w.shared.idle).toBe(true);
    expect(w.idleCount()).toBeGreaterThan(0);
  });

  it('connection.blocked and unblocked reach every lease; a lease taken while blocked reads it', async () => {
    const w = world();
    const a = listener();
    const b = listener();
    await w.shared.acquire(a.events);
    await w.shared.acquire(b.events);
    w.models[0]!.emit('blocked', 'low on memory');
    w.models[0]!.emit('blocked', 'low on memory');
    const late = await w.shared.acquire(listener().events);
    expect(late.blocked).toBe(true);
    w.models[0]!.emit('unblocked');
    expect(a.heard.blocked).toEqual([true, false]);
    expect(b.heard.blocked).toEqual([true, false]);
    expect(late.blocked).toBe(false);
  });

  it('counts channels, and a connection without a free channel says to raise pool', async () => {
    const w = world();
    const lease = await w.shared.acquire(listener().events);
    await lease.createChannel();
    await lease.createConfirmChannel();
    await lease.queueDepth('q').catch(() => undefined);
    expect(w.shared.state).toMatchObject({ channels: 3, channelMax: 3 });
    const err = await lease.createChannel().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TransientError);
    expect((err as Error).message).toMatch(/has all its 3 channels in use .*pool on connection 'rabbit'/);
  });
});
