/**
 * What no peer and no publisher may do to the bridge (issue 33, docs/design.md §10.2, docs/security.md): each kind of bad input
 * below, sent to the real `broker-bridge run` process, has its asserted outcome — forwarded with the documented
 * mapping, dead-lettered with a named reason, or the connection closed with a sentence naming the limit (and counted
 * in bridge_protocol_errors_total) — and after it the bridge still forwards the good messages, each once, nothing lost.
 *
 * The misbehaving STOMP broker is a TCP server of the test's own on 127.0.0.1 (test/support/hostile-stomp.ts): as a
 * source it keeps a small queue across the bridge's connections (what is not acked comes back, with the same
 * message-id: it says it is ActiveMQ, whose message-id names the message), as a target it records what it is sent and
 * commits transactions. The AMQP side is the real RabbitMQ; the composite-destination injection runs against the real
 * ActiveMQ (STOMP_URL).
 */
import { readFileSync } from 'node:fs';
import { Redis } from 'ioredis';
import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import { AmqpTestClient, type ReceivedMessage } from '../support/amqp.js';
import { useBridgeFixture } from '../support/bridge-fixture.js';
import type { BridgeProcess } from '../support/bridge-process.js';
import { behave, FakeQueue, frame, HostileStompServer, type ClientFrame, type PeerConnection } from '../support/hostile-stomp.js';
import { SOURCE_CASES } from '../support/hostile-stomp-cases.js';
import { parsePrometheusText } from '../support/prometheus-text.js';
import { services, uniqueName } from '../support/services.js';
import { publishStomp, readStomp } from '../support/stomp.js';
import { until, untilValue } from '../support/wait.js';

const fixture = useBridgeFixture();
const servers: HostileStompServer[] = [];
const prefixes: string[] = [];

beforeEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.stop()));
});

afterAll(async () => {
  await Promise.all(servers.splice(0).map((s) => s.stop()));
  const redis = new Redis(services.redisUrl);
  for (const p of prefixes) {
    const keys = await redis.keys(`${p}:*`);
    if (keys.length > 0) await redis.del(...keys);
  }
  redis.disconnect();
});

async function hostile(script: (peer: PeerConnection) => void): Promise<HostileStompServer> {
  const s = await HostileStompServer.start(script);
  servers.push(s);
  return s;
}

interface YamlOptions {
  source: string;
  target: string;
  deadLetter?: string;
  /** More lines of the bridge (each without indentation). */
  bridge?: string[];
  /** The hostile connection's URLs and extra keys. */
  hostile?: { urls: string[]; extra?: string };
  /** A connection to the real ActiveMQ. */
  activemq?: boolean;
}

/** A bridges.yaml for one bridge named `hostile`: quick reconnects, the HTTP API on a free port, its own key prefix. */
function yaml(o: YamlOptions): string {
  const prefix = uniqueName('bbhostile');
  prefixes.push(prefix);
  return [
    'log-level: info',
    'http-port: 0',
    'connections:',
    `  rabbit: { type: amqp, url: "${services.amqpUrl}" }`,
    ...(o.hostile ? [`  hostile: { type: stomp, urls: [${o.hostile.urls.map((u) => `"${u}"`).join(', ')}], heart-beat: "0,0", connect-timeout: 2000${o.hostile.extra ? `, ${o.hostile.extra}` : ''} }`] : []),
    ...(o.activemq ? [`  activemq: { type: stomp, url: "${services.stompUrl}" }`] : []),
    'id-cache:',
    `  redis-url: "${services.redisUrl}"`,
    `  key-prefix: "${prefix}"`,
    'bridges:',
    '  - name: hostile',
    `    source: ${o.source}`,
    `    target: ${o.target}`,
    ...(o.deadLetter ? [`    dead-letter: ${o.deadLetter}`] : []),
    '    retry-interval: 200',
    '    max-retry-interval: 200',
    ...(o.bridge ?? []).map((l) => `    ${l}`),
    '',
  ].join('\n');
}

/** bridge_protocol_errors_total of the bridge by reason, from its /metrics. */
async function protocolErrors(bridge: BridgeProcess): Promise<Record<string, number>> {
  const line = bridge.logs.find((l) => typeof l.port === 'number' && l.msg.startsWith('HTTP API on'));
  const text = await (await fetch(`http://127.0.0.1:${line!.port as number}/metrics`)).text();
  const out: Record<string, number> = {};
  for (const s of parsePrometheusText(text).find('bridge_protocol_errors_total')) out[s.labels.reason!] = s.value;
  return out;
}

