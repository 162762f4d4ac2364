/**
 * The AMQP source and target against the real RabbitMQ at AMQP_URL. What every endpoint promises is
 * test/support/endpoint-contract.ts, run here; this file keeps what is AMQP's own (property mapping, returns, broker
 * closes, stable IDs, connect errors). Every test uses its own queues and exchanges and deletes them afterwards;
 * assertions are about what the queues hold.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { Options } from 'amqplib';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { AmqpConnectionConfig } from '../../src/config/protocols/amqp-schema.js';
import { ConfigError, MessageRejectedError, TransientError } from '../../src/shared/errors.js';
import type { BridgeMessage, SourceDelivery } from '../../src/core/message.js';
import type { TargetEndpoint } from '../../src/core/ports.js';
import { AmqpSource } from '../../src/endpoints/amqp/amqp-source.js';
import { sharedAmqp } from '../../src/endpoints/amqp/shared-connection.js';
import { AmqpTarget } from '../../src/endpoints/amqp/amqp-target.js';
import { silentLogger } from '../../src/shared/log.js';
import { ORIGINAL_USER_ID_HEADER } from '../../src/mapping/amqp-mapping.js';
import { AmqpTestClient } from '../support/amqp.js';
import { endpointContract, type QueuedMessage, type Refusal } from '../support/endpoint-contract.js';
import { Neighbourhood } from '../support/neighbour.js';
import { Connections } from '../../src/endpoints/connections.js';
import { services, uniqueName } from '../support/services.js';
import { AmqpFrameScanner, BASIC_ACK, BASIC_PUBLISH, CONNECTION_CLOSE, ackOf, isMethod } from '../support/amqp-frames.js';
import { TcpProxy } from '../support/tcp-proxy.js';
import { text } from '../support/text.js';
import { sleep, until } from '../support/wait.js';

const run = promisify(execFile);

function connection(urls = [services.amqpUrl], connectTimeout = 5000): AmqpConnectionConfig {
  return { name: 'rabbit', type: 'amqp', urls, heartbeat: 10, connectTimeout };
}

/** Closes one connection from the broker side, found by its connection_name client property. */
async function closeFromBroker(connectionName: string): Promise<void> {
  await (await brokerSideClose(connectionName))();
}

/**
 * Finds one connection on the broker by its connection_name client property (the management API lists a new one only
 * after its next stats emission, a few seconds) and returns what closes it from the broker's side; the close is sent
 * when that is called, not before.
 */
async function brokerSideClose(connectionName: string): Promise<() => Promise<void>> {
  const mgmt = services.rabbitManagementUrl;
  if (mgmt) {
    const base = new URL(mgmt);
    const auth = `Basic ${Buffer.from(`${decodeURIComponent(base.username)}:${decodeURIComponent(base.password)}`).toString('base64')}`;
    base.username = '';
    base.password = '';
    const deadline = Date.now() + 20_000;
    let c: { name: string } | undefined;
    while (!c) {
      const list = (await (await fetch(new URL('/api/connections', base), { headers: { authorization: auth } })).json()) as {
        name: string;
        client_properties?: { connection_name?: string };
      }[];
      c = list.find((x) => x.client_properties?.connection_name === connectionName);
      if (!c) {
        if (Date.now() > deadline) throw new Error(`connection '${connectionName}' not found in the management API`);
        await sleep(250);
      }
    }
    const name = c.name;
    return async () => {
      await fetch(new URL(`/api/connections/${encodeURIComponent(name)}`, base), {
        method: 'DELETE',
        headers: { authorization: auth, 'x-reason': 'test: closed by the broker' },
      });
    };
  }
  const { stdout } = await run('rabbitmqctl', ['list_connections', 'pid', 'client_properties', '-q', '--no-table-headers']);
  const line = stdout.split('\n').find((l) => l.includes(`{"connection_name","${connectionName}"}`));
  if (!line) throw new Error(`connection '${connectionName}' not found by rabbitmqctl list_connections`);
  const pid = line.split('\t')[0]!;
  return async () => {
    await run('rabbitmqctl', ['close_connection', pid, 'test: closed by the broker']);
  };
}

/**
 * What one proxied AMQP connection carries, read frame by frame: how many basic.publish the client wrote, through which
 * delivery tag the broker has acked every publish (acks still held in the proxy included), and whether the broker
 * sent connection.close.
 */
