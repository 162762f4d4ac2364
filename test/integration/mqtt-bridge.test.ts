/**
 * The bridge end to end with MQTT on one side or both: the real `broker-bridge run` process between Mosquitto (MQTT 5
 * and 3.1.1), RabbitMQ and ActiveMQ, the duplicate-ID cache in the real Redis. Every test asserts what arrived where:
 * which bodies, how many, under which IDs, with which headers.
 *
 * - the device loop: QoS 1 messages published to Mosquitto while the bridge is stopped wait in its persistent
 *   session, and all of them reach RabbitMQ once the bridge starts, each once;
 * - round trips AMQP → MQTT → AMQP and STOMP → MQTT → STOMP keep headers and body bytes;
 * - a templated MQTT topic takes no '/', '+' or '#' from a value;
 * - an MQTT 3.1.1 source (no headers: every message stamped) SIGKILLed mid-stream loses nothing, and what it
 *   forwards again carries its first ID.
 */
import { describe, expect, it } from 'vitest';
import type { ReceivedMessage } from '../support/amqp.js';
import { useBridgeFixture } from '../support/bridge-fixture.js';
import { services, uniqueName } from '../support/services.js';
import { pathName, secondName } from '../support/configs.js';
import { publishStomp, readStomp } from '../support/stomp.js';
import { MOSQUITTO_4, MOSQUITTO_5, dropSession, prepareQueue, publishMqtt, readMqtt, uniqueClientId, uniqueTopic, type MqttPeer } from '../support/mqtt.js';
import { text } from '../support/text.js';
import { quietAfterCrash } from '../support/wait.js';

const ID = '_AMQ_DUPL_ID';
const POSSIBLE_DUP = 'x-bridge-possible-duplicate';
const fx = useBridgeFixture();

/** A bridges.yaml with RabbitMQ, ActiveMQ's STOMP and Mosquitto (5 and 3.1.1) connections; its Redis keys go after the file. */
function yaml(bridges: string[], opts: { mosquittoUrl?: string; top?: string[] } = {}): string {
  const { keyPrefix } = fx.config({ bridges: [] });
  const url = opts.mosquittoUrl ?? services.mosquittoUrl;
  return [
    'log-level: info',
    'shutdown-timeout: 10000',
    ...(opts.top ?? []),
    'connections:',
    `  rabbit: { type: amqp, url: "${services.amqpUrl}" }`,
    `  activemq: { type: stomp, url: "${services.stompUrl}" }`,
    // The same brokers under second names: a round trip back to the name a message came from is a loop (docs/delivery.md#loops).
    `  rabbitalias: { type: amqp, url: "${secondName(services.amqpUrl)}" }`,
    `  activemqalias: { type: stomp, url: "${secondName(services.stompUrl)}" }`,
    `  mosquitto: { type: mqtt, url: "${url}", client-id: "${uniqueClientId('bb')}" }`,
    `  mosquitto4: { type: mqtt, url: "${url}", protocol-version: 4, client-id: "${uniqueClientId('bb')}" }`,
    'id-cache:',
    `  redis-url: "${services.redisUrl}"`,
    `  key-prefix: "${keyPrefix}"`,
    'bridges:',
    ...bridges,
    '',
  ].join('\n');
}

