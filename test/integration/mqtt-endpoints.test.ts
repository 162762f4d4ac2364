/**
 * The MQTT adapters against each real MQTT peer (test/support/mqtt.ts): Mosquitto with an MQTT 5 and with an MQTT
 * 3.1.1 connection, RabbitMQ's MQTT plugin and ActiveMQ's MQTT transport (both 3.1.1). What every endpoint promises is
 * test/support/endpoint-contract.ts, run here against each peer; this file keeps what is MQTT's own: PUBACKs held until
 * the ack and written in arrival order with a window in flight, the receive maximum, retained messages, shared
 * subscriptions, the version found at connect, the PUBACK reason codes, the bounded read. Every topic and client id is
 * the test's own; every persistent session a test made is ended after the file.
 */
import net from 'node:net';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { BridgeMessage, SourceDelivery } from '../../src/core/message.js';
import { ConfigError, MessageRejectedError, TransientError } from '../../src/shared/errors.js';
import { MqttSource, type MqttSourceSettings } from '../../src/endpoints/mqtt/mqtt-source.js';
import { MqttTarget } from '../../src/endpoints/mqtt/mqtt-target.js';
import { connectMqtt } from '../../src/endpoints/mqtt/mqtt-connect.js';
import { silentLogger as log } from '../../src/shared/log.js';
import { endpointContract } from '../support/endpoint-contract.js';
import {
  ACTIVEMQ_MQTT,
  MOSQUITTO_4,
  MOSQUITTO_5,
  MQTT_PEERS,
  RABBITMQ_MQTT,
  bodies,
  dropSession,
  mqttConnection,
  prepareQueue,
  publishMqtt,
  readMqtt,
  uniqueClientId,
  uniqueTopic,
  type MqttPeer,
} from '../support/mqtt.js';
import { sleep, until } from '../support/wait.js';
import { TcpProxy } from '../support/tcp-proxy.js';

/** Persistent sessions made by this file, ended after it: [peer, client id]. */
const sessions: [MqttPeer, string][] = [];
/** Endpoints the tests opened, closed after each test even when it failed. */
const endpoints: { close(): Promise<void> }[] = [];

afterEach(async () => {
  await Promise.all(endpoints.splice(0).map((e) => e.close()));
});

afterAll(async () => {
  for (const [peer, id] of sessions) await dropSession(peer, id).catch(() => undefined);
});

/** A "queue": a topic and the persistent session subscribed to it (test/support/mqtt.ts). */
const readers = new Map<string, string>();

async function queueOn(peer: MqttPeer, prefix: string): Promise<string> {
  const topic = uniqueTopic(prefix);
  const reader = uniqueClientId('bbq');
  await prepareQueue(peer, topic, reader);
  sessions.push([peer, reader]);
  readers.set(topic, reader);
  return topic;
}

function sourceOn(peer: MqttPeer, topic: string, o: { url?: string; prefetch?: number; settings?: Partial<MqttSourceSettings> } = {}): MqttSource {
  const s = new MqttSource(
    mqttConnection(peer, o.url ?? peer.url),
    { topic, clientId: readers.get(topic) ?? uniqueClientId('bbs'), forwardRetained: false, topicSeparator: '/', prefetch: o.prefetch ?? 100, ...o.settings },
    log,
  );
  endpoints.push(s);
  return s;
}

function targetOn(
  peer: MqttPeer,
  topic: string,
  o: { url?: string; confirmTimeout?: number; noSubscribers?: 'refuse' | 'accept'; retain?: boolean; maxPacketSize?: number } = {},
): MqttTarget {
  const t = new MqttTarget(
    mqttConnection(peer, o.url ?? peer.url, o.maxPacketSize !== undefined ? { maxPacketSize: o.maxPacketSize } : {}),
    { topic, clientId: uniqueClientId('bbt'), retain: o.retain ?? false, noSubscribers: o.noSubscribers ?? 'refuse', duplicateIdHeader: '_AMQ_DUPL_ID' },
    o.confirmTimeout ?? 15_000,
    log,
  );
  endpoints.push(t);
  return t;
}

