/**
 * The bridge end to end with STOMP on one or both sides: the real `broker-bridge run` process between the real
 * RabbitMQ and a real STOMP peer, with the duplicate-ID cache in the real Redis. The STOMP suite runs once per peer
 * (test/support/stomp-peers.ts: ActiveMQ Classic, RabbitMQ's STOMP plugin), plus STOMP → STOMP across the two.
 * Every test asserts what the target queue holds (and, for ActiveMQ sources, that nothing of ours went to
 * ActiveMQ.DLQ).
 *
 * ActiveMQ queues cannot be deleted: every test uses its own names and reads its STOMP queues empty. Queues behind
 * RabbitMQ's STOMP plugin are declared over AMQP (durable, as its `/queue/` destinations are) and deleted after the file.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import net from 'node:net';
import { resolve } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import type { ReceivedMessage, TestMessage } from '../support/amqp.js';
import type { LogLine } from '../support/bridge-process.js';
import { useBridgeFixture } from '../support/bridge-fixture.js';
import type { ConfigOptions } from '../support/configs.js';
import { services } from '../support/services.js';
import { countOwnDeadLetters, publishStomp, readStomp, type ReceivedStompMessage, type StompTestMessage } from '../support/stomp.js';
import { ACTIVEMQ_PEER, RABBITMQ_STOMP_PEER, STOMP_PEERS, type StompPeer } from '../support/stomp-peers.js';
import { TcpProxy } from '../support/tcp-proxy.js';
import { text } from '../support/text.js';
import { RabbitAdmin } from '../faults/rabbit-admin.js';
import { quietAfterCrash, sleep } from '../support/wait.js';

const ID = '_AMQ_DUPL_ID';
const POSSIBLE_DUP = 'x-bridge-possible-duplicate';
const ACTIVEMQ_SCRIPT = resolve(import.meta.dirname, '../../scripts/activemq.sh');

const t0 = Date.now();
const mark = (what: string) => process.env.BRIDGE_TEST_TIMING && console.log(`[${((Date.now() - t0) / 1000).toFixed(1)} s] ${what}`);
const fx = useBridgeFixture();

// ---- helpers ----

/** A connection of the tests' bridges.yaml: `rabbit` (AMQP), or a STOMP peer's connection. */
type Side = 'rabbit' | StompPeer['connection'];

function peerOf(side: Exclude<Side, 'rabbit'>): StompPeer {
  return side === 'activemq' ? ACTIVEMQ_PEER : RABBITMQ_STOMP_PEER;
}