function watchWire(proxy: TcpProxy): { publishes: number; ackedThrough: number; closed: boolean } {
  const wire = { publishes: 0, ackedThrough: 0, closed: false };
  const single = new Set<number>();
  const fromClient = new AmqpFrameScanner((f) => {
    if (isMethod(f, BASIC_PUBLISH)) wire.publishes += 1;
  });
  const fromBroker = new AmqpFrameScanner((f) => {
    if (isMethod(f, CONNECTION_CLOSE)) wire.closed = true;
    if (!isMethod(f, BASIC_ACK)) return;
    const { tag, multiple } = ackOf(f);
    if (multiple) wire.ackedThrough = Math.max(wire.ackedThrough, tag);
    else single.add(tag);
    while (single.delete(wire.ackedThrough + 1)) wire.ackedThrough += 1;
  });
  proxy.observe = (from, chunk) => (from === 'client' ? fromClient : fromBroker).push(chunk);
  return wire;
}

/** An open target on a new queue, connected through a proxy whose frames are watched; the proxy is the caller's to stop. */
async function proxiedTarget(): Promise<{ q: string; proxy: TcpProxy; wire: ReturnType<typeof watchWire>; t: AmqpTarget; lost: TransientError[] }> {
  const q = queueName();
  await client.queue(q);
  const proxy = await TcpProxy.forUrl(services.amqpUrl).start();
  const wire = watchWire(proxy);
  const t = target({ queue: q }, 15_000, connection([proxy.rewrite(services.amqpUrl)]));
  const lost: TransientError[] = [];
  await t.open({ onLost: (e) => lost.push(e) });
  return { q, proxy, wire, t, lost };
}

/** Ready + unacked messages of a queue as the queue process counts them (rabbitmqctl); undefined without it. */
/**
 * A queue's total (ready + unacked) as the broker holds it now, from `rabbitmqctl list_queues`; `{ cannot }` with a
 * sentence when rabbitmqctl cannot run here (the test then skips, saying so). A queue it does not list is a failure.
 */
async function queueTotal(queue: string): Promise<{ total: number } | { cannot: string }> {
  let stdout: string;
  try {
    ({ stdout } = await run('rabbitmqctl', ['list_queues', 'name', 'messages', '-q', '--no-table-headers']));
  } catch (err) {
    return { cannot: `rabbitmqctl cannot run here (${(err as Error).message.split('\n')[0]}), and only it reads a queue's total without the management API's 5 s sampling` };
  }
  const line = stdout.split('\n').find((l) => l.split('\t')[0] === queue);
  if (line === undefined) throw new Error(`rabbitmqctl list_queues does not list queue ${queue}`);
  return { total: Number(line.split('\t')[1]) };
}

let client: AmqpTestClient;
const queues: string[] = [];
const exchanges: string[] = [];
const endpoints: { close(): Promise<void> }[] = [];

function queueName(): string {
  const q = uniqueName('amqp-ep');
  queues.push(q);
  return q;
}

/** A headers exchange with a new queue bound to it for messages whose header `route` is `yes`; others are unroutable. */
async function routeByHeader(): Promise<{ exchange: string; queue: string }> {
  const exchange = uniqueName('amqp-ep-hx');
  exchanges.push(exchange);
  await client.ch.assertExchange(exchange, 'headers', { durable: false });
  const queue = queueName();
  await client.queue(queue);
  await client.ch.bindQueue(queue, exchange, '', { 'x-match': 'all', route: 'yes' });
  return { exchange, queue };
}

function source(queue: string, prefetch = 100): AmqpSource {
  const s = new AmqpSource(connection(), queue, prefetch, silentLogger);
  endpoints.push(s);
  return s;
}

function target(spec: { queue?: string; exchange?: string; routingKey?: string }, confirmTimeout = 15_000, conn = connection()): AmqpTarget {
  const t = new AmqpTarget(conn, spec, confirmTimeout, silentLogger);
  endpoints.push(t);
  return t;
}

/** Opens a source and collects its deliveries. */
async function consume(s: AmqpSource): Promise<{ deliveries: SourceDelivery[]; lost: TransientError[] }> {
  const deliveries: SourceDelivery[] = [];
  const lost: TransientError[] = [];
  await s.open({ onDelivery: (d) => deliveries.push(d), onLost: (e) => lost.push(e) });
  return { deliveries, lost };
}