/** The bodies of what the queue holds once the bridge is quiet, sorted. */
async function settledBodies(queue: string, atLeast: number): Promise<ReceivedMessage[]> {
  await fixture.amqp.waitForCount(queue, (n) => n >= atLeast, 60_000);
  await fixture.amqp.settledCount(queue, 1500);
  return fixture.amqp.drain(queue);
}

/** The supervisor's lines for a lost connection, or a connect attempt that failed (while opening: a SUBSCRIBE, say). */
const lostLines = (bridge: BridgeProcess): string[] =>
  bridge.logs.filter((l) => /^(connection lost, reconnecting|cannot start|cannot reconnect): /.test(l.msg)).map((l) => l.msg);

// ---- a hostile STOMP source ----------------------------------------------------------------------------------------

describe('a hostile STOMP source', () => {
  it.each(SOURCE_CASES)('$kind', async (c) => {
    const [target, dlq] = (await fixture.queues('hostile-out', 'hostile-dlq')) as [string, string];
    const queue = new FakeQueue();
    const good = [1, 2, 3].map((i) => ({ id: `good-${i}`, headers: {}, body: `good-${i}` }));
    queue.add(...good);
    let wrote: unknown;
    const server = await hostile((peer) => {
      const first = peer.index === 1;
      void behave(peer, queue, { receipts: (f) => !(first && c.noSubscribeReceipt && f.command === 'SUBSCRIBE') }).then(async (sub) => {
        if (!first) return queue.deliver(peer, sub);
        queue.deliver(peer, sub, (m) => m.id === 'good-1');
        wrote = await c.bad(peer, sub);
        if (c.kept || c.settled) queue.deliver(peer, sub, (m) => m.id !== 'good-1');
      });
    });
    const bridge = await fixture.start(
      yaml({ source: '{ connection: hostile, queue: hostile }', target: `{ connection: rabbit, queue: "${target}" }`, deadLetter: `{ connection: rabbit, queue: "${dlq}" }`, hostile: { urls: [server.url] } }),
    );

    const expected = c.kept?.forwarded ? 4 : 3;
    const all = await settledBodies(target, expected);
    const bodies = all.map((m) => m.body.toString('latin1')).sort();
    // Every good message once; nothing lost, nothing doubled.
    expect(bodies.filter((b) => b.startsWith('good-'))).toEqual(['good-1', 'good-2', 'good-3']);
    expect(all).toHaveLength(expected);
    await until('every good message acked at the peer', () => good.every((g) => queue.acked.includes(g.id)), { timeoutMs: 10_000, everyMs: 50 });
    if (c.closed) {
      expect(server.connections.length).toBeGreaterThanOrEqual(2);
      expect(server.connections[0]!.ended).toBe(true);
      const lines = lostLines(bridge);
      expect(lines[0]).toMatch(c.closed.sentence);
      expect(lines[0]).toContain(`(127.0.0.1:${server.port})`);
      if (c.closed.reason !== undefined) expect((await protocolErrors(bridge))[c.closed.reason]).toBeGreaterThanOrEqual(1);
      else expect(await protocolErrors(bridge)).toEqual({});
      if (c.closed.wroteLessThan !== undefined) {
        await until('the peer stopped writing', () => typeof wrote === 'number', { timeoutMs: 30_000, everyMs: 50 });
        expect(wrote as number).toBeLessThan(c.closed.wroteLessThan);
      }
    } else if (c.settled) {
      // Read past, settled alone: the connection kept, the message acked after its dead-letter copy, or NACKed.
      expect(server.connections).toHaveLength(1);
      expect(lostLines(bridge)).toEqual([]);
      const settledBy = c.settled.nack ? 'NACK' : 'ACK';
      await until(`the bad message ${settledBy}ed`, () => server.connections[0]!.frames.some((f) => f.command === settledBy && f.headers.id === 'bad-1'), { timeoutMs: 10_000, everyMs: 50 });
      const dead = c.settled.nack ? [] : await settledBodies(dlq, 1);
      if (!c.settled.nack) {
        expect(dead.map((m) => [m.body.length, m.headers['x-bridge-dead-letter-reason'], m.headers['x-bridge-dropped']])).toEqual([[0, 'too-large', 'body']]);
        expect(String(dead[0]!.headers['x-bridge-dead-letter-detail'])).toContain(`over ${c.settled.limit}`);
      }
      expect(await fixture.amqp.count(dlq)).toBe(0);
      expect(await protocolErrors(bridge)).toEqual({});
    } else {
      c.kept!.check(all);
      expect(server.connections).toHaveLength(1);
      expect(lostLines(bridge)).toEqual([]);
    }
  });

  it('an endless CONNECTED (a header repeated without end): cut off at max-header-bytes + 4 KiB during the handshake, counted; the next connection forwards', async () => {
    const target = await fixture.queue('hostile-out');
    const queue = new FakeQueue();
    queue.add({ id: 'good-1', headers: {}, body: 'good-1' });
    let wrote = 0;
    const server = await hostile((peer) => {
      if (peer.index > 1) return void behave(peer, queue).then((sub) => queue.deliver(peer, sub));
      void peer.next('CONNECT').then(async () => {
        peer.write('CONNECTED\nversion:1.2\n');
        const line = Buffer.from('k:v\n'.repeat(16 * 1024));
        while (!peer.ended && wrote < 64 * 1024 * 1024) {
          if (!peer.write(line)) await new Promise((r) => setTimeout(r, 5));
          wrote += line.length;
        }
      });
    });
    const bridge = await fixture.start(yaml({ source: '{ connection: hostile, queue: hostile }', target: `{ connection: rabbit, queue: "${target}" }`, hostile: { urls: [server.url] } }));
    expect((await settledBodies(target, 1)).map((m) => m.body.toString())).toEqual(['good-1']);
    expect(lostLines(bridge)[0]).toMatch(/the broker sent \d+ bytes without completing the STOMP handshake, more than max-header-bytes \(65536 bytes\) and an ERROR body \(4096 bytes\) together, so the bridge closed the connection/);
    expect(wrote).toBeLessThan(16 * 1024 * 1024);
    expect((await protocolErrors(bridge))['max-header-bytes']).toBe(1);
  });

  it('STOMP 1.0 (no version in CONNECTED): refused at connect with a sentence; with a failover URL the bridge forwards from the next peer', async () => {
    const target = await fixture.queue('hostile-out');
    const old = await hostile((peer) => void behave(peer, undefined, { version: undefined }));
    const queue = new FakeQueue();
    queue.add({ id: 'good-1', headers: {}, body: 'good-1' });
    const fine = await hostile((peer) => void behave(peer, queue).then((sub) => queue.deliver(peer, sub)));
    const bridge = await fixture.start(yaml({ source: '{ connection: hostile, queue: hostile }', target: `{ connection: rabbit, queue: "${target}" }`, hostile: { urls: [old.url, fine.url] } }));
    expect((await settledBodies(target, 1)).map((m) => m.body.toString())).toEqual(['good-1']);
    expect(old.connections[0]!.frames.map((f) => f.command)).toEqual(['CONNECT']);
    // Refused alone, it is a configuration error: the bridge stops with the sentence.
    await fixture.stopAll();
    const alone = fixture.spawn(yaml({ source: '{ connection: hostile, queue: hostile }', target: `{ connection: rabbit, queue: "${target}" }`, hostile: { urls: [old.url] } }));
    await alone.waitForLog((l) => l.msg.startsWith('bridge stopped:'), 30_000);
    expect(alone.logs.find((l) => l.msg.startsWith('bridge stopped:'))?.msg).toMatch(
      /the broker speaks STOMP 1\.0 only, and broker-bridge needs 1\.1 or 1\.2: without their header escaping a line feed, carriage return or ':' in a header value would end the line/,
    );
    expect(bridge.logs.some((l) => l.msg.includes('connected to 127.0.0.1'))).toBe(true);
  });
});

