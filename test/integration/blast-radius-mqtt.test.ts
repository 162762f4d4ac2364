/**
 * One bad MQTT input costs one message (issue 42, docs/design.md §10.2): two bridges A and B in one `broker-bridge run`
 * process on one configured MQTT connection, to a Mosquitto of the test's own (test/faults/own-mosquitto.ts: floods
 * and huge packets stay off the shared one).
 *
 * - Bad messages to A — one over max-packet-size, one whose MQTT 5 properties are over the 64 KiB the bridge parses —
 *   between ordinary ones: each is dead-lettered with reason `too-large` and what was dropped, PUBACKed (nothing left
 *   at the broker, nothing sent again), A forwards every ordinary message, B forwards its 500, and neither bridge
 *   started a second session.
 * - A flood of 200,000 QoS 0 messages of 1 KiB to A while A's target is full by design (an AMQP queue with
 *   x-max-length and overflow reject-publish): QoS 0 over A's prefetch is dropped and counted
 *   (bridge_messages_dropped_total{reason="qos0-overflow"}), every flood message is accounted for (dropped, forwarded
 *   or in flight), B forwards its 500, and the process's peak RSS stays under 300 MiB (issue 42 saw 530 MiB and more).
 */
import { readFileSync } from 'node:fs';
import amqp from 'amqplib';
import mqtt from 'mqtt';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OwnMosquitto } from '../faults/own-mosquitto.js';
import { useBridgeFixture } from '../support/bridge-fixture.js';
import type { BridgeProcess } from '../support/bridge-process.js';
import { MOSQUITTO_5, dropSession, publishMqtt, readMqtt, uniqueClientId, uniqueTopic, type MqttPeer } from '../support/mqtt.js';
import { parsePrometheusText, type Exposition } from '../support/prometheus-text.js';
import { services } from '../support/services.js';
import { untilValue } from '../support/wait.js';

const fx = useBridgeFixture();
const mosquitto = new OwnMosquitto('broker-bridge-blast-radius-mqtt-');
let peer: MqttPeer;

beforeAll(async () => {
  await mosquitto.start();
  peer = { ...MOSQUITTO_5, url: mosquitto.url };
}, 20_000);

afterAll(async () => {
  await mosquitto.dispose();
});

const REASON = 'x-bridge-dead-letter-reason';
const DROPPED = 'x-bridge-dropped';
const SIZE = 'x-bridge-original-size';

interface Pair {
  clientId: string;
  topicA: string;
  topicB: string;
  yaml: string;
}

/** Bridges a (topic A → targetA, dead letters to deadLetterA) and b (topic B → targetB) on one MQTT connection. */
function pair(o: { targetA: string; deadLetterA: string; targetB: string; maxPacketSize: number; prefetchA: number }): Pair {
  const { keyPrefix } = fx.config({ bridges: [] });
  const clientId = uniqueClientId('bbblast');
  const topicA = uniqueTopic('blast-a');
  const topicB = uniqueTopic('blast-b');
  const yaml = [
    'log-level: info',
    'http-port: 0',
    'connections:',
    `  rabbit: { type: amqp, url: "${services.amqpUrl}" }`,
    `  devices: { type: mqtt, url: "${mosquitto.url}", client-id: "${clientId}", max-packet-size: ${o.maxPacketSize} }`,
    'id-cache:',
    `  redis-url: "${services.redisUrl}"`,
    `  key-prefix: "${keyPrefix}"`,
    'bridges:',
    '  - name: a',
    `    source: { connection: devices, topic: "${topicA}" }`,
    `    target: { connection: rabbit, queue: "${o.targetA}" }`,
    `    dead-letter: { connection: rabbit, queue: "${o.deadLetterA}" }`,
    `    prefetch: ${o.prefetchA}`,
    '    retry-interval: 200',
    '  - name: b',
    `    source: { connection: devices, topic: "${topicB}" }`,
    `    target: { connection: rabbit, queue: "${o.targetB}" }`,
    '    retry-interval: 200',
    '',
  ].join('\n');
  return { clientId, topicA, topicB, yaml };
}

async function metricsOf(bridge: BridgeProcess): Promise<Exposition> {
  await bridge.waitForLog((l) => l.component === 'http' && typeof l.port === 'number', 10_000);
  const port = bridge.logs.find((l) => l.component === 'http' && typeof l.port === 'number')?.port as number;
  return parsePrometheusText(await (await fetch(`http://127.0.0.1:${port}/metrics`)).text());
}