function msg(body: string | Buffer, headers: BridgeMessage['headers'] = {}): BridgeMessage {
  return { body: Buffer.isBuffer(body) ? body : Buffer.from(body), properties: { persistent: true }, headers };
}

beforeAll(async () => {
  client = await AmqpTestClient.connect();
});

afterEach(async () => {
  await Promise.all(endpoints.splice(0).map((e) => e.close()));
  await client.deleteQueues(...queues.splice(0));
  for (const x of exchanges.splice(0)) await client.ch.deleteExchange(x).catch(() => undefined);
});

afterAll(async () => {
  await client.close();
});

/** What both runs of the contract share: the queues, and how the test client fills and reads them. */
const contractQueues = {
  url: services.amqpUrl,
  pipelined: 5000,
  queue: async (): Promise<string> => {
    const q = queueName();
    await client.queue(q);
    return q;
  },
  publish: (queue: string, messages: readonly QueuedMessage[]): Promise<void> =>
    client.publish(queue, messages.map((m) => ({ body: Buffer.from(m.body), options: { headers: m.headers } }))),
  take: async (queue: string, atLeast: number): Promise<QueuedMessage[]> => {
    await client.waitForCount(queue, (n) => n >= atLeast, 20_000);
    await client.settledCount(queue, 200);
    return (await client.drain(queue)).map((m) => ({
      body: m.body.toString(),
      headers: Object.fromEntries(Object.entries(m.headers).map(([k, v]) => [k, text(v)])),
    }));
  },
};

/** A headers exchange routes by a header of each message: `route: no` is unroutable, returned by the broker. */
async function refusalVia(makeTarget: (exchange: string) => TargetEndpoint): Promise<Refusal> {
  const { exchange, queue } = await routeByHeader();
  const route = (value: string) => (m: BridgeMessage): BridgeMessage => ({ ...m, headers: { ...m.headers, route: value } });
  return { queue, target: makeTarget(exchange), accepted: route('yes'), refused: route('no'), reason: 'unroutable' };
}

endpointContract('AMQP', () => ({
  ...contractQueues,
  source: (queue, o = {}) => {
    const s = new AmqpSource(connection(o.url ? [o.url] : undefined), queue, o.prefetch ?? 100, silentLogger);
    endpoints.push(s);
    return s;
  },
  target: (queue, o = {}) => target({ queue }, o.confirmTimeout, connection(o.url ? [o.url] : undefined)),
  refusal: () => refusalVia((exchange) => target({ exchange, routingKey: '' })),
}));

// The same contract with the connections shared as `run` shares them: each endpoint on the process's consuming or
// publishing connection beside another bridge's source and target (test/support/neighbour.ts), which nothing the
// endpoint under test does may disturb, short of losing the connection itself.
let neighbourhood: Neighbourhood | undefined;
afterEach(async () => {
  const n = neighbourhood;
  neighbourhood = undefined;
  await n?.check();
});

endpointContract('AMQP, connections shared with another bridge', () => {
  const connections = new Connections(silentLogger);
  const conn = (url: string | undefined): AmqpConnectionConfig => connection(url ? [url] : undefined);
  const n = new Neighbourhood({
    shared: true,
    make: async (url) => {
      const [from, to] = [queueName(), queueName()];
      await client.queue(from);
      await client.queue(to);
      const c = conn(url);
      return {
        from,
        to,
        source: new AmqpSource(c, from, 10, silentLogger, 10, false, connections.shared(c, 'neighbour', sharedAmqp(c))),
        target: new AmqpTarget(c, { queue: to }, 15_000, silentLogger, connections.shared(c, 'neighbour', sharedAmqp(c))),
      };
    },
    publish: (queue, body) => client.publish(queue, [{ body: Buffer.from(body) }]),
    take: async (queue, atLeast) => {
      await client.waitForCount(queue, (k) => k >= atLeast, 20_000);
      return (await client.drain(queue)).map((m) => m.body.toString());
    },
    isConnectionLoss: (e) => e.message.startsWith('connection to '),
  });
  neighbourhood = n;
  return {
    ...contractQueues,
    source: (queue, o = {}) => {
      const c = conn(o.url);
      const s = new AmqpSource(c, queue, o.prefetch ?? 100, silentLogger, undefined, false, connections.shared(c, 'under-test', sharedAmqp(c)));
      endpoints.push(s);
      return n.source(s, o.url);
    },
    target: (queue, o = {}) => {
      const c = conn(o.url);
      const t = new AmqpTarget(c, { queue }, o.confirmTimeout ?? 15_000, silentLogger, connections.shared(c, 'under-test', sharedAmqp(c)));
      endpoints.push(t);
      return n.target(t, o.url);
    },
    refusal: () =>
      refusalVia((exchange) => {
        const t = new AmqpTarget(connection(), { exchange, routingKey: '' }, 15_000, silentLogger, connections.shared(connection(), 'under-test', sharedAmqp(connection())));
        endpoints.push(t);
        return n.target(t, undefined);
      }),
  };
});