// ---- the peak memory of a bridge a peer sends 1 GiB to --------------------------------------------------------------

/** The bridge process's peak resident set (VmHWM), bytes. */
function peakRss(pid: number): number {
  const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(m?.[1] ?? 0) * 1024;
}

describe('a peer that sends a 1 GiB frame', () => {
  it.each([
    ['a body without content-length, streamed', false],
    ['a content-length of 1 GiB, then its body', true],
  ] as const)('%s, then its NUL: the bridge reads past it on the same connection and dead-letters it without its body; its peak RSS is bounded by the limit, not by the frame', async (_, declared) => {
    const [target, dlq] = (await fixture.queues('hostile-out', 'hostile-dlq')) as [string, string];
    const queue = new FakeQueue();
    queue.add({ id: 'good-1', headers: {}, body: 'good-1' });
    const sent: number[] = [];
    const server = await hostile((peer) => {
      void behave(peer, queue).then(async (sub) => {
        if (peer.index > 1) return queue.deliver(peer, sub);
        peer.write(`MESSAGE\nsubscription:${sub}\nmessage-id:huge\nack:huge\n${declared ? `content-length:${2 ** 30}\n` : ''}\n`);
        const wrote = await peer.stream(2 ** 30);
        peer.write(Buffer.from([0]));
        sent.push(wrote);
        queue.deliver(peer, sub);
      });
    });
    const bridge = await fixture.start(
      yaml({ source: '{ connection: hostile, queue: hostile }', target: `{ connection: rabbit, queue: "${target}" }`, deadLetter: `{ connection: rabbit, queue: "${dlq}" }`, hostile: { urls: [server.url] } }),
    );
    const pid = bridge.child.pid!;
    let peak = peakRss(pid);
    const sampler = setInterval(() => (peak = Math.max(peak, peakRss(pid))), 20);
    try {
      expect((await settledBodies(target, 1)).map((m) => m.body.toString())).toEqual(['good-1']);
      await until('the first connection over', () => sent.length === 1, { timeoutMs: 60_000, everyMs: 50 });
    } finally {
      clearInterval(sampler);
    }
    peak = Math.max(peak, peakRss(pid));
    const mib = (n: number) => Math.round(n / 1048576);
    console.log(`1 GiB frame (${declared ? 'content-length' : 'no content-length'}): peer wrote ${mib(sent[0]!)} MiB, read past on the same connection; bridge peak RSS (VmHWM) ${mib(peak)} MiB`);
    expect(sent[0]!).toBe(2 ** 30);
    expect(server.connections).toHaveLength(1);
    expect(lostLines(bridge)).toEqual([]);
    const dead = await settledBodies(dlq, 1);
    expect(dead.map((m) => [m.body.length, m.headers['x-bridge-dead-letter-reason'], Number(m.headers['x-bridge-original-size']) > 2 ** 30])).toEqual([[0, 'too-large', true]]);
    // Up to 64 MiB of a frame below the limit, and the process itself: far below the 1 GiB it was sent.
    expect(peak).toBeLessThan(400 * 1048576);
  });
});