function message(body: string, headers: Record<string, string> = {}): BridgeMessage {
  return { body: Buffer.from(body), properties: { persistent: true }, headers };
}

function collect(source: MqttSource): { deliveries: SourceDelivery[]; lost: TransientError[]; opened: Promise<void> } {
  const deliveries: SourceDelivery[] = [];
  const lost: TransientError[] = [];
  const opened = source.open({ onDelivery: (d) => deliveries.push(d), onLost: (e) => lost.push(e) });
  return { deliveries, lost, opened };
}

describe.each(MQTT_PEERS)('MQTT peer $name', (peer) => {
  endpointContract(`MQTT (${peer.name})`, () => ({
    url: peer.url,
    carriesHeaders: peer.version === 5,
    ...(peer.window !== undefined ? { window: peer.window } : {}),
    pipelined: Math.min(2000, peer.queueLimit),
    queue: () => queueOn(peer, 'contract'),
    source: (queue, o = {}) => sourceOn(peer, queue, { ...(o.url !== undefined ? { url: o.url } : {}), ...(o.prefetch !== undefined ? { prefetch: o.prefetch } : {}) }),
    target: (queue, o = {}) => targetOn(peer, queue, { ...(o.url !== undefined ? { url: o.url } : {}), ...(o.confirmTimeout !== undefined ? { confirmTimeout: o.confirmTimeout } : {}) }),
    publish: (queue, messages) => publishMqtt(peer, queue, messages.map((m) => ({ body: m.body, headers: m.headers }))),
    take: async (queue, atLeast) =>
      (await readMqtt(peer, readers.get(queue)!, { atLeast, quietMs: 500, timeoutMs: 30_000 })).map((m) => ({
        body: m.body.toString(),
        headers: Object.fromEntries(Object.entries(m.headers).map(([k, v]) => [k, String(v)])),
      })),
    refusal: async () => {
      // MQTT 3.1.1 has no way to refuse one message (its PUBACK says only "taken"), and Mosquitto 5 refuses none we can
      // provoke per message: the target refuses what is larger than its connection's max-packet-size before writing it.
      const queue = await queueOn(peer, 'contract-refusal');
      const target = targetOn(peer, queue, { maxPacketSize: 1024 });
      const refused = (m: BridgeMessage): BridgeMessage => ({ ...m, body: Buffer.alloc(2048, 0x72) });
      return { queue, target, accepted: (m) => m, refused, reason: 'too-large' };
    },
  }));
});