describe('AMQP source → AMQP target', () => {
  it('forwards bodies, properties and headers byte for byte (NUL bytes, a 1 MiB body, nested tables)', async () => {
    const from = queueName();
    const to = queueName();
    await client.queue(from);
    await client.queue(to);
    const big = Buffer.alloc(1024 * 1024);
    for (let i = 0; i < big.length; i++) big[i] = (i * 31) % 256;
    const full: Options.Publish = {
      contentType: 'application/octet-stream',
      contentEncoding: 'binary',
      correlationId: 'corr-1',
      replyTo: 'reply-queue',
      messageId: 'msg-1',
      type: 'order.created',
      userId: 'guest',
      appId: 'shop',
      priority: 5,
      persistent: true,
      expiration: '3600000',
      timestamp: 1_700_000_000,
      headers: {
        _AMQ_DUPL_ID: 'dup-1',
        str: 'with\u0000nul',
        int: 70000,
        neg: -3,
        dbl: 2.5,
        yes: true,
        nothing: null,
        bytes: Buffer.from([0, 1, 0, 255]),
        list: ['a', 1, [2, 3], { k: 'v' }],
        table: { nested: { deeper: 'x' }, n: 1 },
        when: { '!': 'timestamp', value: 1_700_000_123 },
      },
    };
    const published = [
      { body: Buffer.from([0, 0, 0, 1, 0]), options: full },
      { body: big, options: { persistent: true, headers: { idx: 1 } } },
      // No delivery-mode at all: stays without one, i.e. not persistent.
      { body: Buffer.alloc(0), options: { persistent: undefined, headers: {} } },
      { body: Buffer.from('plain text é'), options: { contentType: 'text/plain; charset=utf-8', persistent: false } },
    ];
    await client.publish(from, published);

    const s = source(from);
    const t = target({ queue: to });
    await t.open({ onLost: () => undefined });
    const { deliveries } = await consume(s);
    await until('all deliveries', () => deliveries.length === published.length);
    for (const d of deliveries) {
      await t.send(d.message);
      s.ack(d);
    }
    await s.ackBarrier();
    expect(await client.count(from)).toBe(0);

    const got = await client.drain(to);
    expect(got).toHaveLength(published.length);
    const sent = await AmqpTestClient.connect();
    try {
      // What the broker delivers for the originals (to compare decoded form with decoded form).
      const ref = queueName();
      await sent.queue(ref);
      await sent.publish(ref, published);
      const expected = await sent.drain(ref);
      for (let i = 0; i < published.length; i++) {
        expect(got[i]!.body.equals(published[i]!.body)).toBe(true);
        // Non-persistent is published without delivery-mode: an explicit 1 comes out as none (same meaning).
        const want = expected[i]!.properties;
        expect(got[i]!.properties).toEqual({ ...want, deliveryMode: want.deliveryMode === 2 ? 2 : undefined });
      }
    } finally {
      await sent.close();
    }
    expect(deliveries[0]!.stableId).toBe('msg-1');
    expect(deliveries[1]!.stableId).toBeUndefined();
    expect(deliveries.every((d) => !d.redelivered)).toBe(true);
  });

  it('moves a user-id other than the connection user to x-original-user-id instead of failing the channel', async () => {
    const to = queueName();
    await client.queue(to);
    const t = target({ queue: to });
    await t.open({ onLost: () => undefined });
    await t.send({ ...msg('a'), properties: { persistent: true, userId: 'alice' } });
    await t.send({ ...msg('b'), properties: { persistent: true, userId: 'guest' } });
    const got = await client.drain(to);
    expect(got.map((m) => [m.body.toString(), m.properties.userId as unknown, m.headers[ORIGINAL_USER_ID_HEADER]])).toEqual([
      ['a', undefined, 'alice'],
      ['b', 'guest', undefined],
    ]);
  });
});

