/**
 * The STOMP adapters against each real STOMP peer (test/support/stomp-peers.ts): ActiveMQ Classic (STOMP_URL) and
 * RabbitMQ's STOMP plugin (RABBITMQ_STOMP_URL), one describe.each over both; what differs between them is asserted
 * per peer (stable message-id or not, text without content-length or bytes only). What every endpoint promises is
 * test/support/endpoint-contract.ts, run here against each peer; this file keeps what is STOMP's own. Every queue name is unique (ActiveMQ
 * queues cannot be deleted over STOMP; RabbitMQ's are deleted after the file) and every test consumes what it sent.
 * Fault injection goes through a TCP proxy on 127.0.0.1 and, for the broker restart, through scripts/activemq.sh.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import amqplib from 'amqplib';
import type { StompConnectionConfig } from '../../src/config/protocols/stomp-schema.js';
import { STOMP_READ_LIMITS } from '../../src/config/schema.js';
import { ConfigError, MessageRejectedError, PeerProtocolError, TransientError } from '../../src/shared/errors.js';
import type { BridgeMessage, SourceDelivery } from '../../src/core/message.js';
import type { TargetEndpoint } from '../../src/core/ports.js';
import { connectStomp, type StompMessage } from '../../src/endpoints/stomp/stomp-client.js';
import { StompSource } from '../../src/endpoints/stomp/stomp-source.js';
import { sharedStomp } from '../../src/endpoints/stomp/shared-session.js';
import { StompTarget } from '../../src/endpoints/stomp/stomp-target.js';
import { silentLogger as log } from '../../src/shared/log.js';
import { endpointContract, type QueuedMessage, type Refusal } from '../support/endpoint-contract.js';
import { Neighbourhood } from '../support/neighbour.js';
import { Connections } from '../../src/endpoints/connections.js';
import { services, uniqueName } from '../support/services.js';
import { publishStomp, readStomp } from '../support/stomp.js';
import { ACTIVEMQ_PEER, STOMP_PEERS, type StompPeer } from '../support/stomp-peers.js';
import { sleep, until } from '../support/wait.js';

/** Marks every message these tests send, so the final check can look for them in ActiveMQ.DLQ. */
const RUN = uniqueName('stomp-run').replace(/-/g, '_');
const RUN_HEADER = 'bbtest';

/** The peer the running describe block tests (set by its beforeAll; files run their tests one at a time, in order). */
let peer: StompPeer = ACTIVEMQ_PEER;
/** Queues on RabbitMQ (created by its STOMP plugin), deleted after the file. */
const rabbitQueues = new Set<string>();

function conn(url = peer.url, extra: Partial<StompConnectionConfig> = {}): StompConnectionConfig {
  const c: StompConnectionConfig = { name: peer.name, type: 'stomp', urls: [url], heartBeat: [10_000, 10_000], connectTimeout: 5_000, ...STOMP_READ_LIMITS, ...extra };
  if (peer.host !== undefined) c.host = peer.host;
  return c;
}

function track(queue: string): void {
  if (peer.name === 'rabbitmq') rabbitQueues.add(queue);
}

function message(body: Buffer | string, extra: Omit<Partial<BridgeMessage>, 'properties'> & { properties?: Partial<BridgeMessage['properties']> } = {}): BridgeMessage {
  return {
    body: typeof body === 'string' ? Buffer.from(body) : body,
    properties: { persistent: true, ...extra.properties },
    headers: { [RUN_HEADER]: RUN, ...extra.headers },
  };
}

async function openTarget(queue: string, c = conn(), onLost: (e: TransientError) => void = () => undefined, confirmTimeout = 15_000) {
  track(queue);
  const t = new StompTarget(c, queue, confirmTimeout, log);
  await t.open({ onLost });
  return t;
}