describe('MqttSource (Mosquitto, MQTT 5)', () => {
  it('holds each PUBACK until its ack and writes them in arrival order, with the receive maximum in flight', async () => {
    const peer = MOSQUITTO_5;
    const topic = await queueOn(peer, 'window');
    await publishMqtt(peer, topic, Array.from({ length: 60 }, (_, i) => ({ body: `w${i}` })));
    const first = sourceOn(peer, topic, { prefetch: 50 });
    const a = collect(first);
    await a.opened;
    await until('50 deliveries', () => a.deliveries.length === 50);
    // No PUBACK went out: the broker keeps the other 10 back (the receive maximum announced is 50).
    await sleep(500);
    expect(a.deliveries).toHaveLength(50);
    // Every ack but the first one's: none can be written (the first PUBLISH is owed its PUBACK first).
    for (const d of a.deliveries.slice(1)) first.ack(d);
    const barrier = first.ackBarrier().then(() => 'resolved');
    await sleep(500);
    expect(a.deliveries).toHaveLength(50);
    expect(await Promise.race([barrier, sleep(50).then(() => 'pending')])).toBe('pending');
    // The first ack releases all 50 PUBACKs: the barrier resolves and the broker sends the other 10.
    first.ack(a.deliveries[0]!);
    expect(await barrier).toBe('resolved');
    await until('60 deliveries', () => a.deliveries.length === 60);
    expect(bodies(a.deliveries.map((d) => d.message))).toEqual(Array.from({ length: 60 }, (_, i) => `w${i}`));
    // The last 10, acked in reverse order, then the session closed before… nothing: all were PUBACKed.
    for (const d of a.deliveries.slice(50).reverse()) first.ack(d);
    await first.ackBarrier();
    await first.close();
    expect(await readMqtt(peer, readers.get(topic)!, { quietMs: 500 })).toEqual([]);
  });

  it('an ack held back behind an unacked delivery is not taken as done: after close both come back, flagged', async () => {
    const peer = MOSQUITTO_5;
    const topic = await queueOn(peer, 'held');
    await publishMqtt(peer, topic, ['h0', 'h1', 'h2'].map((body) => ({ body })));
    const first = sourceOn(peer, topic);
    const a = collect(first);
    await a.opened;
    await until('3 deliveries', () => a.deliveries.length === 3);
    first.ack(a.deliveries[0]!);
    first.ack(a.deliveries[2]!);
    await sleep(300);
    await first.close();
    const again = sourceOn(peer, topic);
    const b = collect(again);
    await b.opened;
    await until('2 redeliveries', () => b.deliveries.length === 2);
    await sleep(300);
    expect(b.deliveries.map((d) => [d.message.body.toString(), d.redelivered])).toEqual([
      ['h1', true],
      ['h2', true],
    ]);
    for (const d of b.deliveries) again.ack(d);
    await again.ackBarrier();
  });

  it('carries the MQTT 5 properties and user properties to the neutral message and back, the body byte for byte', async () => {
    const peer = MOSQUITTO_5;
    const topic = await queueOn(peer, 'props');
    const target = targetOn(peer, topic);
    await target.open({ onLost: () => undefined });
    const binary = Buffer.from([0, 1, 2, 0xff, 0xfe, 10, 13, 0]);
    const expiresAt = Date.now() + 3_600_000;
    await target.send({
      body: binary,
      properties: {
        persistent: true,
        contentType: 'application/octet-stream',
        correlationId: 'corr-1',
        replyTo: 'replies/one',
        messageId: 'publisher-id-1',
        type: 'order.created',
        userId: 'alice',
        appId: 'shop',
        priority: 6,
        timestamp: 1_700_000_000_123,
        expiresAt,
      },
      // `ctl`: a control character, which Mosquitto closes the connection on: left out, the rest goes.
      headers: { s: 'a:b c', n: 42, b: true, tbl: { x: [1, 2] }, rep: ['one', 'two'], _AMQ_DUPL_ID: 'dup-1', ctl: 'a\nb' },
    });
    // Non-UTF-8 correlation data, as a device sends it: it comes through as hex and goes out again as the same bytes.
    await publishMqtt(peer, topic, [{ body: 'raw', properties: { correlationData: Buffer.from([0xc3, 0x28]), payloadFormatIndicator: true } }]);
    const source = sourceOn(peer, topic);
    const got = collect(source);
    await got.opened;
    await until('2 deliveries', () => got.deliveries.length === 2);
    const [d1, d2] = got.deliveries as [SourceDelivery, SourceDelivery];
    expect(d1.message.body.equals(binary)).toBe(true);
    const { expiresAt: arrivedExpiry, ...props } = d1.message.properties;
    expect(props).toEqual({
      persistent: true,
      topic,
      contentType: 'application/octet-stream',
      correlationId: 'corr-1',
      replyTo: 'replies/one',
      messageId: 'publisher-id-1',
      type: 'order.created',
      userId: 'alice',
      appId: 'shop',
      priority: 6,
      timestamp: 1_700_000_000_123,
    });
    // The expiry travels in whole seconds, counted down by the broker.
    expect(Math.abs(arrivedExpiry! - expiresAt)).toBeLessThan(3000);
    expect(d1.message.headers).toEqual({ s: 'a:b c', n: '42', b: 'true', tbl: '{"x":[1,2]}', rep: ['one', 'two'], _AMQ_DUPL_ID: 'dup-1' });
    expect(d2.message.headers).toEqual({ 'x-mqtt-correlation-data': 'c328', 'x-mqtt-payload-format-indicator': '1' });
    for (const d of got.deliveries) source.ack(d);
    await source.ackBarrier();
    await source.close();

    // Back out: the correlation data as the device's bytes, the payload format indicator as it said.
    const out = await queueOn(peer, 'props-out');
    const back = targetOn(peer, out);
    await back.open({ onLost: () => undefined });
    await back.send(d2.message);
    const [read] = await readMqtt(peer, readers.get(out)!, { atLeast: 1, quietMs: 300 });
    expect(read!.properties.correlationData).toEqual(Buffer.from([0xc3, 0x28]));
    expect(read!.properties.payloadFormatIndicator).toBe(true);
    expect(read!.headers).toEqual({});
  });

  it('shares a shared subscription between two sources with client ids of their own: each message to one of them, both keyed by the group address', async () => {
    const peer = MOSQUITTO_5;
    const topic = uniqueTopic('shared');
    const group = uniqueClientId('grp');
    const make = () => {
      const clientId = uniqueClientId('bbshare');
      sessions.push([peer, clientId]);
      return sourceOn(peer, topic, { settings: { clientId, sharedGroup: group } });
    };
    const [s1, s2] = [make(), make()];
    const [c1, c2] = [collect(s1), collect(s2)];
    await Promise.all([c1.opened, c2.opened]);
    for (const s of [s1, s2]) expect(s.address).toBe(`mqtt://127.0.0.1:1883/${encodeURIComponent(`$share/${group}`)}/${encodeURIComponent(topic)}`);
    await publishMqtt(peer, topic, Array.from({ length: 100 }, (_, i) => ({ body: `s${i}` })));
    await until('100 deliveries between the two', () => c1.deliveries.length + c2.deliveries.length === 100);
    await sleep(300);
    const all = [...c1.deliveries, ...c2.deliveries].map((d) => d.message.body.toString()).sort();
    expect(all).toEqual(Array.from({ length: 100 }, (_, i) => `s${i}`).sort());
    expect(c1.deliveries.length).toBeGreaterThan(0);
    expect(c2.deliveries.length).toBeGreaterThan(0);
    for (const [s, c] of [[s1, c1], [s2, c2]] as const) {
      for (const d of c.deliveries) s.ack(d);
      await s.ackBarrier();
    }
  });

  it('a second client with the same client id takes the session over: the first is lost, with a sentence naming the client id', async () => {
    const peer = MOSQUITTO_5;
    const topic = await queueOn(peer, 'takeover');
    const first = sourceOn(peer, topic);
    expect(first.connectionName).toBeUndefined();
    const a = collect(first);
    await a.opened;
    // Its connection goes by its client ID at the broker: GET /bridges and the page name it so (null before).
    expect(first.connectionName).toBe(readers.get(topic));
    const second = sourceOn(peer, topic);
    await collect(second).opened;
    await until('the first lost its session', () => a.lost.length === 1);
    expect(first.connectionName).toBeUndefined();
    // Mosquitto 2.0 closes the older connection without a DISCONNECT (MQTT 5 allows 0x8e "session taken over").
    expect(a.lost[0]!.message).toContain(`the broker closed the connection (a broker also does this when another client connects with client id '${readers.get(topic)!}')`);
  });

  it('reads no body over max-packet-size: the message is handed on as unreadable, its PUBACK ends it, and the next one follows', async () => {
    const peer = MOSQUITTO_5;
    const topic = await queueOn(peer, 'too-big');
    await publishMqtt(peer, topic, [{ body: Buffer.alloc(4096, 0x61), headers: { device: 'd1' } }, { body: Buffer.from('next') }]);
    const source = new MqttSource(
      mqttConnection(peer, peer.url, { maxPacketSize: 1024 }),
      { topic, clientId: readers.get(topic)!, forwardRetained: false, topicSeparator: '/', prefetch: 10 },
      log,
    );
    endpoints.push(source);
    const c = collect(source);
    await c.opened;
    await until('both delivered', () => c.deliveries.length === 2);
    const [big, next] = c.deliveries as [SourceDelivery, SourceDelivery];
    expect(big.unreadable).toMatchObject({ reason: 'too-large', dropped: 'body' });
    expect(big.unreadable!.detail).toMatch(/delivered a PUBLISH of \d+ bytes, over max-packet-size 1024; its payload was skipped/);
    expect(big.message.body.length).toBe(0);
    expect(big.message.headers).toMatchObject({ device: 'd1' });
    expect(next.message.body.toString()).toBe('next');
    expect(next.unreadable).toBeUndefined();
    source.ack(big);
    source.ack(next);
    await source.ackBarrier();
    expect(c.lost).toEqual([]);
    await source.close();
    expect(await readMqtt(peer, readers.get(topic)!, { quietMs: 300 })).toEqual([]);
  });

  it('a broker that stops answering is found by the keep-alive, not left hanging', async () => {
    const peer = MOSQUITTO_5;
    const topic = await queueOn(peer, 'keepalive');
    const proxy = await TcpProxy.forUrl(peer.url).start();
    try {
      const source = new MqttSource(
        mqttConnection(peer, proxy.rewrite(peer.url), { keepalive: 1 }),
        { topic, clientId: readers.get(topic)!, forwardRetained: false, topicSeparator: '/', prefetch: 10 },
        log,
      );
      endpoints.push(source);
      const c = collect(source);
      await c.opened;
      proxy.stall();
      const stalled = Date.now();
      await until('the loss', () => c.lost.length === 1, { timeoutMs: 10_000 });
      expect(c.lost[0]!.message).toMatch(/no packet from the broker for \d+ s \(keep-alive 1 s\)/);
      expect(Date.now() - stalled).toBeGreaterThanOrEqual(1000);
    } finally {
      await proxy.stop();
    }
  });
});