describe('AMQP target outcomes', () => {
  it('rejects an unroutable publish as unroutable, and the next send works', async () => {
    const ex = uniqueName('amqp-ep-x');
    exchanges.push(ex);
    await client.ch.assertExchange(ex, 'direct', { durable: false });
    const t = target({ exchange: ex, routingKey: 'rk' });
    const lost: TransientError[] = [];
    await t.open({ onLost: (e) => lost.push(e) });

    const err = await t.send(msg('nowhere')).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(MessageRejectedError);
    expect((err as MessageRejectedError).reason).toBe('unroutable');
    expect((err as Error).message).toContain("routing key 'rk'");

    const q = queueName();
    await client.queue(q);
    await client.ch.bindQueue(q, ex, 'rk');
    await t.send(msg('somewhere'));
    expect((await client.drain(q)).map((m) => m.body.toString())).toEqual(['somewhere']);
    expect(lost).toEqual([]);
  });

  it('per-message routing keys (a templated target): routed ones confirmed, a return matched to its own key, in one batch', async () => {
    const ex = uniqueName('amqp-ep-x');
    exchanges.push(ex);
    await client.ch.assertExchange(ex, 'direct', { durable: false });
    const [eu, us] = [queueName(), queueName()];
    for (const [q, key] of [[eu, 'o.eu'], [us, 'o.us']] as const) {
      await client.queue(q);
      await client.ch.bindQueue(q, ex, key);
    }
    const t = target({ exchange: ex, routingKey: 'o.${header.region}' });
    await t.open({ onLost: () => undefined });
    // Identical bodies and properties: only the routing key tells the returned publish from the routed ones.
    const results = await t.sendBatch([msg('same'), msg('same'), msg('same'), msg('same')], ['o.eu', 'o.nowhere', 'o.us', 'o.eu']);
    expect(results.map((r) => r.outcome)).toEqual(['confirmed', 'refused', 'confirmed', 'confirmed']);
    const refused = (results[1] as { error?: Error }).error;
    expect(refused).toBeInstanceOf(MessageRejectedError);
    expect((refused as MessageRejectedError).reason).toBe('unroutable');
    expect(refused?.message).toContain("routing key 'o.nowhere'");
    await t.send(msg('alone'), 'o.us');
    expect((await client.drain(eu)).map((m) => m.body.toString())).toEqual(['same', 'same']);
    expect((await client.drain(us)).map((m) => m.body.toString())).toEqual(['same', 'alone']);
  });

  it('attributes returns to the right publishes among many in flight (headers exchange, identical bodies)', async () => {
    const { exchange, queue: q } = await routeByHeader();
    const t = target({ exchange, routingKey: '' });
    await t.open({ onLost: () => undefined });

    const plan = Array.from({ length: 200 }, (_, i) => (i % 3 === 1 ? 'no' : 'yes'));
    const results = await Promise.allSettled(plan.map((route, i) => t.send(msg('same body', { route, i }))));
    results.forEach((r, i) => {
      if (plan[i] === 'yes') expect(r.status).toBe('fulfilled');
      else {
        expect(r.status).toBe('rejected');
        expect(((r as PromiseRejectedResult).reason as MessageRejectedError).reason).toBe('unroutable');
      }
    });
    const got = await client.drain(q);
    expect(got.map((m) => m.headers.i)).toEqual(plan.flatMap((route, i) => (route === 'yes' ? [i] : [])));
  });

  it('rejects a publish to a missing exchange as not-found, then sends on a new channel once it exists', async () => {
    const ex = uniqueName('amqp-ep-missing');
    exchanges.push(ex);
    const t = target({ exchange: ex, routingKey: 'rk' });
    const lost: TransientError[] = [];
    await t.open({ onLost: (e) => lost.push(e) });

    const results = await Promise.allSettled([t.send(msg('1')), t.send(msg('2')), t.send(msg('3'))]);
    for (const r of results) {
      expect(r.status).toBe('rejected');
      const e = (r as PromiseRejectedResult).reason as MessageRejectedError;
      expect(e).toBeInstanceOf(MessageRejectedError);
      expect(e.reason).toBe('not-found');
      expect(e.message).toContain(ex);
    }

    await client.ch.assertExchange(ex, 'direct', { durable: false });
    const q = queueName();
    await client.queue(q);
    await client.ch.bindQueue(q, ex, 'rk');
    await t.send(msg('after'));
    expect((await client.drain(q)).map((m) => m.body.toString())).toEqual(['after']);
    expect(lost).toEqual([]);
  });

  // The broker's connection.close is held in the network (a proxy) while the target writes more sends: those are
  // provably on the wire, and unconfirmed, when the close reaches the target, which cannot know whether the broker
  // took them. (Issue 39: a close at a random moment under a stream of sends sometimes reached the target in the same
  // read as the acks of everything it had written, so no send was unconfirmed then; the next test is that case.)
  it('fails sends written before the broker\'s close arrived with outcomeUnknown and fires onLost once', async () => {
    const { q, proxy, wire, t, lost } = await proxiedTarget();
    try {
      const before = Array.from({ length: 100 }, (_, i) => `before ${i}`);
      await Promise.all(before.map((b) => t.send(msg(b))));

      const close = await brokerSideClose(t.connectionName!);
      proxy.holdReplies();
      await close();
      await until("the broker's connection.close, held in the network", () => wire.closed);
      const after = Array.from({ length: 50 }, (_, i) => t.send(msg(`after ${i}`)).then(() => 'confirmed' as const, (e: unknown) => e));
      await until('the 50 sends written to the socket', () => wire.publishes === before.length + 50);
      expect(lost).toEqual([]);
      proxy.releaseReplies();

      const outcomes = await Promise.all(after);
      for (const o of outcomes) {
        expect(o).toBeInstanceOf(TransientError);
        expect((o as TransientError).outcomeUnknown).toBe(true);
      }
      await until('onLost', () => lost.length > 0);
      expect(lost).toHaveLength(1);
      expect(lost[0]!.message).toMatch(/rabbit \(.*\) was closed by the broker/);
      // The session is over: a later send fails at once, as not sent.
      const late = await t.send(msg('late')).catch((e: unknown) => e);
      expect(late).toBeInstanceOf(TransientError);
      expect((late as TransientError).outcomeUnknown).toBe(false);
    } finally {
      await proxy.stop();
    }
    // Every confirmed send is in the queue once; RabbitMQ discarded what came after its close (AMQP 0-9-1
    // connection.close: a peer that sent it discards every method but close and close-ok), the unknown outcome's truth.
    expect((await client.drain(q)).map((m) => m.body.toString())).toEqual(Array.from({ length: 100 }, (_, i) => `before ${i}`));
  });

  it("reads the acks of every written send and the broker's close in one chunk: all confirmed; sends after it fail as not sent, and are not sent", async () => {
    const { q, proxy, wire, t, lost } = await proxiedTarget();
    try {
      await Promise.all(Array.from({ length: 100 }, (_, i) => t.send(msg(`m ${i}`))));

      const close = await brokerSideClose(t.connectionName!);
      proxy.holdReplies();
      const inFlight = Array.from({ length: 200 }, (_, i) => t.send(msg(`m ${100 + i}`)).then(() => 'confirmed' as const, (e: unknown) => e));
      await until('300 sends on the wire, every one acked by the broker (the acks held)', () => wire.publishes === 300 && wire.ackedThrough === 300);
      await close();
      await until("the broker's connection.close, held behind the acks", () => wire.closed);
      // What a stream of sends does when the acks resolve: it sends the next ones, now after the loss.
      const next = Promise.all(inFlight).then(() => t.send(msg('next')).catch((e: unknown) => e));
      proxy.releaseReplies();

      expect(await Promise.all(inFlight)).toEqual(Array.from({ length: 200 }, () => 'confirmed'));
      const afterLoss = await next;
      expect(afterLoss).toBeInstanceOf(TransientError);
      expect((afterLoss as TransientError).outcomeUnknown).toBe(false);
      await until('onLost', () => lost.length > 0);
      expect(lost).toHaveLength(1);
    } finally {
      await proxy.stop();
    }
    // "Not sent" was true: exactly the 300 confirmed are in the queue, 'next' is not.
    expect((await client.drain(q)).map((m) => m.body.toString())).toEqual(Array.from({ length: 300 }, (_, i) => `m ${i}`));
  });
});