/** Reads n messages from a queue with a plain session (acking them unless told not to). */
async function collect(queue: string, n: number, opts: { ack?: boolean; timeout?: number } = {}): Promise<StompMessage[]> {
  const session = await connectStomp(conn(), log);
  const got: StompMessage[] = [];
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`got ${got.length} of ${n} messages from ${queue}`)), opts.timeout ?? 15_000);
      void session
        .subscribe({ destination: `/queue/${queue}`, ack: 'client-individual', 'activemq.prefetchSize': '1000', 'prefetch-count': '1000' }, (m) => {
          got.push(m);
          if (opts.ack !== false) session.ack(m);
          if (got.length === n) {
            clearTimeout(timer);
            resolve();
          }
        })
        .catch(reject);
    });
    if (opts.ack !== false) await session.sync();
  } finally {
    await session.disconnect();
  }
  return got;
}

/** Asserts that nothing arrives from a queue within ms (what does arrive is left unacked). */
async function expectEmpty(destination: string, ms = 1_000, selector?: string): Promise<void> {
  const session = await connectStomp(conn(), log);
  const got: StompMessage[] = [];
  const headers: Record<string, string> = { destination, ack: 'client-individual' };
  if (selector) headers.selector = selector;
  await session.subscribe(headers, (m) => got.push(m));
  await sleep(ms);
  await session.disconnect();
  expect(got.map((m) => m.body.toString())).toEqual([]);
}

function openSource(queue: string, prefetch = 100, c = conn()) {
  const deliveries: SourceDelivery[] = [];
  const lost: TransientError[] = [];
  track(queue);
  const source = new StompSource(c, queue, prefetch, log);
  const opened = source.open({ onDelivery: (d) => deliveries.push(d), onLost: (e) => lost.push(e) });
  return { source, deliveries, lost, opened };
}

/** A TCP proxy to the broker that can cut the connection when the client writes a given frame. */
class CuttingProxy {
  private server = net.createServer((client) => this.accept(client));
  private sockets = new Set<net.Socket>();
  /** When set, the first client chunk containing this text is not forwarded and the connection is cut. */
  cutOn: string | undefined;
  port = 0;

  constructor(private readonly upstreamUrl: string) {}

  async start(): Promise<this> {
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', () => r()));
    this.port = (this.server.address() as net.AddressInfo).port;
    return this;
  }

  get url(): string {
    return `stomp://127.0.0.1:${this.port}`;
  }

  private accept(client: net.Socket): void {
    const u = new URL(this.upstreamUrl);
    const upstream = net.connect(Number(u.port || 61613), u.hostname);
    this.sockets.add(client).add(upstream);
    const close = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', close).on('close', close);
    upstream.on('error', close).on('close', close);
    client.on('data', (d: Buffer) => {
      if (this.cutOn !== undefined && d.includes(this.cutOn)) this.cut();
      else upstream.write(d);
    });
    upstream.on('data', (d: Buffer) => client.write(d));
  }

  cut(): void {
    for (const s of this.sockets) s.destroy();
    this.sockets.clear();
  }

  async stop(): Promise<void> {
    this.cut();
    await new Promise<void>((r) => this.server.close(() => r()));
  }
}

/** Endpoints the contract suite opened, closed after each test even when it failed. */
const endpoints: { close(): Promise<void> }[] = [];
/** The neighbours of the contract run with the process's connections (test/support/neighbour.ts), checked after each test. */
let neighbourhood: Neighbourhood | undefined;
afterEach(async () => {
  await Promise.all(endpoints.splice(0).map((e) => e.close()));
  const n = neighbourhood;
  neighbourhood = undefined;
  await n?.check();
});

afterAll(async () => {
  // Nothing these tests sent may have been dead-lettered (the adapters never NACK).
  peer = ACTIVEMQ_PEER;
  await expectEmpty('/queue/ActiveMQ.DLQ', 1_000, `${RUN_HEADER} = '${RUN}'`);
  if (rabbitQueues.size > 0) {
    const c = await amqplib.connect(services.amqpUrl);
    const ch = await c.createChannel();
    for (const q of rabbitQueues) await ch.deleteQueue(q);
    await c.close();
  }
});