// ---- AMQP in, a hostile STOMP target ---------------------------------------------------------------------------------

/**
 * A recording STOMP target: SENDs outside a transaction are kept at once, those in one on its COMMIT. `swallow` sees
 * every frame first; a frame it swallows gets no RECEIPT and is not kept.
 */
function recordingTarget(o: { swallow?: (peer: PeerConnection, f: ClientFrame) => boolean } = {}) {
  const kept: ClientFrame[] = [];
  const start = () =>
    hostile((peer) => {
      const tx = new Map<string, ClientFrame[]>();
      const swallowed = new WeakSet<ClientFrame>();
      peer.onFrame((f) => {
        if (o.swallow?.(peer, f)) swallowed.add(f);
      });
      void behave(peer, undefined, { receipts: (f) => !swallowed.has(f) });
      peer.onFrame((f) => {
        if (swallowed.has(f)) return;
        if (f.command === 'BEGIN') tx.set(f.headers.transaction!, []);
        else if (f.command === 'SEND' && f.headers.transaction !== undefined) tx.get(f.headers.transaction)?.push(f);
        else if (f.command === 'SEND') kept.push(f);
        else if (f.command === 'COMMIT') kept.push(...(tx.get(f.headers.transaction!) ?? []));
      });
    });
  return { kept, start };
}