/** The peak resident set size of a process, in MiB (Linux: VmHWM). */
function peakRssMiB(pid: number): number {
  const kb = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
  return Number(kb) / 1024;
}

const numbered = (prefix: string, from: number, n: number) => Array.from({ length: n }, (_, i) => ({ body: `${prefix}-${from + i}` }));

describe('one bad MQTT input to bridge A: A goes on, B does not notice', () => {
  it('a PUBLISH over max-packet-size and one with properties over the limit are dead-lettered alone and PUBACKed; A forwards the rest, B its 500, no bridge reconnects', async () => {
    const [targetA, deadLetterA, targetB] = await fx.queues('blast-mqtt-a', 'blast-mqtt-a-dl', 'blast-mqtt-b');
    const p = pair({ targetA: targetA!, deadLetterA: deadLetterA!, targetB: targetB!, maxPacketSize: 1024 * 1024, prefetchA: 100 });
    const bridge = await fx.start(p.yaml, 2);
    try {
      const before = await metricsOf(bridge);
      expect([before.value('bridge_sessions_started_total', { bridge: 'a' }), before.value('bridge_sessions_started_total', { bridge: 'b' })]).toEqual([1, 1]);

      const tooLarge = { body: Buffer.alloc(2 * 1024 * 1024, 0x62), headers: { device: 'd1', kind: 'too-large' } };
      const many: Record<string, string> = {};
      for (let i = 0; i < 6000; i++) many[`p-${i}`] = 'v'.repeat(100);
      const manyProperties = { body: 'props-body', headers: many };
      await Promise.all([
        publishMqtt(peer, p.topicA, [...numbered('a', 0, 250), tooLarge, ...numbered('a', 250, 250), manyProperties]),
        publishMqtt(peer, p.topicB, numbered('b', 0, 500)),
      ]);

      await fx.amqp.waitForCount(targetA!, (n) => n >= 500, 60_000);
      await fx.amqp.waitForCount(targetB!, (n) => n >= 500, 60_000);
      await fx.amqp.waitForCount(deadLetterA!, (n) => n >= 2, 30_000);
      await fx.amqp.settledCount(deadLetterA!, 1500);
      const [a, b, dead] = [await fx.amqp.drain(targetA!), await fx.amqp.drain(targetB!), await fx.amqp.drain(deadLetterA!)];
      expect(new Set(a.map((m) => m.body.toString()))).toEqual(new Set(numbered('a', 0, 500).map((m) => m.body)));
      expect(a).toHaveLength(500);
      expect(b.map((m) => m.body.toString()).sort()).toEqual(numbered('b', 0, 500).map((m) => m.body).sort());

      // Each bad message once (no loop of redeliveries), with its reason, what was dropped and its size.
      expect(dead).toHaveLength(2);
      const body = dead.find((m) => m.headers[DROPPED] === 'body')!;
      expect(body.headers[REASON]).toBe('too-large');
      expect(body.headers.device).toBe('d1');
      expect(body.body.length).toBe(0);
      expect(Number(body.headers[SIZE])).toBeGreaterThan(2 * 1024 * 1024);
      const headers = dead.find((m) => m.headers[DROPPED] === 'headers')!;
      expect(headers.headers[REASON]).toBe('too-large');
      expect(headers.body.toString()).toBe('props-body');
      expect(headers.headers['p-0']).toBeUndefined();

      const after = await metricsOf(bridge);
      expect([after.value('bridge_sessions_started_total', { bridge: 'a' }), after.value('bridge_sessions_started_total', { bridge: 'b' })]).toEqual([1, 1]);
      expect(after.value('bridge_messages_dead_lettered_total', { bridge: 'a', reason: 'too-large' })).toBe(2);
      expect(bridge.logs.filter((l) => /closing the connection|the broker closed the connection/.test(l.msg))).toEqual([]);
      await fx.stopAll();
      // Every PUBACK was written: A's persistent session holds nothing to send again.
      expect(await readMqtt(peer, `${p.clientId}-a-source`, { quietMs: 500 })).toEqual([]);
    } finally {
      await fx.stopAll();
      await dropSession(peer, `${p.clientId}-a-source`);
      await dropSession(peer, `${p.clientId}-b-source`);
    }
  }, 180_000);

  it("200,000 QoS 0 messages of 1 KiB to A while A's target is full: dropped over A's prefetch and counted, B forwards its 500, peak RSS under 300 MiB", async () => {
    const FLOOD = 200_000;
    const PREFETCH = 500;
    const [targetA, deadLetterA, targetB] = await fx.queues('blast-mqtt-full', 'blast-mqtt-full-dl', 'blast-mqtt-b2');
    // A's target is full by design: at most 10 messages, further publishes refused (basic.nack: "target full").
    const conn = await amqp.connect(services.amqpUrl);
    const ch = await conn.createChannel();
    await ch.deleteQueue(targetA!);
    await ch.assertQueue(targetA, { durable: true, arguments: { 'x-max-length': 10, 'x-overflow': 'reject-publish' } });
    await conn.close();
    const p = pair({ targetA: targetA!, deadLetterA: deadLetterA!, targetB: targetB!, maxPacketSize: 64 * 1024 * 1024, prefetchA: PREFETCH });
    const bridge = await fx.start(p.yaml, 2);
    try {
      const started = Date.now();
      const flooding = flood(p.topicA, FLOOD);
      await publishMqtt(peer, p.topicB, numbered('b', 0, 500));
      await flooding;
      const floodMs = Date.now() - started;

      await fx.amqp.waitForCount(targetB!, (n) => n >= 500, 60_000);
      // Every flood message is accounted for: dropped over the bound, forwarded (10, then full), or held in flight.
      const m = await untilValue(
        'every flood message dropped, forwarded or in flight',
        () => metricsOf(bridge),
        (x) =>
          x.value('bridge_messages_dropped_total', { bridge: 'a', reason: 'qos0-overflow' }) +
            x.value('bridge_messages_forwarded_total', { bridge: 'a' }) +
            x.value('bridge_in_flight_messages', { bridge: 'a' }) ===
          FLOOD,
        { timeoutMs: 60_000, everyMs: 500 },
      );
      const dropped = m.value('bridge_messages_dropped_total', { bridge: 'a', reason: 'qos0-overflow' });
      const inFlight = m.value('bridge_in_flight_messages', { bridge: 'a' });
      const rss = peakRssMiB(bridge.child.pid!);
      const b = await fx.amqp.drain(targetB!);
      console.log(JSON.stringify({ flood: FLOOD, floodMs, dropped, forwardedA: m.value('bridge_messages_forwarded_total', { bridge: 'a' }), inFlightA: inFlight, forwardedB: b.length, peakRssMiB: Math.round(rss) }));
      expect(inFlight).toBeLessThanOrEqual(PREFETCH);
      expect(dropped).toBeGreaterThanOrEqual(FLOOD - PREFETCH - 10);
      expect(b.map((x) => x.body.toString()).sort()).toEqual(numbered('b', 0, 500).map((x) => x.body).sort());
      expect([m.value('bridge_sessions_started_total', { bridge: 'a' }), m.value('bridge_sessions_started_total', { bridge: 'b' })]).toEqual([1, 1]);
      // One log line per interval about the drops, not one per message.
      const lines = bridge.logs.filter((l) => /QoS 0 message\(s\) dropped/.test(l.msg)).length;
      expect(lines).toBeGreaterThanOrEqual(1);
      expect(lines).toBeLessThanOrEqual(Math.ceil(floodMs / 10_000) + 2);
      expect(rss).toBeLessThan(300);
    } finally {
      await fx.stopAll();
      await dropSession(peer, `${p.clientId}-a-source`);
      await dropSession(peer, `${p.clientId}-b-source`);
    }
  }, 240_000);
});

/** Publishes `count` QoS 0 messages of 1 KiB to `topic` as fast as the connection takes them (bounded: 120 s). */
async function flood(topic: string, count: number): Promise<void> {
  const client = await mqtt.connectAsync(mosquitto.url, { protocolVersion: 5, clientId: uniqueClientId('bbflood'), reconnectPeriod: 0 }, false);
  client.on('error', () => undefined);
  const payload = Buffer.alloc(1024, 0x66);
  const deadline = Date.now() + 120_000;
  try {
    for (let i = 0; i < count && Date.now() < deadline; i += 1000) {
      const n = Math.min(1000, count - i);
      for (let j = 0; j < n - 1; j++) client.publish(topic, payload, { qos: 0 });
      // The last of each thousand waits until MQTT.js handed it to the socket: the publisher's memory stays small.
      await new Promise<void>((resolve) => client.publish(topic, payload, { qos: 0 }, () => resolve()));
    }
  } finally {
    await client.endAsync();
  }
}