describe.each(STOMP_PEERS)('STOMP peer $name', (p) => {
beforeAll(() => {
  peer = p;
});

/** What both runs of the contract share: the queues, and how the test client fills and reads them. */
const contractQueues = {
  url: p.url,
  headers: { [RUN_HEADER]: RUN },
  queue: (): Promise<string> => {
    const q = uniqueName('stomp-contract');
    track(q);
    return Promise.resolve(q);
  },
  publish: (queue: string, messages: readonly QueuedMessage[]): Promise<void> => publishStomp(queue, messages, { url: p.url }),
  take: async (queue: string, atLeast: number): Promise<QueuedMessage[]> =>
    (await readStomp(queue, { url: p.url, atLeast, quietMs: 200, timeoutMs: 30_000 })).map((m) => ({ body: m.body.toString(), headers: m.headers })),
};

/** ActiveMQ closes the connection on a frame this large; the target refuses it before it is written. */
function refusalVia(makeTarget: (queue: string) => TargetEndpoint): Promise<Refusal> {
  const queue = uniqueName('stomp-contract-refusal');
  track(queue);
  const refused = (m: BridgeMessage): BridgeMessage => ({ ...m, headers: { ...m.headers, huge: 'a'.repeat(20_000) } });
  return Promise.resolve({ queue, target: makeTarget(queue), accepted: (m) => m, refused, reason: 'too-large' });
}

endpointContract(`STOMP (${p.name})`, () => ({
  ...contractQueues,
  source: (queue, o = {}) => {
    const s = new StompSource(conn(o.url ?? p.url), queue, o.prefetch ?? 100, log);
    endpoints.push(s);
    return s;
  },
  target: (queue, o = {}) => {
    const t = new StompTarget(conn(o.url ?? p.url), queue, o.confirmTimeout ?? 15_000, log);
    endpoints.push(t);
    return t;
  },
  refusal: () =>
    refusalVia((queue) => {
      const target = new StompTarget(conn(), queue, 15_000, log);
      endpoints.push(target);
      return target;
    }),
}));


// The same contract with the process's connections (src/endpoints/connections.ts): each endpoint beside another bridge's
// source and target (test/support/neighbour.ts), on their connection where the peer takes many endpoints on one
// (ActiveMQ Classic), on one of its own where it does not (RabbitMQ's STOMP plugin: StompPeerProfile.sharedConnection).
endpointContract(`STOMP (${p.name}), with the process's connections`, () => {
  const connections = new Connections(log);
  const n = new Neighbourhood({
    shared: p.name === 'activemq',
    make: (url) => {
      const [from, to] = [uniqueName('stomp-neighbour'), uniqueName('stomp-neighbour')];
      track(from);
      track(to);
      const c = conn(url ?? p.url);
      return Promise.resolve({
        from,
        to,
        source: new StompSource(c, from, 10, log, undefined, false, connections.shared(c, 'neighbour', sharedStomp(c))),
        target: new StompTarget(c, to, 15_000, log, connections.shared(c, 'neighbour', sharedStomp(c))),
      });
    },
    publish: (queue, body) => publishStomp(queue, [{ body, headers: { [RUN_HEADER]: RUN } }], { url: p.url }),
    take: async (queue, atLeast) => (await readStomp(queue, { url: p.url, atLeast, quietMs: 200, timeoutMs: 20_000 })).map((m) => m.body.toString()),
    // A STOMP endpoint has no loss of its own: a missing receipt fails the connection (src/endpoints/stomp/stomp-target.ts), for all on it.
    isConnectionLoss: () => true,
  });
  neighbourhood = n;
  return {
    ...contractQueues,
    source: (queue, o = {}) => {
      const c = conn(o.url ?? p.url);
      const s = new StompSource(c, queue, o.prefetch ?? 100, log, undefined, false, connections.shared(c, 'under-test', sharedStomp(c)));
      endpoints.push(s);
      return n.source(s, o.url);
    },
    target: (queue, o = {}) => {
      const c = conn(o.url ?? p.url);
      const t = new StompTarget(c, queue, o.confirmTimeout ?? 15_000, log, connections.shared(c, 'under-test', sharedStomp(c)));
      endpoints.push(t);
      return n.target(t, o.url);
    },
    refusal: () =>
      refusalVia((queue) => {
        const target = new StompTarget(conn(), queue, 15_000, log, connections.shared(conn(), 'under-test', sharedStomp(conn())));
        endpoints.push(target);
        return n.target(target, undefined);
      }),
  };
});

describe('StompTarget → StompSource', () => {
  it('per-message destinations (a templated target): send and one transaction whose SENDs go to several queues', async () => {
    const [fixed, a, b] = [uniqueName('stomp-route'), uniqueName('stomp-route-a'), uniqueName('stomp-route-b')];
    for (const q of [a, b]) track(q);
    const target = await openTarget(fixed);
    await target.send(message('alone to a'), `/queue/${a}`);
    const results = await target.sendBatch(
      [message('batch to b'), message('batch to fixed'), message('batch to a')],
      [`/queue/${b}`, undefined, `/queue/${a}`],
    );
    expect(results.map((r) => r.outcome)).toEqual(['confirmed', 'confirmed', 'confirmed']);
    await target.close();
    const read = async (q: string) => (await readStomp(q, { url: peer.url, quietMs: 300, timeoutMs: 15_000 })).map((m) => m.body.toString()).sort();
    expect(await read(a)).toEqual(['alone to a', 'batch to a']);
    expect(await read(b)).toEqual(['batch to b']);
    expect(await read(fixed)).toEqual(['batch to fixed']);
  });

  it('carries mapped properties, custom headers and binary bodies byte for byte', async () => {
    const queue = uniqueName('stomp-map');
    const target = await openTarget(queue);
    const binary = Buffer.from([0, 1, 2, 0, 255, 0, 10, 13, 0]);
    const big = Buffer.alloc(1024 * 1024);
    for (let i = 0; i < big.length; i++) big[i] = (i * 7) % 256;
    const text = 'grüße 🎉\r\nline: two\\three';
    const expiresAt = Date.now() + 3_600_000;
    await target.send(
      message(binary, {
        properties: {
          contentType: 'application/octet-stream',
          correlationId: 'corr-1',
          replyTo: '/queue/replies',
          messageId: 'publisher-id-1',
          type: 'order.created',
          userId: 'alice',
          appId: 'shop',
          priority: 6,
          expiresAt,
          timestamp: 1_700_000_000_123,
        },
        headers: { s: 'a:b\nc', n: 42, b: true, tbl: { x: [1, 2] }, _AMQ_DUPL_ID: 'dup-1' },
      }),
    );
    await target.send(message(big, { properties: { contentType: 'application/octet-stream' } }));
    await target.send(message(text, { properties: { contentType: 'text/plain; charset=utf-8', persistent: false } }));
    await target.close();

    const { source, deliveries, opened } = openSource(queue);
    await opened;
    await until('3 deliveries', () => deliveries.length === 3);
    const [d1, d2, d3] = deliveries as [SourceDelivery, SourceDelivery, SourceDelivery];
    expect(d1.message.body.equals(binary)).toBe(true);
    expect(d1.message.properties).toEqual({
      contentType: 'application/octet-stream',
      correlationId: 'corr-1',
      replyTo: '/queue/replies',
      messageId: 'publisher-id-1',
      type: 'order.created',
      userId: 'alice',
      appId: 'shop',
      priority: 6,
      persistent: true,
      expiresAt,
      timestamp: 1_700_000_000_123,
    });
    expect(d1.message.headers).toEqual({
      [RUN_HEADER]: RUN,
      s: 'a:b\nc',
      n: '42',
      b: 'true',
      tbl: '{"x":[1,2]}',
      _AMQ_DUPL_ID: 'dup-1',
    });
    expect(d1.redelivered).toBe(false);
    // ActiveMQ's message-id names the message; RabbitMQ's names one delivery, so it is no identity at all.
    if (p.stableMessageId) expect(d1.stableId).toMatch(/^ID:/);
    else expect(d1.stableId).toBeUndefined();
    expect(d2.message.body.equals(big)).toBe(true);
    expect(d3.message.body.toString('utf8')).toBe(text);
    expect(d3.message.properties.persistent).toBe(false);
    expect(d3.message.properties.messageId).toBe(d3.stableId); // no publisher ID: the broker's where it is stable
    expect(deliveries.map((d) => d.seq)).toEqual([1, 2, 3]);
    for (const d of deliveries) source.ack(d);
    await source.ackBarrier();
    await source.close();
    await expectEmpty(`/queue/${queue}`, 300);
  });

  it('ActiveMQ: sends text as a TextMessage (no content-length) and everything else as a BytesMessage; RabbitMQ: every body with content-length', async () => {
    const queue = uniqueName('stomp-text');
    const target = await openTarget(queue);
    await target.send(message('{"a":1}', { properties: { contentType: 'application/json' } }));
    await target.send(message('plain', { properties: { contentType: 'application/octet-stream' } }));
    await target.send(message(Buffer.from([0x61, 0, 0x62]), { properties: { contentType: 'text/plain' } }));
    await target.send(message(Buffer.from([0xc3, 0x28]), { properties: { contentType: 'text/plain' } }));
    await target.close();
    const got = await collect(queue, 4);
    expect(got.map((m) => m.headers['content-length'])).toEqual(p.name === 'activemq' ? [undefined, '5', '3', '2'] : ['7', '5', '3', '2']);
    expect(got.map((m) => m.body.toString('hex'))).toEqual(['7b2261223a317d', Buffer.from('plain').toString('hex'), '610062', 'c328']);
  });
});

describe('StompSource', () => {
  it('gets unacked messages back after close, with redelivered:true (and, on ActiveMQ, the same message-id as stableId), and never dead-letters them', async () => {
    const queue = uniqueName('stomp-redeliver');
    const target = await openTarget(queue);
    await target.send(message('once'));
    await target.close();

    let firstId: string | undefined;
    // More rounds than ActiveMQ's default maximumRedeliveries (6): closing without ack must never dead-letter.
    for (let round = 0; round < 8; round++) {
      const { source, deliveries, opened } = openSource(queue);
      await opened;
      await until(`delivery in round ${round}`, () => deliveries.length === 1);
      const d = deliveries[0] as SourceDelivery;
      expect(d.message.body.toString()).toBe('once');
      expect(d.redelivered).toBe(round > 0);
      firstId ??= d.stableId;
      expect(d.stableId).toBe(firstId);
      if (!p.stableMessageId) expect(d.stableId).toBeUndefined();
      if (round === 7) {
        source.ack(d);
        await source.ackBarrier();
      }
      await source.close();
    }
    await expectEmpty(`/queue/${queue}`, 300);
  });

  it('ackBarrier resolves once the broker processed the acks, even if the connection is cut right after', async () => {
    const queue = uniqueName('stomp-barrier');
    const target = await openTarget(queue);
    await Promise.all(Array.from({ length: 200 }, (_, i) => target.send(message(`m${i}`))));
    await target.close();

    const proxy = await new CuttingProxy(p.url).start();
    try {
      const { source, deliveries, lost, opened } = openSource(queue, 500, conn(proxy.url));
      await opened;
      await until('200 deliveries', () => deliveries.length === 200);
      for (const d of deliveries.slice(0, 150)) source.ack(d);
      await source.ackBarrier();
      await source.ackBarrier(); // nothing new: resolves at once
      proxy.cut();
      await until('onLost', () => lost.length === 1);
      expect(lost[0]).toBeInstanceOf(TransientError);
      source.ack(deliveries[199] as SourceDelivery); // a no-op on a lost connection, never a throw
      await expect(source.ackBarrier()).rejects.toBeInstanceOf(TransientError);
      await source.close();
    } finally {
      await proxy.stop();
    }
    const rest = await collect(queue, 50);
    expect(rest.map((m) => m.body.toString())).toEqual(Array.from({ length: 50 }, (_, i) => `m${150 + i}`));
    expect(rest.every((m) => m.headers.redelivered === 'true')).toBe(true);
    await expectEmpty(`/queue/${queue}`, 300);
  });

});

describe('StompTarget', () => {
  it('does not stall one-at-a-time sends without heart-beats (Nagle off)', async () => {
    const queue = uniqueName('stomp-nodelay');
    const target = await openTarget(queue, conn(p.url, { heartBeat: [0, 0] }));
    const started = Date.now();
    for (let i = 0; i < 200; i++) await target.send(message(`s${i}`));
    // With Nagle's algorithm on, each receipt waits ~40 ms: 200 sends would take ~8 s.
    expect(Date.now() - started).toBeLessThan(4_000);
    await target.close();
    expect(await collect(queue, 200)).toHaveLength(200);
  });

  it('leaves nothing of a batch whose COMMIT never reached the broker', async () => {
    const queue = uniqueName('stomp-batch-lost');
    const proxy = await new CuttingProxy(p.url).start();
    try {
      const lost: TransientError[] = [];
      const target = await openTarget(queue, conn(proxy.url), (e) => lost.push(e));
      proxy.cutOn = 'COMMIT';
      const results = await target.sendBatch(Array.from({ length: 5 }, (_, i) => message(`x${i}`)));
      // The COMMIT was written and never answered: every member's outcome is unknown.
      expect(results.map((r) => r.outcome)).toEqual(['unknown', 'unknown', 'unknown', 'unknown', 'unknown']);
      for (const r of results) expect(r.outcome !== 'confirmed' && (r.error as TransientError).outcomeUnknown).toBe(true);
      await until('onLost', () => lost.length === 1);
      await target.close();
    } finally {
      await proxy.stop();
    }
    await expectEmpty(`/queue/${queue}`, 1_000);
  });

  // A single refused send is the endpoint contract's; a refused message in a batch refuses the whole transaction.
  it('refuses the member of a batch ActiveMQ would answer by closing the connection, sends none of the others, and stays usable', async () => {
    const queue = uniqueName('stomp-too-large');
    const target = await openTarget(queue);
    const results = await target.sendBatch([message('ok'), message('y', { headers: { huge: 'a'.repeat(20_000) } })]);
    expect(results[0]).toEqual({ outcome: 'not-sent' });
    expect(results[1]).toMatchObject({ outcome: 'refused', error: expect.any(MessageRejectedError) as unknown });
    await target.send(message('fine'));
    await target.close();
    const got = await collect(queue, 1);
    expect(got.map((m) => m.body.toString())).toEqual(['fine']);
    await expectEmpty(`/queue/${queue}`, 300);
  });

});

});