/** The persistent sessions a bridge made on Mosquitto (its sources'), ended after each test that made them. */
async function endSessions(config: string): Promise<void> {
  for (const m of config.matchAll(/(mosquitto4?): \{ type: mqtt, url: "[^"]*"(?:, protocol-version: 4)?, client-id: "([^"]+)" \}/g)) {
    const peer: MqttPeer = m[1] === 'mosquitto4' ? MOSQUITTO_4 : MOSQUITTO_5;
    for (const b of config.matchAll(/- name: (\S+)\n\s+source: \{ connection: (mosquitto4?),/g)) {
      if (b[2] === m[1]) await dropSession(peer, `${m[2]}-${b[1]}-source`).catch(() => undefined);
    }
  }
}

function headerText(v: unknown): string {
  return text(v);
}

describe('the device loop', () => {
  it('1,000 QoS 1 messages published to Mosquitto while the bridge is stopped all reach RabbitMQ once it starts, each once', async () => {
    const target = await fx.queue('mqtt-devices-out');
    const topic = uniqueTopic('devices');
    const config = yaml([
      '  - name: devices-to-rabbit',
      `    source: { connection: mosquitto, topic: "${topic}/+/temp" }`,
      `    target: { connection: rabbit, queue: "${target}" }`,
      '    prefetch: 200',
    ]);
    try {
      // The first start creates the bridge's persistent session (and its subscription); then the bridge is stopped.
      const first = await fx.start(config);
      await first.stop();
      const devices = 10;
      const total = 1000;
      await Promise.all(
        Array.from({ length: devices }, (_, d) =>
          publishMqtt(
            MOSQUITTO_5,
            `${topic}/device-${d}/temp`,
            Array.from({ length: total / devices }, (_, i) => ({ body: `device-${d} reading ${i}`, headers: { unit: 'C' } })),
          ),
        ),
      );
      expect(await fx.amqp.count(target)).toBe(0);
      await fx.start(config);
      await fx.amqp.waitForCount(target, (n) => n >= total, 60_000);
      await fx.amqp.settledCount(target, 1500);
      const got = await fx.amqp.drain(target);
      const bodies = got.map((m) => m.body.toString());
      expect(got).toHaveLength(total);
      expect(new Set(bodies).size).toBe(total);
      for (let d = 0; d < devices; d++) {
        for (let i = 0; i < total / devices; i++) expect(bodies).toContain(`device-${d} reading ${i}`);
      }
      // Stamped (the devices set no ID), one ID each, none flagged, the device's user property carried.
      const ids = got.map((m) => headerText(m.headers[ID]));
      expect(new Set(ids).size).toBe(total);
      expect(ids.every((id) => id.startsWith('bb-'))).toBe(true);
      expect(got.filter((m) => m.headers[POSSIBLE_DUP] !== undefined)).toEqual([]);
      expect(got.every((m) => m.headers.unit === 'C')).toBe(true);
    } finally {
      await fx.stopAll();
      await endSessions(config);
    }
  });
});

describe('round trips through MQTT 5 keep headers and body bytes', () => {
  it('AMQP → MQTT → AMQP', async () => {
    const [input, output] = (await fx.queues('rt-in', 'rt-out')) as [string, string];
    const topic = uniqueTopic('rt');
    const config = yaml([
      '  - name: rt-out',
      `    source: { connection: rabbit, queue: "${input}" }`,
      `    target: { connection: mosquitto, topic: "${topic}" }`,
      '  - name: rt-back',
      `    source: { connection: mosquitto, topic: "${topic}" }`,
      `    target: { connection: rabbitalias, queue: "${output}" }`,
    ]);
    try {
      await fx.start(config, 2);
      const binary = Buffer.from([0, 1, 2, 0xff, 0xfe, 0, 10, 13]);
      await fx.amqp.publish(input, [
        {
          body: binary,
          options: {
            contentType: 'application/octet-stream',
            contentEncoding: 'gzip',
            correlationId: 'corr-7',
            replyTo: 'replies',
            messageId: 'm-1',
            type: 'reading',
            appId: 'sensor-hub',
            priority: 3,
            timestamp: 1_700_000_000,
            headers: { device: 'd-1', count: 7, ok: true, traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01', [ID]: 'rt-id-1' },
          },
        },
        { body: Buffer.from('{"t":21.5}'), options: { contentType: 'application/json', headers: { device: 'd-2' } } },
      ]);
      await fx.amqp.waitForCount(output, (n) => n >= 2, 30_000);
      const got = await fx.amqp.drain(output);
      expect(got).toHaveLength(2);
      const [first, second] = got as [ReceivedMessage, ReceivedMessage];
      expect(first.body.equals(binary)).toBe(true);
      expect(first.properties).toMatchObject({
        contentType: 'application/octet-stream',
        contentEncoding: 'gzip',
        correlationId: 'corr-7',
        replyTo: 'replies',
        messageId: 'm-1',
        type: 'reading',
        appId: 'sensor-hub',
        priority: 3,
        timestamp: 1_700_000_000,
        deliveryMode: 2,
      });
      // MQTT user properties are text: typed AMQP values come back as their text, as through STOMP.
      // The loop path travels through MQTT 5 as a user property: RabbitMQ, Mosquitto, RabbitMQ's second name.
      const path = `${pathName(services.amqpUrl)},${pathName(services.mosquittoUrl)},${pathName(secondName(services.amqpUrl))}`;
      expect(first.headers).toEqual({ device: 'd-1', count: '7', ok: 'true', traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01', [ID]: 'rt-id-1', 'x-bridge-path': path });
      expect(second.body.toString()).toBe('{"t":21.5}');
      expect(second.properties.contentType).toBe('application/json');
      // Stamped by the first bridge; the second reads that ID from the user property and forwards it unchanged.
      expect(Object.keys(second.headers).sort()).toEqual([ID, 'device', 'x-bridge-path']);
      expect(headerText(second.headers[ID])).toMatch(/^bb-/);
    } finally {
      await fx.stopAll();
      await endSessions(config);
    }
  });

  it('STOMP → MQTT → STOMP (ActiveMQ)', async () => {
    const [input, output] = [uniqueName('rt-stomp-in'), uniqueName('rt-stomp-out')];
    const topic = uniqueTopic('rt-stomp');
    const config = yaml([
      '  - name: rts-out',
      `    source: { connection: activemq, queue: "${input}" }`,
      `    target: { connection: mosquitto, topic: "${topic}" }`,
      '  - name: rts-back',
      `    source: { connection: mosquitto, topic: "${topic}" }`,
      `    target: { connection: activemqalias, queue: "${output}" }`,
    ]);
    try {
      await fx.start(config, 2);
      const binary = Buffer.from([0, 1, 2, 0xff, 0, 10]);
      await publishStomp(input, [
        { body: binary, headers: { 'content-type': 'application/octet-stream', 'content-length': String(binary.length), 'x-site': 'plant 4', [ID]: 'rts-1' } },
        { body: 'grüße', headers: { 'content-type': 'text/plain; charset=utf-8', 'correlation-id': 'c-2', 'x-site': 'plant 5' } },
      ]);
      const got = await readStomp(output, { atLeast: 2, quietMs: 1000, timeoutMs: 30_000 });
      expect(got).toHaveLength(2);
      const [a, b] = got;
      expect(a!.body.equals(binary)).toBe(true);
      expect(a!.headers).toMatchObject({ 'content-type': 'application/octet-stream', 'x-site': 'plant 4', [ID]: 'rts-1' });
      expect(b!.body.toString('utf8')).toBe('grüße');
      expect(b!.headers).toMatchObject({ 'content-type': 'text/plain; charset=utf-8', 'correlation-id': 'c-2', 'x-site': 'plant 5' });
      expect(b!.headers[ID]).toMatch(/^ID:|^bb-/);
    } finally {
      await fx.stopAll();
      await endSessions(config);
    }
  });
});

describe('a templated MQTT topic', () => {
  it("takes each message's header as one topic level; a value with '/', '+' or '#' is dead-lettered, never published elsewhere", async () => {
    const [input, dead] = (await fx.queues('tpl-in', 'tpl-dead')) as [string, string];
    const base = uniqueTopic('tpl');
    const readers = ['d1', 'd2', 'a', 'x'].map((d) => ({ d, id: uniqueClientId('bbr') }));
    for (const r of readers) await prepareQueue(MOSQUITTO_5, `${base}/${r.d}/#`, r.id);
    const config = yaml([
      '  - name: tpl',
      `    source: { connection: rabbit, queue: "${input}" }`,
      `    target: { connection: mosquitto, topic: "${base}/\${header.device}/events" }`,
      `    dead-letter: { connection: rabbit, queue: "${dead}" }`,
    ]);
    try {
      await fx.start(config);
      const sent = ['d1', 'd2', 'a/b', 'x+', 'x#', 'd1'];
      await fx.amqp.publish(input, sent.map((device, i) => ({ body: Buffer.from(`m${i}`), options: { headers: { device } } })));
      await fx.amqp.waitForCount(dead, (n) => n >= 3, 30_000);
      const deadLettered = await fx.amqp.drain(dead);
      expect(deadLettered.map((m) => m.body.toString()).sort()).toEqual(['m2', 'm3', 'm4']);
      expect(deadLettered.map((m) => m.headers['x-bridge-dead-letter-reason'])).toEqual(['unsafe-address', 'unsafe-address', 'unsafe-address']);
      const read = async (d: string) => (await readMqtt(MOSQUITTO_5, readers.find((r) => r.d === d)!.id, { quietMs: 500 })).map((m) => [m.topic, m.body.toString()]);
      expect(await read('d1')).toEqual([
        [`${base}/d1/events`, 'm0'],
        [`${base}/d1/events`, 'm5'],
      ]);
      expect(await read('d2')).toEqual([[`${base}/d2/events`, 'm1']]);
      // Nothing reached a/b/events or a level of its own under a or x.
      expect(await read('a')).toEqual([]);
      expect(await read('x')).toEqual([]);
    } finally {
      await fx.stopAll();
      for (const r of readers) await dropSession(MOSQUITTO_5, r.id).catch(() => undefined);
    }
  });
});

describe('an MQTT 3.1.1 source (no headers: every message stamped)', () => {
  it('SIGKILLed mid-stream: nothing lost, a message forwarded again carries its first ID (the redelivery claims its stamp)', async () => {
    const target = await fx.queue('mqtt4-kill-out');
    const topic = uniqueTopic('kill');
    const config = yaml([
      '  - name: kill4',
      `    source: { connection: mosquitto4, topic: "${topic}" }`,
      `    target: { connection: rabbit, queue: "${target}" }`,
    ], { top: [] }).replace('key-prefix', 'reservation-lease: 3000\n  key-prefix');
    try {
      const first = await fx.start(config);
      await first.stop();
      const total = 600;
      await publishMqtt(MOSQUITTO_4, topic, Array.from({ length: total }, (_, i) => ({ body: `k${i}` })));
      const running = await fx.start(config);
      await fx.amqp.waitForCount(target, (n) => n >= 100, 30_000);
      await running.kill('SIGKILL');
      await fx.start(config);
      await fx.amqp.waitForCount(target, (n) => n >= total, 60_000);
      await fx.amqp.settledCount(target, quietAfterCrash(3000));
      const got = await fx.amqp.drain(target);
      const byBody = new Map<string, { id: string; flagged: boolean }[]>();
      for (const m of got) {
        const b = m.body.toString();
        byBody.set(b, [...(byBody.get(b) ?? []), { id: headerText(m.headers[ID]), flagged: m.headers[POSSIBLE_DUP] === true }]);
      }
      const missing = Array.from({ length: total }, (_, i) => `k${i}`).filter((b) => !byBody.has(b));
      expect(missing, 'lost').toEqual([]);
      const twoIds = [...byBody.entries()].filter(([, copies]) => new Set(copies.map((c) => c.id)).size > 1);
      expect(twoIds, 'a message under two IDs').toEqual([]);
      const unflagged = [...byBody.entries()].filter(([, copies]) => copies.filter((c) => c.flagged).length < copies.length - 1);
      expect(unflagged, 'an extra copy not flagged').toEqual([]);
    } finally {
      await fx.stopAll();
      await endSessions(config);
    }
  });
});