describe.each([MOSQUITTO_5, MOSQUITTO_4])('retained messages ($name)', (peer) => {
  it('the retained copy sent on subscribe is acknowledged and not forwarded; forward-retained: true forwards it', async () => {
    const topic = uniqueTopic('retained');
    await publishMqtt(peer, topic, [{ body: 'kept', retain: true }]);
    try {
      for (const forwardRetained of [false, true]) {
        const clientId = uniqueClientId('bbret');
        sessions.push([peer, clientId]);
        const source = sourceOn(peer, topic, { settings: { clientId, forwardRetained } });
        const c = collect(source);
        await c.opened;
        await publishMqtt(peer, topic, [{ body: 'live' }]);
        await until('the live message', () => c.deliveries.some((d) => d.message.body.toString() === 'live'));
        await sleep(300);
        expect(c.deliveries.map((d) => d.message.body.toString())).toEqual(forwardRetained ? ['kept', 'live'] : ['live']);
        for (const d of c.deliveries) source.ack(d);
        await source.ackBarrier();
        await source.close();
        // Resumed, the session does not get the retained copy again (MQTT 5: asked only for a new subscription;
        // 3.1.1: the source does not subscribe again when the broker kept its session).
        const again = sourceOn(peer, topic, { settings: { clientId, forwardRetained } });
        const c2 = collect(again);
        await c2.opened;
        await publishMqtt(peer, topic, [{ body: 'live again' }]);
        await until('the second live message', () => c2.deliveries.length > 0);
        await sleep(300);
        expect(c2.deliveries.map((d) => d.message.body.toString())).toEqual(['live again']);
        for (const d of c2.deliveries) again.ack(d);
        await again.ackBarrier();
        await again.close();
        // Nothing was left unacknowledged, the skipped retained copy included.
        expect(await readMqtt(peer, clientId, { quietMs: 300 })).toEqual([]);
      }
    } finally {
      // An empty retained message removes it.
      await publishMqtt(peer, topic, [{ body: '', retain: true }]);
    }
  });
});