describe('AMQP source', () => {
  it('redelivers unacked messages, flagged, after the source is closed; messageId is the stable id', async () => {
    const q = queueName();
    await client.queue(q);
    await client.publish(q, [{ body: Buffer.from('x'), options: { messageId: 'stable-1' } }, { body: Buffer.from('y') }]);

    const first = source(q);
    const a = await consume(first);
    await until('first deliveries', () => a.deliveries.length === 2);
    expect(a.deliveries.map((d) => d.redelivered)).toEqual([false, false]);
    await first.close();
    expect(a.lost).toEqual([]);

    const second = source(q);
    const b = await consume(second);
    await until('redeliveries', () => b.deliveries.length === 2);
    expect(b.deliveries.map((d) => [d.message.body.toString(), d.redelivered, d.stableId])).toEqual([
      ['x', true, 'stable-1'],
      ['y', true, undefined],
    ]);
  });

  it('ackBarrier resolves after the broker processed the acks', async (ctx) => {
    const q = queueName();
    await client.queue(q);
    await client.publish(
      q,
      Array.from({ length: 300 }, (_, i) => ({ body: Buffer.from(String(i)) })),
    );
    const s = source(q, 500);
    const { deliveries } = await consume(s);
    await until('deliveries', () => deliveries.length === 300);
    for (const d of deliveries.slice(0, 200)) s.ack(d);
    // Acking twice is harmless (RabbitMQ would close the channel on an unknown delivery tag).
    s.ack(deliveries[0]!);
    await s.ackBarrier();
    // checkQueue on another channel counts only ready messages (0 here: all 300 are delivered). The queue's total
    // (ready + unacked) must already show the 200 acks when the barrier resolves, with no polling.
    const total = await queueTotal(q);
    if ('total' in total) expect(total.total).toBe(100);
    await s.close();
    expect(await client.waitForCount(q, (n) => n === 100, 5000)).toBe(100);
    // Without rabbitmqctl the point of the test (no polling) cannot be seen: a skip with the reason, never a pass.
    if ('cannot' in total) ctx.skip(total.cannot);
  });

  it('fires onLost when the broker closes its connection; unacked messages go back', async () => {
    const q = queueName();
    await client.queue(q);
    await client.publish(q, [{ body: Buffer.from('a') }, { body: Buffer.from('b') }]);
    const s = source(q);
    const { deliveries, lost } = await consume(s);
    await until('deliveries', () => deliveries.length === 2);
    await closeFromBroker(s.connectionName!);
    await until('onLost', () => lost.length > 0);
    expect(lost).toHaveLength(1);
    expect(lost[0]).toBeInstanceOf(TransientError);
    expect(lost[0]!.message).toMatch(/rabbit \(.*\) was closed by the broker/);
    s.ack(deliveries[0]!); // a no-op now, never a throw
    await expect(s.ackBarrier()).rejects.toBeInstanceOf(TransientError);
    expect(await client.waitForCount(q, (n) => n === 2, 5000)).toBe(2);
  });

  it('fails open with a TransientError naming the queue when the source queue does not exist', async () => {
    const q = queueName();
    const s = source(q);
    const err = await s.open({ onDelivery: () => undefined, onLost: () => undefined }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TransientError);
    expect((err as Error).message).toContain(`source queue '${q}' does not exist`);
  });
});

