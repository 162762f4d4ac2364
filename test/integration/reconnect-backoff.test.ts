/**
 * The reconnect backoff (retry-interval, retry-interval-multiplier, max-retry-interval, reconnect-attempts) of a real
 * `broker-bridge run` process against a stopped broker: the bridge reaches RabbitMQ through a TCP proxy
 * (test/support/tcp-proxy.ts) that stops listening (connections refused, as by a broker that is down) and later
 * listens again. The attempts' times come from the bridge's own JSON log: one debug line 'connect attempt failed' per
 * attempt (a refused connect on 127.0.0.1 fails at once, so the line's time is the attempt's). The shared RabbitMQ
 * itself is never stopped.
 */
import { describe, expect, it } from 'vitest';
import { copiesById, type TestMessage } from '../support/amqp.js';
import type { BridgeProcess, LogLine } from '../support/bridge-process.js';
import { useBridgeFixture } from '../support/bridge-fixture.js';
import { services } from '../support/services.js';

const ID = '_AMQ_DUPL_ID';
const fx = useBridgeFixture();

// retry-interval 500 ms, times 3 per failure, capped at 3000 ms: waits of 500, 1500, 3000 (not 4500), 3000 (not 13500).
const BACKOFF = { 'retry-interval': 500, 'retry-interval-multiplier': 3, 'max-retry-interval': 3000 };
// Timers never fire early (a millisecond of rounding aside) and may fire late on a loaded 2-core machine. The upper
// margin stays below every difference that matters here: 500 vs 1500 (multiplier), 3000 vs 4500 (cap).
const EARLY_MS = 15;
const LATE_MS = 400;

function numbered(n: number, from = 0): TestMessage[] {
  return Array.from({ length: n }, (_, k) => ({ body: Buffer.from(`message ${from + k}`), options: { headers: { [ID]: `id-${from + k}` } } }));
}

const isAttempt = (l: LogLine): boolean => l.msg === 'connect attempt failed';
const isLoss = (l: LogLine): boolean => l.msg.startsWith('connection lost, reconnecting');

/** The waits the bridge took: from the lost connection to the first attempt, then between attempts (ms, from the log's times). */
function gaps(bridge: BridgeProcess): number[] {
  const loss = bridge.logs.find(isLoss);
  const attempts = bridge.logs.filter(isAttempt);
  expect(loss, 'the bridge logged the lost connection').toBeDefined();
  const times = [loss!.time as number, ...attempts.map((l) => l.time as number)];
  return times.slice(1).map((t, i) => t - times[i]!);
}

function expectWaits(actual: number[], expected: number[]): void {
  expect(actual.length, `waits ${JSON.stringify(actual)}`).toBeGreaterThanOrEqual(expected.length);
  expected.forEach((want, i) => {
    const got = actual[i]!;
    expect(got, `wait ${i + 1} of ${JSON.stringify(actual)}: ${want} ms expected`).toBeGreaterThanOrEqual(want - EARLY_MS);
    expect(got, `wait ${i + 1} of ${JSON.stringify(actual)}: ${want} ms expected`).toBeLessThanOrEqual(want + LATE_MS);
  });
}

describe('reconnect backoff against a stopped broker', () => {
  it('waits retry-interval, then grows by the multiplier up to max-retry-interval; gives up after reconnect-attempts retries: state failed, exit 1, nothing lost', async () => {
    const [src, dst] = await fx.queues('backoff-src', 'backoff-dst');
    const proxy = await fx.proxy(services.amqpUrl);
    const { yaml } = fx.config({
      bridges: [{ sourceQueue: src!, target: `queue: "${dst}"`, extra: { ...BACKOFF, 'reconnect-attempts': 4 } }],
      amqpUrl: proxy.rewrite(services.amqpUrl),
      logLevel: 'debug',
    });
    const bridge = await fx.start(yaml);
    await fx.amqp.publish(src!, numbered(50));
    await fx.amqp.waitForCount(dst!, (n) => n === 50);

    await proxy.close();
    const code = await Promise.race([bridge.waitExit(), new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), 30_000))]);

    // reconnect-attempts 4 = the first attempt and 4 retries, then the bridge fails and, being the only one, the process exits 1.
    expect(code).toBe(1);
    const attempts = bridge.logs.filter(isAttempt);
    expect(attempts.map((l) => l.attempt)).toEqual([1, 2, 3, 4, 5]);
    expect(attempts.map((l) => l.retryInMs)).toEqual([500, 1500, 3000, 3000, null]);
    // The measured waits: retry-interval after the loss and after the first failure, then x3, capped at 3000.
    expectWaits(gaps(bridge), [500, 500, 1500, 3000, 3000]);
    expect(gaps(bridge)).toHaveLength(5);
    const last = bridge.logs.find((l) => l.level === 50 && l.msg.startsWith('bridge stopped:'));
    expect(last, 'one error line says why the bridge stopped').toBeDefined();
    expect(last!.time as number).toBeGreaterThanOrEqual(attempts.at(-1)!.time as number);
    // One warn line for the cause, not one per attempt.
    expect(bridge.count((l) => l.level === 40 && l.msg.startsWith('cannot reconnect'))).toBe(1);
    // Nothing lost: every message reached the target before the broker went away, none is left in the source.
    expect(await fx.amqp.count(src!)).toBe(0);
    const copies = copiesById(await fx.amqp.drain(dst!));
    expect(copies.distinct).toBe(50);
    expect(copies.unflaggedExtras).toEqual([]);
  });

  it('reconnects when the broker is back within the attempts, and the flow resumes: nothing lost, extra copies flagged', async () => {
    const [src, dst] = await fx.queues('backoff-src', 'backoff-dst');
    const proxy = await fx.proxy(services.amqpUrl);
    const { yaml } = fx.config({
      bridges: [{ sourceQueue: src!, target: `queue: "${dst}"`, extra: { ...BACKOFF, 'reconnect-attempts': 6, prefetch: 20 } }],
      amqpUrl: proxy.rewrite(services.amqpUrl),
      logLevel: 'debug',
    });
    const bridge = await fx.start(yaml);
    // Published straight to RabbitMQ (not through the proxy): the source keeps filling while the bridge cannot reach it.
    await fx.amqp.publish(src!, numbered(3000));
    await fx.amqp.waitForCount(dst!, (n) => n >= 300);
    await proxy.close();
    await fx.amqp.publish(src!, numbered(1000, 3000));
    await bridge.waitForLog(isAttempt, 15_000, 1);
    const atFirstAttempt = await fx.amqp.count(dst!);
    await bridge.waitForLog(isAttempt, 15_000, 3);
    const atThirdAttempt = await fx.amqp.count(dst!);
    await proxy.reopen();

    await bridge.waitForLog((l) => l.msg === 'reconnected', 15_000);
    await fx.amqp.waitForCount(src!, (n) => n === 0, 60_000);
    expect(await fx.amqp.settledCount(dst!)).toBeGreaterThanOrEqual(4000);

    expectWaits(gaps(bridge), [500, 500, 1500]);
    // It reconnected within the attempts (no failure); nothing was forwarded while the broker was away.
    expect(bridge.count((l) => l.msg.startsWith('bridge stopped:'))).toBe(0);
    expect(atThirdAttempt).toBe(atFirstAttempt);
    const copies = copiesById(await fx.amqp.drain(dst!));
    expect(copies.distinct).toBe(4000);
    expect(copies.unflaggedExtras).toEqual([]);
  });
});