describe('AMQP headers of every field type toward a STOMP target: forwarded with the documented mapping (docs/mapping.md)', () => {
  it('a float NaN or ±Infinity in a header: RabbitMQ itself refuses the publish (it closes the channel), so none reaches the bridge', async () => {
    // Their mapping, for a source that could carry them, is unit-tested (test/unit/stomp-mapping.test.ts: NaN, Infinity).
    const source = await fixture.queue('hostile-in');
    for (const value of [Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY]) {
      const c = await AmqpTestClient.connect();
      await expect(c.publish(source, [{ body: Buffer.from('nan'), options: { headers: { 'x-v': { '!': 'double', value } } } }])).rejects.toThrow(/channel closed/);
      await c.close();
    }
    expect(await fixture.amqp.count(source)).toBe(0);
  });

  it('decimal, timestamp, void, nested table, array of arrays, byte array, int64 beyond 2^53, a float, and a value trying to inject a header line', async () => {
    const source = await fixture.queue('hostile-in');
    const rec = recordingTarget();
    const server = await rec.start();
    await fixture.start(yaml({ source: `{ connection: rabbit, queue: "${source}" }`, target: '{ connection: hostile, queue: typed }', hostile: { urls: [server.url] } }));
    const cases: [string, unknown, string | undefined][] = [
      ['decimal', { '!': 'decimal', value: { places: 2, digits: 1234 } }, '12.34'],
      ['timestamp', { '!': 'timestamp', value: 1_700_000_000 }, '1700000000'],
      ['void', null, undefined],
      ['nested-table', { a: { b: { c: 1 } }, s: 'x' }, '{"a":{"b":{"c":1}},"s":"x"}'],
      ['array-of-arrays', [[1, 2], ['a', [true]]], '[[1,2],["a",[true]]]'],
      ['byte-array', Buffer.from([0, 1, 254, 255]), '0001feff'],
      // amqplib reads an AMQP int64 into a JavaScript number: beyond 2^53 it is the nearest double.
      ['int64-beyond-2^53', { '!': 'int64', value: 2n ** 60n + 1n }, String(2 ** 60)],
      ['float', { '!': 'float', value: 0.5 }, '0.5'],
      ['injection', 'x\ndestination:/queue/elsewhere\nreceipt:r', 'x\ndestination:/queue/elsewhere\nreceipt:r'],
    ];
    await fixture.amqp.publish(source, [
      ...cases.map(([kind, value]) => ({ body: Buffer.from(kind), options: { headers: { 'x-v': value, _AMQ_DUPL_ID: `typed-${kind}` } } })),
      { body: Buffer.from('good-after'), options: { headers: { _AMQ_DUPL_ID: 'typed-good' } } },
    ]);
    await until('every message at the target', () => rec.kept.length >= cases.length + 1, { timeoutMs: 30_000, everyMs: 50 });
    for (const [kind, , expected] of cases) {
      const f = rec.kept.find((k) => k.body.toString() === kind);
      expect(f, kind).toBeDefined();
      expect(f!.headers['x-v'], kind).toBe(expected);
      // One destination, ours: no header line came out of a value.
      expect(f!.headers.destination, kind).toBe('/queue/typed');
    }
    expect(rec.kept.map((k) => k.body.toString())).toContain('good-after');
    expect(rec.kept).toHaveLength(cases.length + 1);
    await fixture.amqp.waitForCount(source, (n) => n === 0, 10_000);
  });
});

