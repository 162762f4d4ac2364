/**
 * Loop prevention against the real brokers (docs/delivery.md#loops, docs/design.md §11 "No loops"): two sites kept in
 * sync both ways. On each side a fan-out feeds a local queue and the bridge's own queue; bridge `there` reads site 1's
 * and publishes into site 2's fan-out, bridge `back` the other way; both run in one process. 1,000 messages published
 * on each side: each local queue holds each of the 2,000 exactly once, the bridges' queues are empty, and each bridge
 * dropped the 1,000 copies that came back (bridge_messages_dropped_total{reason="loop"}). Site 1 is RabbitMQ (vhost
 * `/`, a fanout exchange); site 2 is RabbitMQ on a vhost of its own (made for the test through the management API),
 * ActiveMQ (a virtual topic, `Consumer.*.VirtualTopic.*` queues), NATS JetStream (one stream, two consumers) or
 * Mosquitto over MQTT 5 (one topic, two subscribers). A chain of three bridges over four brokers arrives with the
 * default max-hops and is dropped with max-hops 2.
 */
import amqplib from 'amqplib';
import mqtt from 'mqtt';
import { OwnMosquitto } from '../faults/own-mosquitto.js';
import { AckPolicy, DeliverPolicy, nanos } from 'nats';
import { afterAll, describe, expect, it } from 'vitest';
import { AmqpTestClient, type ReceivedMessage } from '../support/amqp.js';
import { useBridgeFixture } from '../support/bridge-fixture.js';
import type { BridgeProcess } from '../support/bridge-process.js';
import { pathName } from '../support/configs.js';
import { uniqueClientId, uniqueTopic } from '../support/mqtt.js';
import { NatsTestClient } from '../support/nats.js';
import { parsePrometheusText } from '../support/prometheus-text.js';
import { services, uniqueName } from '../support/services.js';
import { publishStomp, readStomp } from '../support/stomp.js';
import { untilValue } from '../support/wait.js';

const fx = useBridgeFixture();
const nats = new NatsTestClient();
const N = 1000;
const ID = '_AMQ_DUPL_ID';
const MGMT = new URL(process.env.RABBITMQ_MANAGEMENT_URL ?? 'http://guest:guest@127.0.0.1:15672');
const vhosts: string[] = [];

afterAll(async () => {
  await nats.cleanup();
  for (const v of vhosts) await admin('DELETE', `/api/vhosts/${encodeURIComponent(v)}`);
});