describe('MqttTarget', () => {
  it('MQTT 5: a PUBLISH no subscription matches is refused as unroutable (the broker dropped it); no-subscribers: accept takes it', async () => {
    const topic = uniqueTopic('nobody');
    const refusing = targetOn(MOSQUITTO_5, topic);
    await refusing.open({ onLost: () => undefined });
    const err = await refusing.send(message('lost?')).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(MessageRejectedError);
    expect((err as MessageRejectedError).reason).toBe('unroutable');
    expect((err as Error).message).toContain(`no subscription matches topic '${topic}'`);
    const accepting = targetOn(MOSQUITTO_5, topic, { noSubscribers: 'accept' });
    await accepting.open({ onLost: () => undefined });
    await accepting.send(message('dropped by the broker, as asked'));
  });

  it.each([MOSQUITTO_4, RABBITMQ_MQTT, ACTIVEMQ_MQTT])('MQTT 3.1.1 ($name) cannot say a PUBLISH matched nobody: its PUBACK means taken', async (peer) => {
    // Through a proxy that holds the broker's replies: the send must wait for the PUBACK (not resolve on writing the
    // PUBLISH) and then count it as taken, though no subscription matches.
    const proxy = await TcpProxy.forUrl(peer.url).start();
    try {
      const v4 = targetOn(peer, uniqueTopic('nobody'), { url: proxy.rewrite(peer.url) });
      await v4.open({ onLost: () => undefined });
      const pubacks: Buffer[] = [];
      // A PUBACK is 0x40 0x02 and a packet id (MQTT 3.1.1 §3.4); nothing else comes from the broker here.
      proxy.observe = (from, chunk) => {
        if (from === 'service' && chunk[0] === 0x40) pubacks.push(chunk);
      };
      proxy.holdReplies();
      let settled: 'confirmed' | 'refused' | undefined;
      const sent = v4.sendBatch([message('taken')]).then((r) => (settled = r[0]!.outcome === 'confirmed' ? 'confirmed' : 'refused'));
      await until('the PUBACK at the proxy', () => pubacks.length === 1);
      await sleep(300);
      expect(settled, 'settled before the PUBACK reached it').toBeUndefined();
      proxy.releaseReplies();
      await sent;
      expect(settled).toBe('confirmed');
    } finally {
      await proxy.stop();
    }
  });

  it('publishes to the route of a templated target, and to its own topic without one', async () => {
    const peer = MOSQUITTO_5;
    const [fixed, routed] = [await queueOn(peer, 'fixed'), await queueOn(peer, 'routed')];
    const target = targetOn(peer, fixed);
    await target.open({ onLost: () => undefined });
    await target.send(message('to the route'), routed);
    const results = await target.sendBatch([message('b fixed'), message('b routed')], [undefined, routed]);
    expect(results.map((r) => r.outcome)).toEqual(['confirmed', 'confirmed']);
    expect(bodies(await readMqtt(peer, readers.get(fixed)!, { atLeast: 1, quietMs: 300 }))).toEqual(['b fixed']);
    expect(bodies(await readMqtt(peer, readers.get(routed)!, { atLeast: 2, quietMs: 300 }))).toEqual(['to the route', 'b routed']);
  });

  it('refuses a header longer than an MQTT string can carry, before writing anything, and stays usable', async () => {
    const peer = MOSQUITTO_5;
    const topic = await queueOn(peer, 'long-header');
    const target = targetOn(peer, topic);
    await target.open({ onLost: () => undefined });
    const err = await target.send(message('x', { big: 'b'.repeat(70_000) })).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(MessageRejectedError);
    expect((err as MessageRejectedError).reason).toBe('too-large');
    expect((err as Error).message).toContain("header 'big' is 70000 bytes; an MQTT string is at most 65535 bytes");
    await target.send(message('after'));
    expect(bodies(await readMqtt(peer, readers.get(topic)!, { atLeast: 1, quietMs: 300 }))).toEqual(['after']);
  });
});

