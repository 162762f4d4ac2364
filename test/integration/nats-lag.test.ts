/**
 * Replication latency from JetStream's stored time (docs/operations.md#lag), on the real NATS server and RabbitMQ:
 * messages stored 2 s before the bridge starts, without any publisher timestamp, are observed at least 2 s behind —
 * counted from when the stream stored them, not from when the bridge received them.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { AckPolicy, DeliverPolicy, nanos } from 'nats';
import { useBridgeFixture } from '../support/bridge-fixture.js';
import { NatsTestClient } from '../support/nats.js';
import { parsePrometheusText } from '../support/prometheus-text.js';
import { uniqueName } from '../support/services.js';
import { sleep, untilValue } from '../support/wait.js';

const fx = useBridgeFixture();
const nats = new NatsTestClient();

afterAll(() => nats.cleanup());

describe('NATS JetStream source: replication latency', () => {
  it("is counted from the stream's stored time", async () => {
    const dst = await fx.queue('nats-lag-dst');
    const stream = await nats.stream(uniqueName('BBLAG').replace(/[^A-Za-z0-9_-]/g, '_'));
    await (await nats.jsm()).consumers.add(stream, { durable_name: 'bridge', ack_policy: AckPolicy.Explicit, deliver_policy: DeliverPolicy.All, ack_wait: nanos(30_000) });
    await nats.publish(stream.toLowerCase(), Array.from({ length: 20 }, (_, i) => ({ body: `lag ${i}`, headers: {} })));
    const storedBy = Date.now();
    await sleep(2000);
    const { yaml } = fx.config({ bridges: [{ name: 'nats-lag', sourceConnection: 'nats', sourceQueue: stream, target: `queue: "${dst}"` }], top: { 'http-port': 0 } });
    const bridge = await fx.start(yaml);
    await bridge.waitForLog((l) => l.component === 'http' && typeof l.port === 'number', 10_000);
    const api = `http://127.0.0.1:${bridge.logs.find((l) => l.component === 'http' && typeof l.port === 'number')?.port as number}`;
    const m = await untilValue(
      '20 observed',
      async () => parsePrometheusText(await (await fetch(`${api}/metrics`)).text()),
      (e) => e.find('bridge_replication_latency_seconds_count', { bridge: 'nats-lag' }).some((s) => s.value === 20),
      { timeoutMs: 30_000, everyMs: 200 },
    );
    const behind = (Date.now() - storedBy) / 1000;
    expect(m.value('bridge_replication_latency_seconds_bucket', { bridge: 'nats-lag', le: '1' })).toBe(0);
    const sum = m.value('bridge_replication_latency_seconds_sum', { bridge: 'nats-lag' });
    expect(sum / 20).toBeGreaterThanOrEqual(2);
    expect(sum / 20).toBeLessThanOrEqual(behind + 1);
    // No series at all until a skew is counted.
    expect(m.find('bridge_clock_skew_total', { bridge: 'nats-lag' }).reduce((n, x) => n + x.value, 0)).toBe(0);
    expect(await fx.amqp.settledCount(dst)).toBe(20);
    // The page and GET /bridges name the NATS connection as they name every other (it was null before).
    const status = (await (await fetch(`${api}/bridges/nats-lag`)).json()) as { connections: { source: string | null; target: string | null } };
    expect(status.connections.source).toMatch(/^broker-bridge nats source #\d+\.\d+$/);
    expect(status.connections.target).toMatch(/^broker-bridge \S+ /);
  });
});