describe('a hostile STOMP target', () => {
  it('an ERROR mid-transaction: the transaction is lost with the connection, sent again, each message committed once', async () => {
    const source = await fixture.queue('hostile-in');
    let erred = false;
    const rec = recordingTarget({
      swallow: (peer, f) => {
        // First connection: the second SEND of the first transaction gets an ERROR about nothing in particular.
        if (peer.index === 1 && !erred && f.command === 'SEND' && f.headers.transaction !== undefined && peer.frames.filter((x) => x.command === 'SEND').length === 2) {
          erred = true;
          peer.write(frame('ERROR', { message: 'transaction trouble' }));
          // As the specification says a server does after an ERROR: what the bridge sent after it is never read.
          peer.close();
          return true;
        }
        return false;
      },
    });
    const server = await rec.start();
    const bridge = await fixture.start(
      yaml({ source: `{ connection: rabbit, queue: "${source}" }`, target: '{ connection: hostile, queue: tx }', hostile: { urls: [server.url] }, bridge: ['max-batch-size: 5', 'max-batch-time: 200'] }),
    );
    await fixture.amqp.publish(source, Array.from({ length: 10 }, (_, i) => ({ body: Buffer.from(`tx-${i}`), options: { headers: { _AMQ_DUPL_ID: `tx-${i}` } } })));
    await until('10 committed', () => rec.kept.length >= 10, { timeoutMs: 30_000, everyMs: 50 });
    await fixture.amqp.waitForCount(source, (n) => n === 0, 10_000);
    expect(erred).toBe(true);
    expect(rec.kept.map((k) => k.headers._AMQ_DUPL_ID).sort()).toEqual(Array.from({ length: 10 }, (_, i) => `tx-${i}`).sort());
    expect(lostLines(bridge)[0]).toMatch(/the broker sent an ERROR frame: transaction trouble/);
  });

  it('a RECEIPT never sent for a SEND: after confirm-timeout the connection is treated as broken and the message sent again, flagged', async () => {
    const source = await fixture.queue('hostile-in');
    const rec = recordingTarget({ swallow: (peer, f) => peer.index === 1 && f.command === 'SEND' && f.headers._AMQ_DUPL_ID === 'silent-1' });
    const server = await rec.start();
    const bridge = await fixture.start(yaml({ source: `{ connection: rabbit, queue: "${source}" }`, target: '{ connection: hostile, queue: silent }', hostile: { urls: [server.url] }, bridge: ['confirm-timeout: 1500'] }));
    await fixture.amqp.publish(source, [
      { body: Buffer.from('silent-1'), options: { headers: { _AMQ_DUPL_ID: 'silent-1' } } },
      { body: Buffer.from('silent-2'), options: { headers: { _AMQ_DUPL_ID: 'silent-2' } } },
    ]);
    await until('both kept', () => rec.kept.length >= 2, { timeoutMs: 30_000, everyMs: 50 });
    await fixture.amqp.waitForCount(source, (n) => n === 0, 10_000);
    // The unanswered SEND may have reached the broker: its second copy carries the same ID, flagged.
    const first = rec.kept.find((k) => k.headers._AMQ_DUPL_ID === 'silent-1');
    expect(first?.headers['x-bridge-possible-duplicate']).toBe('true');
    expect(rec.kept.map((k) => k.headers._AMQ_DUPL_ID).sort()).toEqual(['silent-1', 'silent-2']);
    expect(lostLines(bridge)[0]).toMatch(/no RECEIPT for a SEND within 1500 ms; treating the connection as broken/);
  });
});

// ---- template values ---------------------------------------------------------------------------------------------------

describe('template values from publishers', () => {
  it.each([
    [',', 'eu,other'],
    ['/', 'eu/../other'],
    ['*', 'eu.*'],
    ['#', '#'],
    ['..', '..'],
    ['space', 'eu other'],
    ['10 KB', 'x'.repeat(10_000)],
  ])('a value with %s: dead-lettered with unsafe-address, nothing sent to the target, the good ones forwarded', async (_, value) => {
    const [source, dlq] = (await fixture.queues('hostile-in', 'hostile-dlq')) as [string, string];
    const rec = recordingTarget();
    const server = await rec.start();
    const bridge = await fixture.start(
      yaml({
        source: `{ connection: rabbit, queue: "${source}" }`,
        target: '{ connection: hostile, queue: "orders.${header.region}" }',
        deadLetter: `{ connection: rabbit, queue: "${dlq}" }`,
        hostile: { urls: [server.url] },
      }),
    );
    await fixture.amqp.publish(source, [
      { body: Buffer.from('before'), options: { headers: { region: 'eu', _AMQ_DUPL_ID: 'tv-1' } } },
      { body: Buffer.from('hostile'), options: { headers: { region: value, _AMQ_DUPL_ID: 'tv-2' } } },
      { body: Buffer.from('after'), options: { headers: { region: 'us', _AMQ_DUPL_ID: 'tv-3' } } },
    ]);
    const dead = await settledBodies(dlq, 1);
    expect(dead).toHaveLength(1);
    expect(dead[0]!.body.toString()).toBe('hostile');
    expect(dead[0]!.headers['x-bridge-dead-letter-reason']).toBe('unsafe-address');
    expect(decodeURIComponent(String(dead[0]!.headers['x-bridge-unsafe-value']).replace(/…$/, ''))).toBe(value.slice(0, 255));
    await until('the good ones sent', () => rec.kept.length >= 2, { timeoutMs: 20_000, everyMs: 50 });
    expect(rec.kept.map((k) => [k.body.toString(), k.headers.destination])).toEqual([
      ['before', '/queue/orders.eu'],
      ['after', '/queue/orders.us'],
    ]);
    expect(server.connections.flatMap((c) => c.frames).filter((f) => f.command === 'SEND')).toHaveLength(2);
    const metrics = parsePrometheusText(await (await fetch(`http://127.0.0.1:${bridge.logs.find((l) => l.msg.startsWith('HTTP API on'))!.port as number}/metrics`)).text());
    expect(metrics.value('bridge_unsafe_addresses_total', { bridge: 'hostile' })).toBe(1);
  });

  it("the injection against the real ActiveMQ: 'eu,<prefix>.billing' is dead-lettered with unsafe-address, and the queue after the comma receives nothing", async () => {
    const [source, dlq] = (await fixture.queues('hostile-in', 'hostile-dlq')) as [string, string];
    const prefix = uniqueName('inject');
    await fixture.start(
      yaml({
        source: `{ connection: rabbit, queue: "${source}" }`,
        target: `{ connection: activemq, queue: "${prefix}.\${header.region}" }`,
        deadLetter: `{ connection: rabbit, queue: "${dlq}" }`,
        activemq: true,
      }),
    );
    await fixture.amqp.publish(source, [
      { body: Buffer.from('injected'), options: { headers: { region: `eu,${prefix}.billing`, _AMQ_DUPL_ID: 'inj-1' } } },
      { body: Buffer.from('ordinary'), options: { headers: { region: 'eu', _AMQ_DUPL_ID: 'inj-2' } } },
    ]);
    const dead = await settledBodies(dlq, 1);
    expect(dead.map((m) => [m.body.toString(), m.headers['x-bridge-dead-letter-reason'], m.headers['x-bridge-unsafe-value']])).toEqual([
      ['injected', 'unsafe-address', `eu,${prefix}.billing`],
    ]);
    const eu = await readStomp(`${prefix}.eu`, { atLeast: 1, quietMs: 1000, timeoutMs: 20_000 });
    expect(eu.map((m) => m.body.toString())).toEqual(['ordinary']);
    // Read after the ordinary message arrived: had the comma been sent, the billing copy would be there by now.
    const billing = await readStomp(`${prefix}.billing`, { quietMs: 1500, timeoutMs: 10_000 });
    expect(billing).toEqual([]);
    // The probe works: what is published there is read.
    await publishStomp(`${prefix}.billing`, [{ body: 'probe' }]);
    expect((await readStomp(`${prefix}.billing`, { atLeast: 1, timeoutMs: 10_000 })).map((m) => m.body.toString())).toEqual(['probe']);
  });
});