describe('what the brokers do (docs/mqtt.md#the-peers-checked-here)', () => {
  it.each([
    { peer: MOSQUITTO_4, window: 20 },
    { peer: RABBITMQ_MQTT, window: 10 },
    { peer: ACTIVEMQ_MQTT, window: 100 },
  ])('MQTT 3.1.1 ($peer.name) sends $window QoS 1 messages unacknowledged, whatever the prefetch', async ({ peer, window }) => {
    const topic = await queueOn(peer, 'window');
    await publishMqtt(peer, topic, Array.from({ length: window * 2 }, (_, i) => ({ body: `w${i}` })));
    const source = sourceOn(peer, topic, { prefetch: 1000 });
    const c = collect(source);
    await c.opened;
    await until(`${window} deliveries`, () => c.deliveries.length === window);
    await sleep(1000);
    expect(c.deliveries).toHaveLength(window);
    for (const d of c.deliveries) source.ack(d);
    await until(`${window * 2} deliveries`, () => c.deliveries.length === window * 2);
    for (const d of c.deliveries.slice(window)) source.ack(d);
    await source.ackBarrier();
  });

  it('Mosquitto 5 announces a receive maximum of 20 to a client (its max_inflight_messages)', async () => {
    const session = await connectMqtt(mqttConnection(MOSQUITTO_5), { clientId: uniqueClientId('bbrm'), clean: true }, log);
    expect(session.serverInfo.receiveMaximum).toBe(20);
    await session.disconnect();
  });

  it('Mosquitto closes the connection on a PUBLISH with a control character in a user property (why the bridge leaves such headers out)', async () => {
    const err = await publishMqtt(MOSQUITTO_5, uniqueTopic('ctl'), [{ body: 'x', headers: { bad: 'a\nb' } }]).catch((e: unknown) => e);
    expect((err as Error).message).toMatch(/the broker closed the connection while publishing/);
  });
});

