/**
 * The bridge process with NATS JetStream on one side, on the real brokers (RabbitMQ, NATS_URL, Redis). The crash gap
 * closed, shown directly: a bridge killed between the target's confirm and the cache commit (the test-only fault point
 * of src/endpoints/test-fault-point.ts), restarted: the stream holds one copy of every message, and the resend that
 * the gap makes is dropped by the stream itself (PubAck `duplicate: true`, counted where="target").
 */
import { describe, expect, it, afterAll } from 'vitest';
import { AckPolicy, DeliverPolicy, nanos } from 'nats';
import type { TestMessage } from '../support/amqp.js';
import { useBridgeFixture } from '../support/bridge-fixture.js';
import { NatsTestClient } from '../support/nats.js';
import { uniqueName } from '../support/services.js';
import { untilValue } from '../support/wait.js';

const ID = '_AMQ_DUPL_ID';
const fx = useBridgeFixture();
const nats = new NatsTestClient();

afterAll(() => nats.cleanup());

function streamName(): string {
  return uniqueName('BBB').replace(/[^A-Za-z0-9_-]/g, '_');
}

function numbered(n: number): TestMessage[] {
  return Array.from({ length: n }, (_, i) => ({ body: Buffer.from(`message ${i}`), options: { headers: { [ID]: `id-${i}`, seq: i } } }));
}

describe('AMQP → NATS JetStream', () => {
  it('the crash gap closed: killed between the PubAck and the cache commit, restarted — the stream holds one copy of each message', async () => {
    const src = await fx.queue('nats-src');
    const stream = await nats.stream(streamName());
    const subject = stream.toLowerCase();
    const lease = 2000;
    const { yaml } = fx.config({
      bridges: [{ sourceQueue: src, targetConnection: 'nats', target: `subject: "${subject}"`, extra: { prefetch: 20 } }],
      idCache: { 'reservation-lease': lease },
    });
    const total = 200;
    await fx.amqp.publish(src, numbered(total));
    // Killed by the fault point right after the 50th PubAck: that message is in the stream, its ID not in the cache,
    // its source delivery not acked.
    const killed = fx.spawn(yaml, { BROKER_BRIDGE_TEST_KILL_AFTER_CONFIRMS: '50' });
    expect(await killed.waitExit()).toBe(null);
    const atKill = await nats.count(stream);
    expect(atKill).toBeGreaterThanOrEqual(50);
    expect(atKill).toBeLessThan(total);

    const bridge = await fx.start(yaml);
    await untilValue('the source emptied', () => fx.amqp.count(src), (n) => n === 0, { timeoutMs: 60_000 });
    const stored = await untilValue('every message in the stream', () => nats.count(stream), (n) => n >= total, { timeoutMs: 60_000 });
    // Settled: what the restarted bridge took over after the lease has been sent by now.
    await bridge.waitForLog((l) => l.msg === 'duplicate dropped by the target: it already held a message with this ID', 30_000);
    await bridge.stop();

    expect(stored).toBe(total);
    const messages = await nats.stored(stream);
    const ids = messages.map((m) => m.headers['Nats-Msg-Id']?.[0]);
    expect(new Set(ids).size).toBe(total);
    expect(messages).toHaveLength(total);
    // The resends the gap made reached JetStream (flagged, with the same ID) and were dropped there.
    const droppedAtTarget = bridge.count((l) => l.msg === 'duplicate dropped by the target: it already held a message with this ID');
    expect(droppedAtTarget).toBeGreaterThanOrEqual(1);
  });
});

describe('NATS JetStream → AMQP', () => {
  it('forwards every message once with its headers, the stream sequence as the duplicate ID, and acks the consumer', async () => {
    const dst = await fx.queue('nats-dst');
    const stream = await nats.stream(streamName());
    const subject = stream.toLowerCase();
    await (await nats.jsm()).consumers.add(stream, { durable_name: 'bridge', ack_policy: AckPolicy.Explicit, deliver_policy: DeliverPolicy.All, ack_wait: nanos(30_000) });
    const total = 300;
    await nats.publish(
      `${subject}.eu`,
      Array.from({ length: total }, (_, i) => ({ body: `n${i}`, headers: { seq: String(i), multi: ['a', 'b'] }, ...(i % 2 === 0 ? { msgId: `pub-${i}` } : {}) })),
    );
    const { yaml } = fx.config({ bridges: [{ sourceConnection: 'nats', sourceQueue: stream, target: `queue: "${dst}"`, extra: { prefetch: 50 } }] });
    const bridge = await fx.start(yaml);
    await fx.amqp.waitForCount(dst, (n) => n >= total);
    const n = await fx.amqp.settledCount(dst, 500);
    await bridge.stop();
    const got = await fx.amqp.drain(dst);
    expect(n).toBe(total);
    expect(got.map((m) => m.body.toString())).toEqual(Array.from({ length: total }, (_, i) => `n${i}`));
    got.forEach((m, i) => {
      expect(String(m.headers[ID])).toBe(i % 2 === 0 ? `pub-${i}` : `${stream}:${i + 1}`);
      expect(String(m.headers['Nats-Subject'])).toBe(`${subject}.eu`);
      expect(m.headers.multi).toEqual(['a', 'b']);
      expect(m.headers['x-bridge-possible-duplicate']).toBeUndefined();
    });
    const info = await (await nats.jsm()).consumers.info(stream, 'bridge');
    expect([info.num_pending, info.num_ack_pending]).toEqual([0, 0]);
  });
});