// ---- duplicate IDs of any length, and a selector over every type -------------------------------------------------------

describe('duplicate IDs from publishers', () => {
  it('IDs of 0 bytes, 1 byte and 60 KB, each sent twice (AMQP): empty counts as none (stamped, both forwarded); the others once, the header unchanged; Redis keeps the long one by its SHA-256', async () => {
    const [source, target] = (await fixture.queues('hostile-in', 'hostile-out')) as [string, string];
    const text = yaml({ source: `{ connection: rabbit, queue: "${source}" }`, target: `{ connection: rabbit, queue: "${target}" }` });
    const prefix = /key-prefix: "([^"]+)"/.exec(text)![1]!;
    await fixture.start(text);
    // (amqplib encodes at most 64 KiB of headers: 60 KB is about the longest ID an AMQP publisher with it can send.)
    const long = `L${'0123456789'.repeat(6_000)}`;
    const twice = (id: string, body: string) => [0, 1].map((n) => ({ body: Buffer.from(`${body}-${n}`), options: { headers: { _AMQ_DUPL_ID: id } } }));
    await fixture.amqp.publish(source, [...twice('', 'empty'), ...twice('x', 'one'), ...twice(long, 'long'), { body: Buffer.from('good-after'), options: { headers: { _AMQ_DUPL_ID: 'g' } } }]);
    const got = await settledBodies(target, 5);
    expect(got.map((m) => m.body.toString()).sort()).toEqual(['empty-0', 'empty-1', 'good-after', 'long-0', 'one-0']);
    expect(String(got.find((m) => m.body.toString() === 'long-0')!.headers._AMQ_DUPL_ID)).toBe(long);
    for (const e of got.filter((m) => m.body.toString().startsWith('empty'))) expect(String(e.headers._AMQ_DUPL_ID)).toMatch(/^bb-/);
    const redis = new Redis(services.redisUrl);
    try {
      const [idsKey] = await redis.keys(`${prefix}:*:ids`);
      const members = await redis.zrange(idsKey!, '0', '-1');
      expect(members.filter((m) => m.startsWith('sha256:'))).toHaveLength(1);
      expect(members.every((m) => Buffer.byteLength(m) <= 128)).toBe(true);
      expect(members).toContain('x');
    } finally {
      redis.disconnect();
    }
  });

  it('an ID of 100 KB from a STOMP peer: no AMQP client can encode it (the target refuses it as unencodable), so it is dead-lettered with that header shortened, and the bridge goes on', async () => {
    const [target, dlq] = (await fixture.queues('hostile-out', 'hostile-dlq')) as [string, string];
    const queue = new FakeQueue();
    const long = 'I'.repeat(100_000);
    queue.add({ id: 'big', headers: { _AMQ_DUPL_ID: long }, body: 'big' }, { id: 'good-1', headers: {}, body: 'good-1' });
    const server = await hostile((peer) => void behave(peer, queue).then((sub) => queue.deliver(peer, sub)));
    await fixture.start(
      yaml({
        source: '{ connection: hostile, queue: hostile }',
        target: `{ connection: rabbit, queue: "${target}" }`,
        deadLetter: `{ connection: rabbit, queue: "${dlq}" }`,
        // The peer may send a head this large: the cache and the targets are what this is about.
        hostile: { urls: [server.url], extra: 'max-header-bytes: 262144' },
      }),
    );
    const dead = await settledBodies(dlq, 1);
    expect(dead.map((m) => [m.body.toString(), m.headers['x-bridge-dead-letter-reason'], m.headers['x-bridge-shortened-headers']])).toEqual([['big', 'unencodable', '_AMQ_DUPL_ID']]);
    expect(String(dead[0]!.headers._AMQ_DUPL_ID)).toBe(`${'I'.repeat(1024)}… (100000 bytes)`);
    expect((await settledBodies(target, 1)).map((m) => m.body.toString())).toEqual(['good-1']);
    await until('both acked at the peer', () => queue.messages.length === 0, { timeoutMs: 10_000, everyMs: 50 });
  });
});