describe('connectStomp', () => {
  beforeAll(() => {
    peer = ACTIVEMQ_PEER;
  });

  it("RabbitMQ: a vhost it refuses (the `host` header) is a configuration error, said in a sentence, and no crash", async () => {
    const err = await connectStomp({ ...conn(services.rabbitStompUrl), host: 'no-such-vhost' }, log).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).toContain("Virtual host 'no-such-vhost'");
    const session = await connectStomp({ ...conn(services.rabbitStompUrl), host: '/' }, log);
    expect(session.server).toMatch(/^RabbitMQ\//);
    await session.disconnect();
  });

  it("RabbitMQ: '/queue/x' for an existing queue declared otherwise is refused with a sentence that says to use '/amq/queue/x', which works", async () => {
    const queue = uniqueName('stomp-rabbit-nondurable');
    const amqp = await amqplib.connect(services.amqpUrl);
    const ch = await amqp.createChannel();
    await ch.assertQueue(queue, { durable: false });
    try {
      const rabbit = { ...conn(services.rabbitStompUrl), host: '/' };
      const lost: TransientError[] = [];
      const declaring = new StompTarget(rabbit, queue, 5_000, log);
      await declaring.open({ onLost: (e) => lost.push(e) });
      const err = await declaring.send(message('x')).then(
        () => undefined,
        (e: unknown) => e,
      );
      // An ERROR naming no receipt, put on the one SEND in flight (a refusal: dead-lettered after its attempts, not a
      // reconnect to the same refusal), then the connection closes.
      expect(err).toBeInstanceOf(MessageRejectedError);
      expect((err as Error).message).toMatch(/inequivalent arg 'durable'/);
      expect((err as Error).message).toContain("'/amq/queue/<name>'");
      await until('the connection closed', () => lost.length === 1);
      await declaring.close();

      const existing = new StompTarget(rabbit, `/amq/queue/${queue}`, 5_000, log);
      await existing.open({ onLost: () => undefined });
      await existing.send(message('fine'));
      await existing.close();
      const got = await ch.get(queue, { noAck: true });
      expect(got && got.content.toString()).toBe('fine');
    } finally {
      await ch.deleteQueue(queue);
      await amqp.close();
    }
  });

  it('tries the URLs in order (failover)', async () => {
    const closed = net.createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', () => r()));
    const port = (closed.address() as net.AddressInfo).port;
    await new Promise<void>((r) => closed.close(() => r()));
    const session = await connectStomp({ ...conn(), urls: [`stomp://127.0.0.1:${port}`, services.stompUrl] }, log);
    expect(session.version).toBe('1.2');
    await session.disconnect();
  });

  it('says in a sentence, without credentials, that the broker refused the connection', async () => {
    const closed = net.createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', () => r()));
    const port = (closed.address() as net.AddressInfo).port;
    await new Promise<void>((r) => closed.close(() => r()));
    const err = await connectStomp(conn(`stomp://user:s3cret@127.0.0.1:${port}`), log).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(TransientError);
    expect((err as Error).message).toContain('refused');
    expect((err as Error).message).not.toContain('s3cret');
  });

  it('times out a server that accepts TCP but never answers CONNECT', async () => {
    const sockets: net.Socket[] = [];
    const silent = net.createServer((s) => sockets.push(s.on('error', () => undefined)));
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', () => r()));
    const port = (silent.address() as net.AddressInfo).port;
    try {
      const started = Date.now();
      const err = await connectStomp(conn(`stomp://127.0.0.1:${port}`, { connectTimeout: 500 }), log).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(TransientError);
      expect((err as Error).message).toMatch(/handshake within 500 ms/);
      expect(Date.now() - started).toBeLessThan(3_000);
    } finally {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => silent.close(() => r()));
    }
  });

  it('reads frames cut anywhere by the socket, and ends the session on a malformed one', async () => {
    // A scripted server: the frames' bytes go out a few at a time, and the third frame breaks the grammar.
    const sockets: net.Socket[] = [];
    const server = net.createServer((s) => {
      sockets.push(s);
      s.on('error', () => undefined);
      let seen = '';
      let connected = false;
      let sent = false;
      s.on('data', (d: Buffer) => {
        seen += d.toString('latin1');
        if (!connected && seen.startsWith('CONNECT') && seen.includes('\0')) {
          connected = true;
          s.write('CONNECTED\nversion:1.2\nserver:Scripted/1.0\n\n\0');
        }
        const receipt = /SUBSCRIBE\n(?:[^\0]*\n)?receipt:([^\n]*)\n[^\0]*\0/.exec(seen)?.[1];
        if (receipt === undefined || sent) return;
        sent = true;
        const bytes = Buffer.from(
          `RECEIPT\nreceipt-id:${receipt}\n\n\0\n` +
            'MESSAGE\nsubscription:sub-1\nmessage-id:m\\c1\nx-text:gr\u00fc\u00dfe\ncontent-length:4\n\nA\0B\n\0\r\n' +
            'MESSAGE\nsubscription:sub-1\nmessage-id:m\\c2\n\nup to the NUL\0\n' +
            'MESSAGE\nno-colon\n\n\0',
        );
        const pieces: Buffer[] = [];
        for (let i = 0; i < bytes.length; i += 7) pieces.push(bytes.subarray(i, i + 7));
        const next = (): void => {
          const piece = pieces.shift();
          if (piece && !s.destroyed) s.write(piece, () => setTimeout(next, 1));
        };
        next();
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    const port = (server.address() as net.AddressInfo).port;
    try {
      const session = await connectStomp(conn(`stomp://127.0.0.1:${port}`), log);
      const lost = new Promise<TransientError>((resolve) => session.onLost(resolve));
      const got: StompMessage[] = [];
      await session.subscribe({ destination: '/queue/q', ack: 'client-individual' }, (m) => got.push(m));
      const error = await lost;
      expect(error.message).toMatch(/the broker sent a malformed frame, so the bridge closed the connection: a MESSAGE frame has a header line without ':'/);
      // Counted as bridge_protocol_errors_total{reason="malformed"} by the supervisor.
      expect(error).toBeInstanceOf(PeerProtocolError);
      expect((error as PeerProtocolError).reason).toBe('malformed');
      expect(session.isOpen).toBe(false);
      // The two frames before it arrived whole, unescaped, the binary body byte for byte.
      expect(got.map((m) => [m.headers['message-id'], m.headers['x-text'], m.body.toString('latin1')])).toEqual([
        ['m:1', 'gr\u00fc\u00dfe', 'A\0B\n'],
        ['m:2', undefined, 'up to the NUL'],
      ]);
    } finally {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    }
  });

  it('reports a refused login as a configuration error', async () => {
    const sockets: net.Socket[] = [];
    const server = net.createServer((s) => {
      sockets.push(s);
      s.on('error', () => undefined);
      s.once('data', () => s.end('ERROR\nmessage:User name [bob] or password is invalid.\n\n\0'));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    const port = (server.address() as net.AddressInfo).port;
    try {
      const err = await connectStomp(conn(`stomp://bob:hunter2@127.0.0.1:${port}`), log).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(ConfigError);
      expect((err as Error).message).toContain('password is invalid');
      expect((err as Error).message).not.toContain('hunter2');
    } finally {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    }
  });

  it("RabbitMQ: a SEND it refuses (a missing exchange) is answered by an ERROR without its receipt, and the connection closes: why its connections are not shared (StompPeerProfile.sharedConnection)", async () => {
    const session = await connectStomp({ ...conn(services.rabbitStompUrl), host: '/' }, log);
    const lost: TransientError[] = [];
    session.onLost((e) => lost.push(e));
    const err = await session.send({ destination: `/exchange/${uniqueName('no-such-exchange')}/rk` }, Buffer.from('x')).then(
      () => undefined,
      (e: unknown) => e,
    );
    // Put on the SEND in flight as a refusal (ambiguous: the ERROR names no receipt); RabbitMQ then closes.
    expect(err).toBeInstanceOf(MessageRejectedError);
    expect((err as MessageRejectedError).ambiguous).toBe(true);
    expect((err as Error).message).toMatch(/NOT_FOUND - no exchange/);
    await until('the connection closed', () => lost.length === 1);
    expect(session.isOpen).toBe(false);
  });

  it('rejects one request answered by an ERROR frame and keeps the session', async () => {
    const queue = uniqueName('stomp-error-frame');
    const session = await connectStomp(conn(), log);
    const err = await session.send({ destination: `/queue/${queue}`, transaction: 'no-such-tx' }, Buffer.from('x')).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(MessageRejectedError);
    expect((err as Error).message).toContain('Invalid transaction id');
    expect(session.isOpen).toBe(true);
    await session.send({ destination: `/queue/${queue}`, [RUN_HEADER]: RUN }, Buffer.from('after'));
    await session.disconnect();
    const got = await collect(queue, 1);
    expect(got.map((m) => m.body.toString())).toEqual(['after']);
  });
});

const script = path.resolve(import.meta.dirname, '../../scripts/activemq.sh');
const managedBroker =
  existsSync(path.resolve(import.meta.dirname, '../../.activemq/activemq.pid')) && /^stomp:\/\/(127\.0\.0\.1|localhost):61613\/?$/.test(services.stompUrl);

describe.runIf(managedBroker)('broker restart (scripts/activemq.sh)', () => {
  it('reports the lost connection to an open target and keeps persistent messages', async () => {
    const queue = uniqueName('stomp-restart');
    const lost: TransientError[] = [];
    const target = await openTarget(queue, conn(), (e) => lost.push(e));
    await target.send(message('persistent survives'));
    await target.send(message('non-persistent is gone', { properties: { persistent: false } }));
    await promisify(execFile)('bash', [script, 'restart'], { timeout: 120_000 });
    await until('onLost after the restart', () => lost.length === 1);
    expect(lost[0]).toBeInstanceOf(TransientError);
    await expect(target.send(message('after'))).rejects.toBeInstanceOf(TransientError);
    await target.close();
    const got = await collect(queue, 1);
    expect(got.map((m) => m.body.toString())).toEqual(['persistent survives']);
    await expectEmpty(`/queue/${queue}`, 300);
  });
});
