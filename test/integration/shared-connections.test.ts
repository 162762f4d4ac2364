/**
 * Bridges of one process share its connections (src/endpoints/connections.ts), on a real `broker-bridge run` between
 * RabbitMQ queues: two bridges on one configured connection are on one consuming and one publishing connection
 * (named in /bridges, counted by bridge_connections); a reload that adds, removes or changes a bridge opens or closes
 * channels only, and a changed connection setting gives the bridges using it a connection of their own; a loss of the
 * shared connection (closed by the broker, by its name through the management API) or of the process (SIGKILL)
 * reaches both bridges, and nothing is lost, every extra copy flagged; a channel error of one bridge (its target
 * exchange deleted: 404) stays with that bridge, whose messages end in its target or its dead-letter queue, while the
 * other one forwards without a break: one session all along, every message once, in order, none flagged.
 */
import { writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { copiesById, type ReceivedMessage } from '../support/amqp.js';
import { BridgeProcess, writeConfig } from '../support/bridge-process.js';
import { useBridgeFixture } from '../support/bridge-fixture.js';
import { parsePrometheusText } from '../support/prometheus-text.js';
import { services, uniqueName } from '../support/services.js';
import { RabbitAdmin } from '../faults/rabbit-admin.js';
import { quietAfterCrash, sleep, until, untilValue } from '../support/wait.js';

const ID = '_AMQ_DUPL_ID';
const FLAG = 'x-bridge-possible-duplicate';
const TOKEN = 'shared-connections-test';
const LEASE_MS = 3000;
const fx = useBridgeFixture();
const admin = new RabbitAdmin(services.rabbitManagementUrl);

interface BridgeReport {
  name: string;
  state: string;
  counters: { sessions: number; forwarded: number; deadLettered: number };
  connections: { source: string | null; target: string | null; deadLetter?: string | null };
}

interface Bridges {
  bridges: BridgeReport[];
  connections: { name: string; connection: string; role: string; endpoints: number; channels: number }[];
}

async function api(bridge: BridgeProcess): Promise<string> {
  await bridge.waitForLog((l) => l.component === 'http' && typeof l.port === 'number', 10_000);
  return `http://127.0.0.1:${bridge.logs.find((l) => l.component === 'http' && typeof l.port === 'number')?.port as number}`;
}

async function bridgesOf(base: string): Promise<Bridges> {
  return (await (await fetch(`${base}/bridges`)).json()) as Bridges;
}

function byName(b: Bridges, name: string): BridgeReport {
  const r = b.bridges.find((x) => x.name === name);
  if (!r) throw new Error(`no bridge ${name} in /bridges`);
  return r;
}

const numbered = (prefix: string, from: number, n: number) =>
  Array.from({ length: n }, (_, i) => ({ body: Buffer.from(`${prefix}-${from + i}`), options: { headers: { [ID]: `${prefix}-${from + i}` } } }));

/** Publishes `total` messages to `queue` in chunks of 50 while `during` runs its fault, so that the fault meets a flow. */
async function publishDuring(queue: string, prefix: string, total: number, during: () => Promise<void>): Promise<void> {
  const publishing = (async () => {
    for (let i = 0; i < total; i += 50) {
      await fx.amqp.publish(queue, numbered(prefix, i, Math.min(50, total - i)));
      await sleep(20);
    }
  })();
  await sleep(200);
  await during();
  await publishing;
}

/** Every one of `total` IDs of `prefix` arrived, extra copies flagged; the messages as they came. */
async function allThrough(queue: string, prefix: string, total: number): Promise<ReceivedMessage[]> {
  await fx.amqp.waitForCount(queue, (n) => n >= total, 60_000);
  await fx.amqp.settledCount(queue, quietAfterCrash(LEASE_MS));
  const got = await fx.amqp.drain(queue);
  const { distinct, unflaggedExtras } = copiesById(got);
  expect(distinct, `distinct IDs in ${queue}`).toBe(total);
  expect(unflaggedExtras, 'extra copies without the possible-duplicate flag').toEqual([]);
  return got;
}

/** A management API connection name (for DELETE) of the connection the bridge named `clientName`. */
async function managementName(clientName: string): Promise<string> {
  // The management API lists a connection after its first stats emission (a few seconds).
  const c = await untilValue('the connection in the management API', async () => (await admin.connections('/')).find((x) => x.clientName === clientName), (x) => x !== undefined, {
    timeoutMs: 20_000,
    everyMs: 250,
  });
  return c!.name;
}

describe('bridges sharing the connections of their process', () => {
  it('two bridges share one consuming and one publishing connection; a reload that adds, changes or removes bridges touches channels only; a changed connection setting gets a connection of its own', async () => {
    const [s1, d1, s2, d2, s3, d3] = await fx.queues('sc-s1', 'sc-d1', 'sc-s2', 'sc-d2', 'sc-s3', 'sc-d3');
    const keyPrefix = uniqueName('sc');
    const yaml = (bridges: { name: string; src: string; dst: string; prefetch?: number; conn?: string }[], heartbeat = 10) =>
      fx
        .config({
          bridges: bridges.map((b) => ({ name: b.name, sourceQueue: b.src, target: `queue: "${b.dst}"`, extra: { prefetch: b.prefetch ?? 50 } })),
          keyPrefix,
          top: { 'http-port': 0, 'admin-token': TOKEN },
        })
        .yaml.replace(/^ {2}rabbit: \{ type: amqp, (url: "[^"]+") \}$/m, `  rabbit: { type: amqp, $1, heartbeat: ${heartbeat} }`);
    const file = writeConfig(yaml([{ name: 'b1', src: s1!, dst: d1! }, { name: 'b2', src: s2!, dst: d2! }]));
    const bridge = await BridgeProcess.started(file, 2);
    try {
      const base = await api(bridge);
      const first = await untilValue('both bridges connected', () => bridgesOf(base), (b) => b.bridges.every((x) => x.connections.source !== null && x.connections.target !== null));
      const [b1, b2] = [byName(first, 'b1'), byName(first, 'b2')];
      expect(b1.connections.source).toBe(b2.connections.source);
      expect(b1.connections.target).toBe(b2.connections.target);
      expect(b1.connections.source).not.toBe(b1.connections.target);
      expect(b1.connections.source).toMatch(/^broker-bridge rabbit consume #\d+\.\d+$/);
      expect(b1.connections.target).toMatch(/^broker-bridge rabbit publish #\d+\.\d+$/);
      expect(first.connections.map((c) => [c.role, c.endpoints]).sort()).toEqual([
        ['consume', 2],
        ['publish', 2],
      ]);
      const metrics = parsePrometheusText(await (await fetch(`${base}/metrics`)).text());
      expect(metrics.value('bridge_connections', { connection: 'rabbit', role: 'consume' })).toBe(1);
      expect(metrics.value('bridge_connections', { connection: 'rabbit', role: 'publish' })).toBe(1);
      // RabbitMQ's own view: exactly these two connections are the process's (the test client's has no such name).
      await managementName(b1.connections.source!);
      await managementName(b1.connections.target!);

      await fx.amqp.publish(s1!, numbered('one', 0, 20));
      await fx.amqp.publish(s2!, numbered('two', 0, 20));
      await fx.amqp.waitForCount(d1!, (n) => n === 20);
      await fx.amqp.waitForCount(d2!, (n) => n === 20);

      // b3 added, b2 changed (its prefetch), b1 unchanged: the same two connections, with channels opened and closed.
      writeFileSync(file, yaml([{ name: 'b1', src: s1!, dst: d1! }, { name: 'b2', src: s2!, dst: d2!, prefetch: 40 }, { name: 'b3', src: s3!, dst: d3! }]));
      const r1 = (await (await fetch(`${base}/reload`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}` } })).json()) as Record<string, string[]>;
      expect([r1.added, r1.changed, r1.unchanged, r1.removed]).toEqual([['b3'], ['b2'], ['b1'], []]);
      const second = await untilValue('three bridges connected', () => bridgesOf(base), (b) => b.bridges.length === 3 && b.bridges.every((x) => x.connections.target !== null));
      for (const b of second.bridges) expect([b.name, b.connections.source, b.connections.target]).toEqual([b.name, b1.connections.source, b1.connections.target]);
      expect(byName(second, 'b1').counters.sessions).toBe(1);

      // b3 removed: its channels close, the connections stay for the others.
      writeFileSync(file, yaml([{ name: 'b1', src: s1!, dst: d1! }, { name: 'b2', src: s2!, dst: d2!, prefetch: 40 }]));
      const r2 = (await (await fetch(`${base}/reload`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}` } })).json()) as Record<string, string[]>;
      expect(r2.removed).toEqual(['b3']);
      const third = await bridgesOf(base);
      expect(third.connections.map((c) => [c.name, c.endpoints]).sort()).toEqual(
        [
          [b1.connections.source, 2],
          [b1.connections.target, 2],
        ].sort(),
      );

      // The connection's heartbeat changed: every bridge on it is changed, and they move to a new pair of connections;
      // the old pair closes once they drained.
      writeFileSync(file, yaml([{ name: 'b1', src: s1!, dst: d1! }, { name: 'b2', src: s2!, dst: d2!, prefetch: 40 }], 20));
      const r3 = (await (await fetch(`${base}/reload`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}` } })).json()) as Record<string, string[]>;
      expect(r3.changed?.sort()).toEqual(['b1', 'b2']);
      const fourth = await untilValue('both on new connections', () => bridgesOf(base), (b) => b.bridges.every((x) => x.connections.source !== null && x.connections.source !== b1.connections.source));
      expect(byName(fourth, 'b1').connections.source).toBe(byName(fourth, 'b2').connections.source);
      expect(byName(fourth, 'b1').connections.target).toBe(byName(fourth, 'b2').connections.target);
      expect(fourth.connections).toHaveLength(2);
      expect(fourth.connections.map((c) => c.name)).not.toContain(b1.connections.source);

      await fx.amqp.publish(s1!, numbered('one', 20, 20));
      await fx.amqp.publish(s2!, numbered('two', 20, 20));
      await allThrough(d1!, 'one', 40);
      await allThrough(d2!, 'two', 40);
    } finally {
      await bridge.kill('SIGKILL');
    }
  });

  for (const role of ['consume', 'publish'] as const) {
    it(`the broker closes the shared ${role === 'consume' ? 'consuming' : 'publishing'} connection: both bridges hear it and reconnect; nothing lost, extra copies flagged`, async () => {
      const [s1, d1, s2, d2] = await fx.queues('scc-s1', 'scc-d1', 'scc-s2', 'scc-d2');
      const { yaml } = fx.config({
        bridges: [
          { name: 'b1', sourceQueue: s1!, target: `queue: "${d1!}"`, extra: { prefetch: 50, 'retry-interval': 200, 'max-retry-interval': 500 } },
          { name: 'b2', sourceQueue: s2!, target: `queue: "${d2!}"`, extra: { prefetch: 50, 'retry-interval': 200, 'max-retry-interval': 500 } },
        ],
        top: { 'http-port': 0 },
        idCache: { 'reservation-lease': LEASE_MS },
      });
      const bridge = await fx.start(yaml, 2);
      const base = await api(bridge);
      const before = await untilValue('connected', () => bridgesOf(base), (b) => b.bridges.every((x) => x.connections.source !== null && x.connections.target !== null));
      const victim = role === 'consume' ? byName(before, 'b1').connections.source! : byName(before, 'b1').connections.target!;
      const name = await managementName(victim);
      const total = 1500;
      const both = Promise.all([
        publishDuring(s1!, 'one', total, async () => {
          expect(await admin.closeConnection(name)).toBe(true);
        }),
        publishDuring(s2!, 'two', total, () => Promise.resolve()),
      ]);
      await both;
      await allThrough(d1!, 'one', total);
      await allThrough(d2!, 'two', total);
      const after = await bridgesOf(base);
      for (const b of after.bridges) expect([b.name, b.counters.sessions]).toEqual([b.name, 2]);
      const now = role === 'consume' ? byName(after, 'b1').connections.source : byName(after, 'b1').connections.target;
      expect(now).not.toBe(victim);
      expect(now).toBe(role === 'consume' ? byName(after, 'b2').connections.source : byName(after, 'b2').connections.target);
      expect(bridge.count((l) => l.msg.startsWith('connection lost:'))).toBe(1);
    });
  }

  it('SIGKILL of the process with both bridges mid-stream: after a restart nothing is lost, extra copies flagged', async () => {
    const [s1, d1, s2, d2] = await fx.queues('sck-s1', 'sck-d1', 'sck-s2', 'sck-d2');
    const { yaml } = fx.config({
      bridges: [
        { name: 'b1', sourceQueue: s1!, target: `queue: "${d1!}"`, extra: { prefetch: 100 } },
        { name: 'b2', sourceQueue: s2!, target: `queue: "${d2!}"`, extra: { prefetch: 100 } },
      ],
      idCache: { 'reservation-lease': LEASE_MS },
    });
    const total = 2000;
    await fx.amqp.publish(s1!, numbered('one', 0, total));
    await fx.amqp.publish(s2!, numbered('two', 0, total));
    const first = await fx.start(yaml, 2);
    await fx.amqp.waitForCount(d1!, (n) => n >= 200);
    await first.kill('SIGKILL');
    await fx.start(yaml, 2);
    await allThrough(d1!, 'one', total);
    await allThrough(d2!, 'two', total);
  });

  it("a channel error of one bridge (its target exchange deleted: 404) stays with it: the other forwards on, one session all along, every message once and in order, none flagged", async () => {
    const [sa, outA, dla, sb, outB] = await fx.queues('sce-sa', 'sce-oa', 'sce-dla', 'sce-sb', 'sce-ob');
    const exchange = uniqueName('sce-x');
    await fx.amqp.ch.assertExchange(exchange, 'direct', { durable: false });
    await fx.amqp.ch.bindQueue(outA!, exchange, 'rk');
    const { yaml } = fx.config({
      bridges: [
        {
          name: 'a',
          sourceQueue: sa!,
          target: `exchange: "${exchange}", routing-key: rk`,
          deadLetter: `connection: rabbit, queue: "${dla!}"`,
          extra: { prefetch: 20, 'max-delivery-attempts': 2 },
        },
        { name: 'b', sourceQueue: sb!, target: `queue: "${outB!}"`, extra: { prefetch: 20 } },
      ],
      top: { 'http-port': 0 },
    });
    const bridge = await fx.start(yaml, 2);
    const base = await api(bridge);
    const connected = await untilValue('connected', () => bridgesOf(base), (b) => b.bridges.every((x) => x.connections.target !== null));
    expect(byName(connected, 'a').connections.target).toBe(byName(connected, 'b').connections.target);
    const total = 1500;
    await Promise.all([
      publishDuring(sb!, 'b', total, async () => {
        await until("a's first messages", async () => (await fx.amqp.count(outA!)) > 0, { everyMs: 50 });
        await fx.amqp.ch.deleteExchange(exchange);
      }),
      publishDuring(sa!, 'a', total, () => Promise.resolve()),
    ]);
    // b: one session all along, each message once, in order, none flagged.
    await fx.amqp.waitForCount(outB!, (n) => n >= total, 60_000);
    await fx.amqp.settledCount(outB!, 1000);
    const got = await fx.amqp.drain(outB!);
    expect(got.map((m) => m.body.toString())).toEqual(Array.from({ length: total }, (_, i) => `b-${i}`));
    expect(got.filter((m) => m.headers[FLAG] === true)).toEqual([]);
    // a: every message in its target (before the exchange went) or its dead-letter queue (after); none lost.
    await until("a's messages settled", async () => (await fx.amqp.count(sa!)) === 0, { timeoutMs: 60_000, everyMs: 200 });
    await fx.amqp.settledCount(dla!, 1000);
    const ids = new Set([...(await fx.amqp.drain(outA!)), ...(await fx.amqp.drain(dla!))].map((m) => String(m.headers[ID])));
    expect(ids.size).toBe(total);
    const after = await bridgesOf(base);
    expect(byName(after, 'b').counters.sessions).toBe(1);
    expect(byName(after, 'b').connections.target).toBe(byName(connected, 'b').connections.target);
    expect(byName(after, 'a').counters.deadLettered).toBeGreaterThan(0);
    expect(bridge.count((l) => l.msg.startsWith('connection lost:'))).toBe(0);
  });
});