describe('connectMqtt', () => {
  it.each([RABBITMQ_MQTT, ACTIVEMQ_MQTT])('an MQTT 5 connection to a 3.1.1-only broker ($name) is a configuration error in a sentence, within seconds', async (peer) => {
    const started = Date.now();
    const err = await connectMqtt(mqttConnection(peer, peer.url, { protocolVersion: 5, name: 'devices' }), { clientId: uniqueClientId('bbv'), clean: true }, log).then(
      (s) => s.disconnect().then(() => undefined),
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).toMatch(
      /^MQTT connection 'devices' \(127\.0\.0\.1:\d+\): the broker speaks MQTT 3\.1\.1 only \(it (closed the connection on|refused) a version 5 CONNECT and accepted a 3\.1\.1 one\); set protocol-version: 4 on connection 'devices'/,
    );
    expect(Date.now() - started).toBeLessThan(10_000);
  });

  it('times out a server that accepts TCP and never answers CONNECT, and says so without credentials', async () => {
    const sockets: net.Socket[] = [];
    const silent = net.createServer((s) => sockets.push(s.on('error', () => undefined)));
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', () => r()));
    const port = (silent.address() as net.AddressInfo).port;
    try {
      const err = await connectMqtt(
        mqttConnection(MOSQUITTO_4, `mqtt://user:s3cret@127.0.0.1:${port}`, { connectTimeout: 500 }),
        { clientId: 'x', clean: true },
        log,
      ).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(TransientError);
      expect((err as Error).message).toBe(`MQTT connection 'mosquitto-3.1.1' (127.0.0.1:${port}): the broker did not answer CONNECT within 500 ms`);
    } finally {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => silent.close(() => r()));
    }
  });

  it('a refused login is a configuration error (RabbitMQ, MQTT 3.1.1)', async () => {
    const url = new URL(RABBITMQ_MQTT.url);
    url.username = 'guest';
    url.password = 'wrong-password';
    const err = await connectMqtt(mqttConnection(RABBITMQ_MQTT, url.toString()), { clientId: uniqueClientId('bbl'), clean: true }, log).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).toMatch(/the broker refused the connection: (bad user name or password|not authorized) \(return code [45]\)/);
    expect((err as Error).message).not.toContain('wrong-password');
  });
});