async function admin(method: string, path: string, body?: unknown): Promise<void> {
  const auth = Buffer.from(`${decodeURIComponent(MGMT.username)}:${decodeURIComponent(MGMT.password)}`).toString('base64');
  const res = await fetch(new URL(path, MGMT.origin), {
    method,
    headers: { authorization: `Basic ${auth}`, 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    signal: AbortSignal.timeout(10_000),
  });
  if (!res.ok && !(method === 'DELETE' && res.status === 404)) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
}

/** A vhost of this test's own (deleted after the file), guest allowed everything; its AMQP URL. */
async function vhost(): Promise<string> {
  const name = uniqueName('bb-loops');
  vhosts.push(name);
  await admin('PUT', `/api/vhosts/${encodeURIComponent(name)}`, {});
  await admin('PUT', `/api/permissions/${encodeURIComponent(name)}/${encodeURIComponent(decodeURIComponent(MGMT.username))}`, { configure: '.*', write: '.*', read: '.*' });
  const u = new URL(services.amqpUrl);
  u.pathname = `/${encodeURIComponent(name)}`;
  return u.toString();
}

/** One site: how the bridges reach it, how the test publishes into its fan-out, and what its local queue holds. */
interface Site {
  connection: string;
  /** The bridge's own queue (where the bridge that leaves the site reads). */
  source: string;
  /** The fan-out (where the bridge that arrives at the site publishes). */
  target: string;
  publish(bodies: string[]): Promise<void>;
  /** The bodies the local queue holds, once it is quiet with at least `atLeast`. */
  local(atLeast: number): Promise<string[]>;
  /** Messages left in the bridge's own queue. */
  left(): Promise<number>;
  close(): Promise<void>;
}

/** A fanout exchange on `url`'s vhost bound to a local queue and the bridge's queue. */
async function rabbitSite(url: string, connection: string): Promise<Site> {
  const conn = await amqplib.connect(url);
  const ch = await conn.createConfirmChannel();
  const [x, local, own] = [uniqueName('loops-x'), uniqueName('loops-local'), uniqueName('loops-own')];
  await ch.assertExchange(x, 'fanout', { durable: false, autoDelete: false });
  for (const q of [local, own]) {
    await ch.assertQueue(q, { durable: true });
    await ch.bindQueue(q, x, '');
  }
  const client = await AmqpTestClient.connect(url);
  return {
    connection: `{ type: amqp, url: "${url}" }`,
    source: `{ connection: ${connection}, queue: "${own}" }`,
    target: `{ connection: ${connection}, exchange: "${x}", routing-key: "" }`,
    async publish(bodies) {
      for (const b of bodies) ch.publish(x, '', Buffer.from(b), { persistent: true, headers: { [ID]: `id-${b}` } });
      await ch.waitForConfirms();
    },
    async local(atLeast) {
      await client.waitForCount(local, (n) => n >= atLeast, 120_000);
      await client.settledCount(local, 2000);
      return (await client.drain(local)).map((m: ReceivedMessage) => m.body.toString());
    },
    left: () => client.count(own),
    async close() {
      await client.deleteQueues(local, own);
      await ch.deleteExchange(x);
      await client.close();
      await conn.close();
    },
  };
}

/** An ActiveMQ virtual topic: Consumer.local.* and Consumer.bridge.* queues, both made before anything is published. */
async function activemqSite(connection: string): Promise<Site> {
  const topic = `VirtualTopic.${uniqueName('loops')}`;
  const [local, own] = [`Consumer.local.${topic}`, `Consumer.bridge.${topic}`];
  // A virtual topic copies only into consumer queues that exist: a subscription makes each one.
  for (const q of [local, own]) await readStomp(q, { quietMs: 200, timeoutMs: 2_000 });
  return {
    connection: `{ type: stomp, url: "${services.stompUrl}" }`,
    source: `{ connection: ${connection}, queue: "${own}" }`,
    target: `{ connection: ${connection}, queue: "/topic/${topic}" }`,
    publish: (bodies) => publishStomp(`/topic/${topic}`, bodies.map((body) => ({ body }))),
    async local(atLeast) {
      return (await readStomp(local, { atLeast, quietMs: 3_000, timeoutMs: 120_000 })).map((m) => m.body.toString());
    },
    async left() {
      return (await readStomp(own, { quietMs: 500, timeoutMs: 5_000, accept: () => false })).length;
    },
    close: () => Promise.resolve(),
  };
}

/** A JetStream stream: the bridge's durable consumer reads it, and what it stores is the local queue. */
async function natsSite(connection: string): Promise<Site> {
  const stream = await nats.stream(uniqueName('LOOPS').replace(/[^A-Za-z0-9]/g, '_'));
  const subject = `${stream.toLowerCase()}.in`;
  await (await nats.jsm()).consumers.add(stream, { durable_name: 'bridge', ack_policy: AckPolicy.Explicit, deliver_policy: DeliverPolicy.All, ack_wait: nanos(30_000) });
  return {
    connection: `{ type: nats, url: "${process.env.NATS_URL ?? 'nats://127.0.0.1:4222'}" }`,
    source: `{ connection: ${connection}, stream: "${stream}", consumer: bridge }`,
    target: `{ connection: ${connection}, subject: "${subject}" }`,
    publish: (bodies) => nats.publish(subject, bodies.map((body) => ({ body }))),
    async local(atLeast) {
      await untilValue('the stream holds them', () => nats.count(stream), (n) => n >= atLeast, { timeoutMs: 120_000 });
      await new Promise((r) => setTimeout(r, 2_000));
      return (await nats.stored(stream)).map((m) => m.body.toString());
    },
    async left() {
      const info = await (await nats.jsm()).consumers.info(stream, 'bridge');
      return info.num_pending + info.num_ack_pending;
    },
    close: () => Promise.resolve(),
  };
}

/**
 * A Mosquitto topic (MQTT 5): a subscriber of the test's, online throughout, is the local queue. A Mosquitto of the
 * test's own with `max_queued_messages 0`: the shared one's limit of 1,000 queued per client dropped 16-60 of the 2,000
 * this subscriber gets at once ("Outgoing messages are being dropped" in its log), a loss at the broker, not the bridge.
 */
async function mqttSite(connection: string): Promise<Site> {
  const broker = new OwnMosquitto('broker-bridge-loops-mosquitto-');
  await broker.start();
  const topic = uniqueTopic('loops');
  const got: string[] = [];
  const client = await mqtt.connectAsync(broker.url, { protocolVersion: 5, clientId: uniqueClientId('loops-local'), clean: true });
  client.on('message', (_t, payload) => got.push(payload.toString()));
  await client.subscribeAsync(topic, { qos: 1 });
  return {
    connection: `{ type: mqtt, url: "${broker.url}", client-id: "${uniqueClientId('bb')}" }`,
    source: `{ connection: ${connection}, topic: "${topic}" }`,
    target: `{ connection: ${connection}, topic: "${topic}" }`,
    publish: (bodies) => Promise.all(bodies.map((b) => client.publishAsync(topic, b, { qos: 1 }))).then(() => undefined),
    async local(atLeast) {
      await untilValue('the subscriber has them', () => got.length, (n) => n >= atLeast, { timeoutMs: 120_000 });
      await new Promise((r) => setTimeout(r, 3_000));
      return [...got];
    },
    left: () => Promise.resolve(0),
    close: () => client.endAsync().finally(() => broker.stop()),
  };
}

function yamlOf(connections: Record<string, string>, bridges: string[]): string {
  const { keyPrefix } = fx.config({ bridges: [] });
  return [
    'log-level: info',
    'http-port: 0',
    'connections:',
    ...Object.entries(connections).map(([k, v]) => `  ${k}: ${v}`),
    'id-cache:',
    `  redis-url: "${services.redisUrl}"`,
    `  key-prefix: "${keyPrefix}"`,
    'bridges:',
    ...bridges,
    '',
  ].join('\n');
}

async function apiOf(bridge: BridgeProcess): Promise<string> {
  await bridge.waitForLog((l) => l.component === 'http' && typeof l.port === 'number', 10_000);
  return `http://127.0.0.1:${bridge.logs.find((l) => l.component === 'http' && typeof l.port === 'number')?.port as number}`;
}

async function metric(api: string, name: string, labels: Record<string, string>): Promise<number> {
  const res = await fetch(`${api}/metrics`, { signal: AbortSignal.timeout(10_000) });
  return parsePrometheusText(await res.text()).find(name, labels)[0]?.value ?? 0;
}

const range = (prefix: string) => Array.from({ length: N }, (_, i) => `${prefix}-${i}`);

/** Each body exactly once: the sorted list equals the expected one (a second copy or a missing one shows). */
function expectEachOnce(got: string[], expected: string[]): void {
  expect(got.length).toBe(expected.length);
  expect([...got].sort()).toEqual([...expected].sort());
}

const SITE2: [string, (c: string) => Promise<Site>][] = [
  ['RabbitMQ, a second vhost', async (c) => rabbitSite(await vhost(), c)],
  ['ActiveMQ, a virtual topic', activemqSite],
  ['NATS JetStream', natsSite],
  ['Mosquitto, MQTT 5', mqttSite],
];

describe.each(SITE2)('two sites kept in sync both ways: RabbitMQ ↔ %s', (_name, makeSite2) => {
  it('every local queue holds each of the 2,000 messages once; each bridge drops the 1,000 that came back', { timeout: 300_000 }, async () => {
    const one = await rabbitSite(services.amqpUrl, 'site1');
    const two = await makeSite2('site2');
    try {
      const yaml = yamlOf({ site1: one.connection, site2: two.connection }, [
        '  - name: there',
        `    source: ${one.source}`,
        `    target: ${two.target}`,
        '    prefetch: 200',
        '  - name: back',
        `    source: ${two.source}`,
        `    target: ${one.target}`,
        '    prefetch: 200',
      ]);
      const bridge = await fx.start(yaml, 2);
      const api = await apiOf(bridge);
      await Promise.all([one.publish(range('s1')), two.publish(range('s2'))]);
      const all = [...range('s1'), ...range('s2')];
      const [at1, at2] = await Promise.all([one.local(2 * N), two.local(2 * N)]);
      expectEachOnce(at1, all);
      expectEachOnce(at2, all);
      for (const b of ['there', 'back']) {
        const dropped = await untilValue(`${b}: loops dropped`, () => metric(api, 'bridge_messages_dropped_total', { bridge: b, reason: 'loop' }), (n) => n >= N, { timeoutMs: 60_000 });
        expect(dropped).toBe(N);
        expect(await metric(api, 'bridge_messages_forwarded_total', { bridge: b })).toBe(N);
      }
      expect([await one.left(), await two.left()]).toEqual([0, 0]);
      // Nothing circulates: a second look finds the same.
      expect(await metric(api, 'bridge_messages_dropped_total', { bridge: 'there', reason: 'loop' })).toBe(N);
      // The loop lines are rate-limited: one a minute per bridge, not one per message.
      expect(bridge.count((l) => typeof l.msg === 'string' && l.msg.startsWith('a message was dropped, not forwarded'))).toBeLessThanOrEqual(2);
    } finally {
      await fx.stopAll();
      await one.close();
      await two.close();
    }
  });
});

describe('a chain of bridges in series', () => {
  it('RabbitMQ / → RabbitMQ vhost → NATS → ActiveMQ: 3 hops pass with the default max-hops, not with max-hops 2', { timeout: 120_000 }, async () => {
    const [src, end] = [await fx.queue('chain-src'), uniqueName('chain-end')];
    const v = await vhost();
    const mid = uniqueName('chain-mid');
    const c = await AmqpTestClient.connect(v);
    await c.queue(mid);
    const stream = await nats.stream(uniqueName('CHAIN').replace(/[^A-Za-z0-9]/g, '_'));
    await (await nats.jsm()).consumers.add(stream, { durable_name: 'bridge', ack_policy: AckPolicy.Explicit, deliver_policy: DeliverPolicy.All, ack_wait: nanos(30_000) });
    const chain = (thirdMaxHops: number) =>
      yamlOf(
        { r1: `{ type: amqp, url: "${services.amqpUrl}" }`, r2: `{ type: amqp, url: "${v}" }`, n: `{ type: nats, url: "${process.env.NATS_URL ?? 'nats://127.0.0.1:4222'}" }`, mq: `{ type: stomp, url: "${services.stompUrl}" }` },
        [
          '  - name: hop1',
          `    source: { connection: r1, queue: "${src}" }`,
          `    target: { connection: r2, queue: "${mid}" }`,
          '  - name: hop2',
          `    source: { connection: r2, queue: "${mid}" }`,
          `    target: { connection: n, subject: "${stream.toLowerCase()}.x" }`,
          '  - name: hop3',
          `    source: { connection: n, stream: "${stream}", consumer: bridge }`,
          `    target: { connection: mq, queue: "${end}" }`,
          `    max-hops: ${thirdMaxHops}`,
        ],
      );
    try {
      const bridge = await fx.start(chain(4), 3);
      await fx.amqp.publish(src, [{ body: Buffer.from('c1'), options: { headers: { [ID]: 'chain-1' } } }]);
      const [m] = await readStomp(end, { atLeast: 1, quietMs: 1000, timeoutMs: 30_000 });
      expect(m?.body.toString()).toBe('c1');
      const r2 = `amqp://${new URL(v).hostname}:${new URL(v).port || '5672'}${new URL(v).pathname}`;
      expect(m?.headers['x-bridge-path']).toBe(`${pathName(services.amqpUrl)},${r2},${pathName(process.env.NATS_URL ?? 'nats://127.0.0.1:4222')},${pathName(services.stompUrl)}`);
      await bridge.stop();

      const strict = await fx.start(chain(2), 3);
      const api = await apiOf(strict);
      await fx.amqp.publish(src, [{ body: Buffer.from('c2'), options: { headers: { [ID]: 'chain-2' } } }]);
      await untilValue('hop3 drops it', () => metric(api, 'bridge_messages_dropped_total', { bridge: 'hop3', reason: 'loop' }), (n) => n === 1, { timeoutMs: 30_000 });
      expect(await readStomp(end, { quietMs: 1000, timeoutMs: 5_000 })).toEqual([]);
      expect(await metric(api, 'bridge_messages_forwarded_total', { bridge: 'hop2' })).toBe(1);
    } finally {
      await fx.stopAll();
      await c.deleteQueues(mid);
      await c.close();
    }
  });
});