/** bridges.yaml for the tests; `stompConnection` adds keys to the STOMP connection (e.g. a short connect-timeout). */
function config(opts: ConfigOptions, stompConnection = ''): string {
  const c = fx.config(opts);
  if (!stompConnection) return c.yaml;
  return c.yaml.replace(/(activemq: \{ type: stomp, url: "[^"]*")/, `$1, ${stompConnection}`);
}

const { start } = fx;

const isDrop = (l: LogLine) => l.msg.startsWith('duplicate dropped');
const body = (i: number) => `message ${i} ${'x'.repeat(64)}`;
const seqOfText = (text: string) => Number(/^message (\d+)/.exec(text)?.[1]);

/** One message, whichever broker it was read from, reduced to what the assertions need. */
interface Arrived {
  seq: number;
  id: string;
  flagged: boolean;
  body: string;
}

function fromStomp(m: ReceivedStompMessage): Arrived {
  return { seq: seqOfText(m.body.toString()), id: m.headers[ID] ?? '', flagged: m.headers[POSSIBLE_DUP] === 'true', body: m.body.toString() };
}

function fromAmqp(m: ReceivedMessage): Arrived {
  const v = m.headers[ID];
  return {
    seq: seqOfText(m.body.toString()),
    id: text(v),
    flagged: m.headers[POSSIBLE_DUP] === true,
    body: m.body.toString(),
  };
}

/** Publishes to a queue of either broker: `id` as the duplicate-ID header when given. */
async function publish(side: Side, queue: string, items: { seq: number; id?: string }[]): Promise<void> {
  if (side === 'rabbit') {
    const msgs: TestMessage[] = items.map(({ seq, id }) => ({ body: Buffer.from(body(seq)), options: { headers: id === undefined ? { seq } : { [ID]: id } } }));
    await fx.amqp.publish(queue, msgs);
  } else {
    const msgs: StompTestMessage[] = items.map(({ seq, id }): StompTestMessage => ({
      body: body(seq),
      headers: id === undefined ? { seq: String(seq) } : { [ID]: id },
    }));
    await publishStomp(queue, msgs, { url: peerOf(side).url });
  }
}

/**
 * Everything in the target queue, once the bridge has gone quiet for `quietMs` (at least `atLeast` messages). After a
 * crash or a lost session, flagged extra copies can make up `atLeast` while redeliveries are still held aside until a
 * reservation lease runs out: such tests pass a quiet period longer than that lease.
 */
async function readTarget(side: Side, queue: string, atLeast: number, timeoutMs = 90_000, quietMs = 1500): Promise<Arrived[]> {
  if (side === 'rabbit') {
    await fx.amqp.waitForCount(queue, (n) => n >= atLeast, timeoutMs).catch(() => undefined);
    await fx.amqp.settledCount(queue, quietMs, timeoutMs);
    return (await fx.amqp.drain(queue)).map(fromAmqp);
  }
  return (await readStomp(queue, { url: peerOf(side).url, atLeast, quietMs, timeoutMs })).map(fromStomp);
}

/**
 * The delivery promise on what arrived: every sequence number 0..total-1 is there (nothing lost), each under one ID
 * (nothing forwarded under two IDs), distinct messages never share an ID, and every copy beyond the first of an ID
 * is flagged as a possible duplicate.
 */
function expectDeliveryPromise(got: Arrived[], total: number): { extraCopies: number; flagged: number } {
  const idsBySeq = new Map<number, Set<string>>();
  const copiesById = new Map<string, Arrived[]>();
  for (const m of got) {
    idsBySeq.set(m.seq, (idsBySeq.get(m.seq) ?? new Set()).add(m.id));
    copiesById.set(m.id, [...(copiesById.get(m.id) ?? []), m]);
  }
  const missing = Array.from({ length: total }, (_, i) => i).filter((i) => !idsBySeq.has(i));
  expect(missing, 'sequence numbers that never arrived').toEqual([]);
  expect(idsBySeq.size).toBe(total);
  const twoIds = [...idsBySeq.entries()].filter(([, s]) => s.size > 1).map(([seq, s]) => ({ seq, ids: [...s] }));
  expect(twoIds, 'messages that arrived under two different IDs').toEqual([]);
  expect(copiesById.size, 'distinct IDs').toBe(total);
  const unflagged = [...copiesById.entries()]
    .filter(([, copies]) => copies.filter((c) => c.flagged).length < copies.length - 1)
    .map(([id, copies]) => ({ id, copies: copies.length, flagged: copies.filter((c) => c.flagged).length }));
  expect(unflagged, 'IDs with an extra copy that is not flagged as a possible duplicate').toEqual([]);
  return { extraCopies: got.length - total, flagged: got.filter((m) => m.flagged).length };
}

function activemq(command: 'restart' | 'status'): Promise<{ stdout: string; stderr: string }> {
  return promisify(execFile)('bash', [ACTIVEMQ_SCRIPT, command], { timeout: 120_000 });
}

/**
 * A pass-through TCP hop in front of a TcpProxy that reads the bridge's STOMP frames (client → server) and, on the
 * first COMMIT after `after` committed ones, stalls the proxy before handing that COMMIT on: the COMMIT of a batch
 * whose SENDs were all confirmed never reaches ActiveMQ, and its RECEIPT never comes back. `tripped` resolves with
 * that transaction and the duplicate IDs of its SENDs.
 */
class CommitTrap {
  private server?: net.Server;
  private readonly sockets = new Set<net.Socket>();
  private commits = 0;
  private armed = true;
  private readonly sendsByTx = new Map<string, string[]>();
  private trip!: (batch: { transaction: string; ids: string[] }) => void;
  readonly tripped = new Promise<{ transaction: string; ids: string[] }>((r) => (this.trip = r));
  port = 0;

  constructor(
    private readonly proxy: TcpProxy,
    private readonly after: number,
  ) {}

  async start(): Promise<this> {
    this.server = net.createServer((client) => {
      const upstream = net.connect(this.proxy.port, '127.0.0.1');
      this.sockets.add(client).add(upstream);
      let pending = '';
      const close = () => {
        client.destroy();
        upstream.destroy();
        this.sockets.delete(client);
        this.sockets.delete(upstream);
      };
      client.on('error', close).on('close', close);
      upstream.on('error', close).on('close', close);
      upstream.on('data', (d) => client.write(d));
      client.on('data', (chunk: Buffer) => {
        // Test bodies are ASCII without NUL, so frames can be split at NUL bytes.
        pending += chunk.toString('latin1');
        const frames = pending.split('\0');
        pending = frames.pop() ?? '';
        for (const frame of frames) this.inspect(frame);
        upstream.write(chunk);
      });
    });
    await new Promise<void>((r) => this.server!.listen(0, '127.0.0.1', () => r()));
    this.port = (this.server.address() as net.AddressInfo).port;
    return this;
  }

  private inspect(frame: string): void {
    const head = frame.replace(/^[\r\n]+/, '').split('\n\n', 1)[0] ?? '';
    const [command, ...lines] = head.split('\n');
    const headers = new Map<string, string>();
    for (const line of lines) {
      const colon = line.indexOf(':');
      if (colon > 0 && !headers.has(line.slice(0, colon))) headers.set(line.slice(0, colon), line.slice(colon + 1));
    }
    const tx = headers.get('transaction');
    if (command === 'SEND' && tx !== undefined) {
      this.sendsByTx.set(tx, [...(this.sendsByTx.get(tx) ?? []), headers.get(ID) ?? '']);
    } else if (command === 'COMMIT' && tx !== undefined) {
      this.commits += 1;
      if (this.armed && this.commits > this.after) {
        // Synchronously, before this chunk is written on: the proxy discards it.
        this.proxy.stall();
        this.armed = false;
        this.trip({ transaction: tx, ids: this.sendsByTx.get(tx) ?? [] });
      }
    }
  }

  async stop(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((r) => (this.server ? this.server.close(() => r()) : r()));
  }
}

// ---- tests ----

/** The 2,000 distinct + 500 re-sent IDs test, for any pair of sides. */
async function forwardsOnceAndDropsResent(from: Side, to: Side): Promise<void> {
  const src = await fx.queue('src', from);
  const dst = await fx.queue('dst', to);
  // The cache must hold every ID for the re-sends to be recognised (the default 2000 would evict id-0.. first).
  const yaml = config({
    bridges: [{ sourceConnection: from, sourceQueue: src, targetConnection: to, target: `queue: "${dst}"`, extra: { prefetch: 500 } }],
    idCache: { 'id-cache-size': 10_000 },
  });
  const bridge = await start(yaml);
  const originals = Array.from({ length: 2000 }, (_, i) => ({ seq: i, id: `id-${i}` }));
  await publish(from, src, originals);
  await publish(from, src, originals.slice(0, 500));

  await bridge.waitForLog(isDrop, 90_000, 500);
  const got = await readTarget(to, dst, 2000);
  expect(got).toHaveLength(2000);
  const ids = got.map((m) => m.id);
  expect(new Set(ids).size).toBe(2000);
  expect([...ids].sort()).toEqual(originals.map((o) => o.id).sort());
  for (const m of got) {
    expect(m.id).toBe(`id-${m.seq}`);
    expect(m.body).toBe(body(m.seq));
    expect(m.flagged).toBe(false);
  }
  expect(bridge.count(isDrop)).toBe(500);
  if (from === 'activemq') expect(await countOwnDeadLetters([src])).toBe(0);
}

describe.each(STOMP_PEERS)('STOMP peer $name', (peer) => {
  const stomp = peer.connection;

  describe.each([
    ['AMQP → STOMP', 'rabbit', stomp],
    ['STOMP → AMQP', stomp, 'rabbit'],
    ['STOMP → STOMP', stomp, stomp],
  ] as const)('%s bridge', (_name, from, to) => {
    it('forwards 2,000 distinct messages once each and drops 500 re-sent IDs', { timeout: 120_000 }, async () => {
      await forwardsOnceAndDropsResent(from, to);
    });
  });

  it(
    `STOMP source: ${peer.stableMessageId ? "takes IDs from the broker's message-id" : 'stamps IDs by fingerprint (its message-id is per delivery)'} and keeps them across a SIGKILL mid-stream: nothing lost, nothing under two IDs unflagged, in flight bounded by the prefetch`,
    { timeout: 150_000 },
    async () => {
      const src = await fx.queue('src', stomp);
      const dst = await fx.queue('dst', 'rabbit');
      const prefetch = 200;
      // The AMQP target goes through a proxy: stalled for a while, the bridge holds a full window of unacked messages.
      const proxy = await TcpProxy.forUrl(services.amqpUrl).start();
      // Two views of what is unacknowledged: the bridge's own (GET /bridges, every peer) and, on RabbitMQ, the broker's
      // (the management API; ActiveMQ here has neither JMX nor a web console). Each sampler counts its readings, so
      // that a bound is never held against a sampler that read nothing.
      const admin = peer.name === 'rabbitmq' ? new RabbitAdmin(services.rabbitManagementUrl) : undefined;
      let maxUnacked = -1;
      let brokerReadings = 0;
      let maxInFlight = -1;
      let bridgeReadings = 0;
      let api: string | undefined;
      const bridgeInFlight = async (): Promise<number | undefined> => {
        if (api === undefined) return undefined;
        const r = await fetch(`${api}/bridges`).then((res) => res.json() as Promise<{ bridges: { inFlight: number }[] }>).catch(() => undefined);
        return r?.bridges[0]?.inFlight;
      };
      let sampling = true;
      const sampler = (async () => {
        while (sampling) {
          const c = await admin?.queueCounts('/', src).catch(() => undefined);
          if (c) [maxUnacked, brokerReadings] = [Math.max(maxUnacked, c.unacknowledged), brokerReadings + 1];
          const n = await bridgeInFlight();
          if (n !== undefined) [maxInFlight, bridgeReadings] = [Math.max(maxInFlight, n), bridgeReadings + 1];
          await sleep(250);
        }
      })();
      const started = async (b: Awaited<ReturnType<typeof start>>): Promise<void> => {
        await b.waitForLog((l) => l.component === 'http' && typeof l.port === 'number', 10_000);
        api = `http://127.0.0.1:${b.logs.find((l) => l.component === 'http' && typeof l.port === 'number')?.port as number}`;
      };
      try {
        const yaml = config({
          bridges: [
            {
              sourceConnection: stomp,
              sourceQueue: src,
              target: `queue: "${dst}"`,
              extra: { prefetch, 'retry-interval': 500, 'max-retry-interval': 500, 'confirm-timeout': 60_000 },
            },
          ],
          amqpUrl: proxy.rewrite(services.amqpUrl),
          // A killed process's reservations are taken over after the lease: keep it short for the test.
          idCache: { 'reservation-lease': 3000 },
          top: { 'http-port': 0 },
        });
        const total = 4000;
        await publish(stomp, src, Array.from({ length: total }, (_, i) => ({ seq: i })));
        let bridge = await start(yaml);
        await started(bridge);
        await fx.amqp.waitForCount(dst, (n) => n >= 1000, 60_000);
        // Mid-stream: the target stops answering, so the bridge's window fills up and stays full.
        proxy.stall();
        if (admin) {
          // The management API samples queue counts every few seconds: wait for a sample taken while stalled.
          const deadline = Date.now() + 20_000;
          let c = await admin.queueCounts('/', src);
          while (Date.now() < deadline && (c?.unacknowledged ?? 0) < prefetch) {
            await sleep(250);
            c = await admin.queueCounts('/', src);
          }
          mark(`stalled: ${c?.unacknowledged} unacked, ${c?.ready} ready at the source`);
          // Exactly a full window: the peer's prefetch header was understood, and nothing beyond it is held.
          expect(c?.unacknowledged).toBe(prefetch);
        }
        // The bridge's own view, on every peer: a full window, and nothing beyond it (a peer that ignored the prefetch
        // header would have delivered more).
        const deadline = Date.now() + 20_000;
        let held = await bridgeInFlight();
        while (Date.now() < deadline && (held ?? 0) < prefetch) {
          await sleep(100);
          held = await bridgeInFlight();
        }
        mark(`stalled: ${held} in flight at the bridge`);
        expect(held, 'in flight at the bridge while the target is stalled').toBe(prefetch);
        await sleep(1000);
        expect(await bridgeInFlight(), 'still a full window, no more').toBe(prefetch);
        await bridge.kill('SIGKILL');
        proxy.cut();
        proxy.resume();
        const atKill = await fx.amqp.count(dst);
        expect(atKill).toBeLessThan(total);

        bridge = await start(yaml);
        await started(bridge);
        const got = await readTarget('rabbit', dst, total);
        for (const m of got) expect(m.id).toMatch(peer.stableMessageId ? /^ID:/ : /^bb-[0-9a-f-]{36}$/);
        const { extraCopies, flagged } = expectDeliveryPromise(got, total);
        mark(`${peer.name} source SIGKILL: ${extraCopies} extra copies, ${flagged} flagged, max in flight sampled ${maxInFlight} at the bridge (${bridgeReadings} readings), ${admin ? `${maxUnacked} unacked at the broker (${brokerReadings} readings)` : 'no broker view'}`);
        expect(flagged).toBeGreaterThanOrEqual(extraCopies);
        expect(bridgeReadings, "readings of the bridge's in-flight count").toBeGreaterThan(0);
        expect(maxInFlight).toBe(prefetch);
        if (admin) {
          expect(brokerReadings, "readings of the broker's unacked count").toBeGreaterThan(0);
          expect(maxUnacked).toBeGreaterThan(0);
          expect(maxUnacked).toBeLessThanOrEqual(prefetch);
        }
        // Never NACKed: nothing of ours was dead-lettered by ActiveMQ.
        if (peer.hasActiveMqDlq) expect(await countOwnDeadLetters([src])).toBe(0);
      } finally {
        sampling = false;
        await sampler;
        await proxy.stop();
      }
    },
  );

  it('STOMP target: AMQP → STOMP with a SIGKILL mid-stream loses nothing; every extra copy is flagged', { timeout: 150_000 }, async () => {
    const src = await fx.queue('src', 'rabbit');
    const dst = await fx.queue('dst', stomp);
    const yaml = config({
      bridges: [{ sourceQueue: src, targetConnection: stomp, target: `queue: "${dst}"`, extra: { prefetch: 200, 'retry-interval': 500, 'max-retry-interval': 500 } }],
      idCache: { 'reservation-lease': 3000 },
    });
    const total = 4000;
    // No duplicate-ID header: the bridge stamps IDs (and must keep them across the redeliveries the kill causes).
    await publish('rabbit', src, Array.from({ length: total }, (_, i) => ({ seq: i })));
    let bridge = await start(yaml);
    await fx.amqp.waitForCount(src, (n) => n <= total - 1000, 60_000);
    await bridge.kill('SIGKILL');
    expect(await fx.amqp.count(src)).toBeGreaterThan(0);
    bridge = await start(yaml);
    await fx.amqp.waitForCount(src, (n) => n === 0, 90_000);
    const got = await readTarget(stomp, dst, total);
    const { extraCopies, flagged } = expectDeliveryPromise(got, total);
    mark(`${peer.name} target SIGKILL: ${extraCopies} extra copies, ${flagged} flagged`);
    expect(flagged).toBeGreaterThanOrEqual(extraCopies);
    for (const m of got) expect(m.id).toMatch(/^bb-[0-9a-f-]{36}$/);
  });

  it('transactional batches (max-batch-size 50): re-sent IDs inside and across batches are dropped; exactly the distinct messages arrive', { timeout: 120_000 }, async () => {
    const src = await fx.queue('src', 'rabbit');
    const dst = await fx.queue('dst', stomp);
    const yaml = config({
      bridges: [{ sourceQueue: src, targetConnection: stomp, target: `queue: "${dst}"`, extra: { prefetch: 500, 'max-batch-size': 50, 'max-batch-time': 50 } }],
      idCache: { 'id-cache-size': 10_000 },
    });
    const bridge = await start(yaml);
    const total = 2000;
    // Every fifth message is followed by a re-send of the ID two before it: both copies fall in the same batch.
    const items: { seq: number; id: string }[] = [];
    for (let i = 0; i < total; i++) {
      items.push({ seq: i, id: `id-${i}` });
      if (i % 5 === 4) items.push({ seq: i - 2, id: `id-${i - 2}` });
    }
    // And 100 re-sends of IDs from earlier batches.
    for (let i = 0; i < 100; i++) items.push({ seq: i * 7, id: `id-${i * 7}` });
    const resent = items.length - total;
    await publish('rabbit', src, items);

    await bridge.waitForLog(isDrop, 90_000, resent);
    await fx.amqp.waitForCount(src, (n) => n === 0, 30_000);
    const got = await readTarget(stomp, dst, total);
    expect(got).toHaveLength(total);
    expect(new Set(got.map((m) => m.id)).size).toBe(total);
    for (const m of got) {
      expect(m.id).toBe(`id-${m.seq}`);
      expect(m.flagged).toBe(false);
    }
    // Each re-sent ID is dropped once, on its first delivery. A copy the source delivers again (a batch rolled back
    // under load) is a duplicate too, and may be dropped as well; it is told apart by the flag the log line carries,
    // never counted as one of the re-sends. (CI saw 501 first-delivery drops twice: a parked re-send taken twice by the
    // send loop, test/unit/send-loop-order.test.ts.)
    const redeliveredDrops = bridge.count((l) => isDrop(l) && l.redelivered === true);
    if (redeliveredDrops > 0) mark(`${peer.name} transactional batches: ${redeliveredDrops} redelivered copies dropped`);
    expect(bridge.count((l) => isDrop(l) && l.redelivered === false)).toBe(resent);
  });
});

describe.each([
  ['STOMP(activemq) → STOMP(rabbitmq)', 'activemq', 'rabbitstomp'],
  ['STOMP(rabbitmq) → STOMP(activemq)', 'rabbitstomp', 'activemq'],
] as const)('%s bridge', (_name, from, to) => {
  it('forwards 2,000 distinct messages once each and drops 500 re-sent IDs', { timeout: 120_000 }, async () => {
    await forwardsOnceAndDropsResent(from, to);
  });
});

/** Only an ActiveMQ this project's script runs may be restarted (another one is not ours to stop). */
const managedBroker =
  existsSync(resolve(import.meta.dirname, '../../.activemq/activemq.pid')) && /^stomp:\/\/(127\.0\.0\.1|localhost):61613\/?$/.test(process.env.STOMP_URL ?? '');

describe.runIf(managedBroker)('STOMP target (ActiveMQ restarts: scripts/activemq.sh)', () => {
  it('reconnects by itself when ActiveMQ restarts mid-stream: nothing lost, extra copies flagged', { timeout: 180_000 }, async () => {
    const lease = 5000;
    const src = await fx.queue('src', 'rabbit');
    const dst = await fx.queue('dst', 'activemq');
    const yaml = config({
      bridges: [{ sourceQueue: src, targetConnection: 'activemq', target: `queue: "${dst}"`, extra: { prefetch: 500, 'retry-interval': 500, 'max-retry-interval': 1000 } }],
      // Now and then reservations of the session that died are not given back (a bridge bug, not yet fixed): their
      // redeliveries then wait for the lease to run out. Keep that wait short.
      idCache: { 'reservation-lease': lease },
    });
    const total = 8000;
    // No duplicate-ID header: the bridge stamps IDs (and must keep them across the redeliveries the restart causes).
    await publish('rabbit', src, Array.from({ length: total }, (_, i) => ({ seq: i })));
    const bridge = await start(yaml);
    await fx.amqp.waitForCount(src, (n) => n <= total - 1500, 60_000);
    mark('restart');
    await activemq('restart');
    mark('restarted');
    await bridge.waitForLog((l) => l.msg.startsWith('connection lost'), 30_000);
    // The same process connects again, without help.
    await bridge.waitForLog((l) => l.msg === 'bridge running', 60_000, 2);
    mark('reconnected');
    await fx.amqp.waitForCount(src, (n) => n === 0, 90_000);
    mark('source empty');
    const got = await readTarget('activemq', dst, total, 90_000, quietAfterCrash(lease));
    mark('read');
    const { extraCopies, flagged } = expectDeliveryPromise(got, total);
    mark(`restart: ${extraCopies} extra copies, ${flagged} flagged`);
    expect(flagged).toBeGreaterThanOrEqual(extraCopies);
    for (const m of got) expect(m.id).toMatch(/^bb-[0-9a-f-]{36}$/);
  });
});

describe('ActiveMQ: transactional batches (max-batch-size 50, max-batch-time 50)', () => {
  const batching = { 'max-batch-size': 50, 'max-batch-time': 50 };

  it('a batch whose COMMIT fails acks nothing of it; after the target is back every message arrives, extra copies flagged', { timeout: 150_000 }, async () => {
    const src = await fx.queue('src', 'rabbit');
    const dst = await fx.queue('dst', 'activemq');
    const proxy = await TcpProxy.forUrl(services.stompUrl).start();
    // bridge → trap → proxy → ActiveMQ: the trap stalls the proxy just before the 11th COMMIT reaches it.
    const trap = await new CommitTrap(proxy, 10).start();
    try {
      const prefetch = 500;
      const yaml = config(
        {
          bridges: [
            {
              sourceQueue: src,
              targetConnection: 'activemq',
              target: `queue: "${dst}"`,
              extra: { prefetch, ...batching, 'confirm-timeout': 2000, 'retry-interval': 500, 'max-retry-interval': 1000 },
            },
          ],
          stompUrl: `stomp://127.0.0.1:${trap.port}`,
        },
        // Reconnects through the stalled proxy must give up quickly too.
        'connect-timeout: 2000',
      );
      const total = 6000;
      await publish('rabbit', src, Array.from({ length: total }, (_, i) => ({ seq: i, id: `id-${i}` })));
      const bridge = await start(yaml);

      // The COMMIT of a batch whose every SEND was confirmed goes into a black hole: its RECEIPT never comes.
      const failed = await trap.tripped;
      expect(failed.ids.length).toBeGreaterThan(0);
      await bridge.waitForLog((l) => l.msg.startsWith('connection lost'), 20_000);
      const lost = bridge.logs.find((l) => l.msg.startsWith('connection lost'))!;
      expect(lost.msg).toMatch(/no RECEIPT for a (COMMIT|transaction) within 2000 ms/);

      // The session is over and the target cannot be reached: the source is closed, every unacked message is back
      // in the queue. What the target holds is exactly what was committed.
      const committed = await readTarget('activemq', dst, 0);
      const ready = await fx.amqp.settledCount(src, 1000, 30_000);
      mark(`stalled at ${failed.transaction} (${failed.ids.length} messages): "${lost.msg}"; ${committed.length} committed at the target, ${ready} back in the source`);
      // Nothing of the failed batch is visible at the target…
      const committedIds = new Set(committed.map((m) => m.id));
      expect(failed.ids.filter((id) => committedIds.has(id))).toEqual([]);
      // …and nothing was acked that was not committed: every message not at the target is still in the source.
      expect(ready + committed.length).toBeGreaterThanOrEqual(total);
      // The gap (committed but not yet acked when the session ended) is at most what was in flight.
      expect(ready + committed.length - total).toBeLessThanOrEqual(prefetch);
      expect(committed.every((m) => !m.flagged)).toBe(true);
      expect(committedIds.size).toBe(committed.length);

      proxy.resume();
      await fx.amqp.waitForCount(src, (n) => n === 0, 90_000);
      const rest = await readTarget('activemq', dst, total - committed.length);
      const all = [...committed, ...rest];
      const { extraCopies, flagged } = expectDeliveryPromise(all, total);
      expect(flagged).toBeGreaterThanOrEqual(extraCopies);
      for (const m of all) expect(m.id).toBe(`id-${m.seq}`);
      // Every message of the failed batch arrived after all.
      const allIds = new Set(all.map((m) => m.id));
      expect(failed.ids.filter((id) => !allIds.has(id))).toEqual([]);
      mark(`after resume: ${extraCopies} extra copies, ${flagged} flagged`);
    } finally {
      await trap.stop();
      await proxy.stop();
    }
  });
});