describe('AMQP endpoints of several bridges on the process connections', () => {
  it("a consumer the broker cancels (its queue deleted) is that source's loss alone: another source on the connection goes on, and the connection stays", async () => {
    const connections = new Connections(silentLogger);
    const c = connection();
    const [qa, qb] = [queueName(), queueName()];
    await client.queue(qa);
    await client.queue(qb);
    const a = new AmqpSource(c, qa, 10, silentLogger, undefined, false, connections.shared(c, 'bridge-a', sharedAmqp(c)));
    const b = new AmqpSource(c, qb, 10, silentLogger, undefined, false, connections.shared(c, 'bridge-b', sharedAmqp(c)));
    endpoints.push(a, b);
    const ca = await consume(a);
    const cb = await consume(b);
    expect(a.connectionName).toBe(b.connectionName);
    await client.publish(qb, [{ body: Buffer.from('b1') }]);
    await until('b1', () => cb.deliveries.length === 1);
    await client.ch.deleteQueue(qa);
    await until("a's loss", () => ca.lost.length > 0);
    expect(ca.lost[0]!.message).toMatch(/cancelled the consumer/);
    await client.publish(qb, [{ body: Buffer.from('b2') }]);
    await until('b2', () => cb.deliveries.length === 2);
    for (const d of cb.deliveries) b.ack(d);
    await b.ackBarrier();
    expect(cb.lost).toEqual([]);
    expect(cb.deliveries.map((d) => [d.message.body.toString(), d.redelivered])).toEqual([
      ['b1', false],
      ['b2', false],
    ]);
    expect(connections.open()).toMatchObject([{ name: b.connectionName, role: 'consume', endpoints: 1 }]);
    await b.close();
    expect(connections.open()).toEqual([]);
    expect(await client.count(qb)).toBe(0);
  });

  it("a target whose channel the broker closes (a publish to a missing exchange, 404) keeps its refusals to itself: another target's sends on the connection are all confirmed", async () => {
    const connections = new Connections(silentLogger);
    const c = connection();
    const q = queueName();
    await client.queue(q);
    const missing = uniqueName('amqp-ep-missing');
    const bad = new AmqpTarget(c, { exchange: missing, routingKey: 'rk' }, 15_000, silentLogger, connections.shared(c, 'bridge-a', sharedAmqp(c)));
    const good = new AmqpTarget(c, { queue: q }, 15_000, silentLogger, connections.shared(c, 'bridge-b', sharedAmqp(c)));
    endpoints.push(bad, good);
    const lostBad: TransientError[] = [];
    const lostGood: TransientError[] = [];
    await bad.open({ onLost: (e) => lostBad.push(e) });
    await good.open({ onLost: (e) => lostGood.push(e) });
    expect(bad.connectionName).toBe(good.connectionName);
    const n = 2000;
    const goodSends = Array.from({ length: n }, (_, i) => good.send(msg(`g${i}`)));
    const badSends = await Promise.allSettled(Array.from({ length: 20 }, (_, i) => bad.send(msg(`x${i}`))));
    await Promise.all(goodSends);
    for (const r of badSends) {
      expect(r.status).toBe('rejected');
      expect(((r as PromiseRejectedResult).reason as MessageRejectedError).reason).toBe('not-found');
    }
    expect(lostGood).toEqual([]);
    expect(lostBad).toEqual([]);
    expect((await client.drain(q)).map((m) => m.body.toString())).toEqual(Array.from({ length: n }, (_, i) => `g${i}`));
  });
});