describe('a selector over a header of each type', () => {
  it("'v > 1' over int, long, double, boolean, string, decimal, timestamp, table, array, bytes and void: selected as ActiveMQ's rules say, the rest dead-lettered as filter-miss", async () => {
    const [source, target, dlq] = (await fixture.queues('hostile-in', 'hostile-out', 'hostile-dlq')) as [string, string, string];
    await fixture.start(
      yaml({
        source: `{ connection: rabbit, queue: "${source}" }`,
        target: `{ connection: rabbit, queue: "${target}" }`,
        deadLetter: `{ connection: rabbit, queue: "${dlq}" }`,
        bridge: ['filter: "v > 1"', 'filter-miss: dead-letter'],
      }),
    );
    // [kind, value, selected]: numbers compare as numbers (NaN and ±Infinity, which RabbitMQ refuses in headers, are
    // in test/unit/selector.test.ts); a string is parsed as the literal's type (int); a decimal is a double and a timestamp a long; a boolean, bytes, a table or
    // an array never compare with a number (FALSE); void is NULL (unknown: not selected).
    const cases: [string, unknown, boolean][] = [
      ['int', 5, true],
      ['long', { '!': 'int64', value: 2n ** 40n }, true],
      ['double', 1.5, true],
      ['boolean', true, false],
      ['string', '5', true],
      ['decimal', { '!': 'decimal', value: { places: 2, digits: 150 } }, true],
      ['timestamp', { '!': 'timestamp', value: 1_700_000_000 }, true],
      ['table', { a: 5 }, false],
      ['array', [5], false],
      ['bytes', Buffer.from([5]), false],
      ['void', null, false],
    ];
    await fixture.amqp.publish(source, cases.map(([kind, v]) => ({ body: Buffer.from(kind), options: { headers: { v, _AMQ_DUPL_ID: `sel-${kind}` } } })));
    const selected = await untilValue('all settled', async () => (await fixture.amqp.count(target)) + (await fixture.amqp.count(dlq)), (n) => n === cases.length, { timeoutMs: 30_000, everyMs: 100 });
    expect(selected).toBe(cases.length);
    const forwarded = (await fixture.amqp.drain(target)).map((m) => m.body.toString()).sort();
    const missed = (await fixture.amqp.drain(dlq)).map((m) => [m.body.toString(), m.headers['x-bridge-dead-letter-reason']]);
    expect(forwarded).toEqual(cases.filter((c) => c[2]).map((c) => c[0]).sort());
    expect(missed.sort()).toEqual(cases.filter((c) => !c[2]).map((c) => [c[0], 'filter-miss']).sort());
  });
});