describe('AMQP connect', () => {
  it('says a refused connection is refused, without credentials', async () => {
    const t = new AmqpTarget(connection(['amqp://guest:secret@127.0.0.1:1']), { queue: 'q' }, 1000, silentLogger);
    const err = await t.open({ onLost: () => undefined }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TransientError);
    expect((err as Error).message).toBe('connection to rabbit (127.0.0.1:1) was refused');
  });

  it('reports a refused login as a configuration error', async () => {
    const u = new URL(services.amqpUrl);
    u.password = 'definitely-wrong';
    const s = new AmqpSource(connection([u.toString()]), 'q', 1, silentLogger);
    const err = await s.open({ onDelivery: () => undefined, onLost: () => undefined }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).toMatch(/refused by the broker/);
    expect((err as Error).message).not.toContain('definitely-wrong');
  });

  it('fails over to the next URL', async () => {
    const q = queueName();
    await client.queue(q);
    const t = target({ queue: q }, 15_000, connection(['amqp://guest:guest@127.0.0.1:1', services.amqpUrl]));
    await t.open({ onLost: () => undefined });
    await t.send(msg('via failover'));
    expect((await client.drain(q)).map((m) => m.body.toString())).toEqual(['via failover']);
  });

  it('times out a broker that accepts TCP but never completes the handshake', async () => {
    const proxy = await TcpProxy.forUrl(services.amqpUrl).start();
    proxy.stall();
    try {
      const t = new AmqpTarget(connection([proxy.rewrite(services.amqpUrl)], 300), { queue: 'q' }, 1000, silentLogger);
      const started = Date.now();
      const err = await t.open({ onLost: () => undefined }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(TransientError);
      expect((err as Error).message).toMatch(/timed out after 300 ms/);
      expect(Date.now() - started).toBeLessThan(3000);
    } finally {
      proxy.resume();
      await proxy.stop();
    }
  });
});
