/**
 * Lag a pager can use, and counters that add up (issue 44; docs/operations.md#lag and #counters-that-add-up), on a
 * real `broker-bridge run` process between queues of the real RabbitMQ:
 * - a target that refuses as full (reject-publish): the oldest-unforwarded age grows while it refuses, and falls back
 *   to 0 once it takes messages again; a target that stalls, then is cut (a TCP proxy): the age grows on while the
 *   bridge holds nothing and reconnects, and is 0 once it forwards again; replication latency from the publishers' AMQP timestamps, a timestamp ahead of
 *   the clock counted as skew;
 * - faults (the bridge's connections cut twice mid-flow, unroutable messages refused and dead-lettered, duplicates,
 *   filter misses): received = forwarded + duplicates + dead-lettered + filtered + dropped + handed back + in flight at
 *   every scrape, during the flow and after it, and each message is where the counters say.
 */
import { describe, expect, it } from 'vitest';
import { useBridgeFixture } from '../support/bridge-fixture.js';
import { counterInvariant } from '../support/counter-invariant.js';
import { parsePrometheusText } from '../support/prometheus-text.js';
import { services, uniqueName } from '../support/services.js';
import { sleep, until, untilValue } from '../support/wait.js';
import type { BridgeProcess } from '../support/bridge-process.js';

const ID = '_AMQ_DUPL_ID';
const fx = useBridgeFixture();

async function apiOf(bridge: BridgeProcess): Promise<string> {
  await bridge.waitForLog((l) => l.component === 'http' && typeof l.port === 'number', 10_000);
  return `http://127.0.0.1:${bridge.logs.find((l) => l.component === 'http' && typeof l.port === 'number')?.port as number}`;
}

async function status(api: string, name: string): Promise<Record<string, unknown>> {
  return (await (await fetch(`${api}/bridges/${name}`)).json()) as Record<string, unknown>;
}

async function scrape(api: string): Promise<string> {
  return (await fetch(`${api}/metrics`)).text();
}

describe('oldest-unforwarded age and replication latency', () => {
  it('the age grows while the target refuses as full and falls back to 0 after; latency from AMQP timestamps, skew apart', async () => {
    const [src] = await fx.queues('lag-src');
    const target = uniqueName('lag-full');
    await fx.amqp.ch.assertQueue(target, { durable: true, arguments: { 'x-max-length': 10, 'x-overflow': 'reject-publish' } });
    const c = fx.config({ bridges: [{ name: 'lag', sourceQueue: src!, target: `queue: "${target}"`, extra: { prefetch: 50 } }], top: { 'http-port': 0 } });
    const bridge = await fx.start(c.yaml);
    const api = await apiOf(bridge);
    try {
      // Nothing held yet: age 0, and the figure is served.
      expect((await status(api, 'lag')).oldestUnforwardedAgeSeconds).toBe(0);
      const sentAt = Math.floor(Date.now() / 1000);
      await fx.amqp.publish(
        src!,
        Array.from({ length: 40 }, (_, i) => ({ body: Buffer.from(`lag ${i}`), options: { timestamp: sentAt, headers: { [ID]: `lag-${i}` } } })),
      );
      await untilValue('target full', () => status(api, 'lag'), (s) => s.state === 'target-full', { timeoutMs: 20_000, everyMs: 200 });
      const first = (await status(api, 'lag')).oldestUnforwardedAgeSeconds as number;
      await sleep(3000);
      const later = await status(api, 'lag');
      const second = later.oldestUnforwardedAgeSeconds as number;
      // Counted from the publisher's timestamp (whole seconds): at least the 3 s waited more than the first reading.
      expect(second - first).toBeGreaterThanOrEqual(2.9);
      expect(second).toBeGreaterThanOrEqual(Date.now() / 1000 - sentAt - 1.5);
      const gauge = parsePrometheusText(await scrape(api)).value('bridge_oldest_unforwarded_age_seconds', { bridge: 'lag' });
      expect(gauge).toBeGreaterThanOrEqual(second);
      console.log(`oldest unforwarded age while the target refused: ${first.toFixed(1)} s, 3 s later ${second.toFixed(1)} s`);

      // Room again: the target is read, the bridge forwards the rest, and holds nothing.
      const got = new Set<string>();
      await until(
        'every message at the target',
        async () => {
          for (const m of await fx.amqp.drain(target)) got.add(String(m.headers[ID]));
          return got.size >= 40;
        },
        { timeoutMs: 60_000, everyMs: 300 },
      );
      const after = await untilValue('age back to 0', () => status(api, 'lag'), (s) => s.oldestUnforwardedAgeSeconds === 0 && s.inFlight === 0, { timeoutMs: 20_000, everyMs: 200 });
      expect(after.state).toBe('running');

      // One message whose timestamp is an hour ahead of our clock: latency 0, counted as skew.
      await fx.amqp.publish(src!, [{ body: Buffer.from('ahead'), options: { timestamp: sentAt + 3600, headers: { [ID]: 'lag-ahead' } } }]);
      await until('the skewed message arrived', async () => (await fx.amqp.drain(target)).length === 1, { timeoutMs: 20_000, everyMs: 200 });
      const m = await untilValue('counted', async () => parsePrometheusText(await scrape(api)), (e) => e.value('bridge_replication_latency_seconds_count', { bridge: 'lag' }) === 41, { timeoutMs: 10_000, everyMs: 200 });
      expect(m.types.get('bridge_replication_latency_seconds')).toBe('histogram');
      expect(m.value('bridge_clock_skew_total', { bridge: 'lag' })).toBe(1);
      // The held ones waited at least the 3 s above; the skewed one is in the lowest bucket.
      expect(m.value('bridge_replication_latency_seconds_bucket', { bridge: 'lag', le: '0.005' })).toBeGreaterThanOrEqual(1);
      expect(m.value('bridge_replication_latency_seconds_bucket', { bridge: 'lag', le: '2.5' })).toBeLessThan(41);
      expect(m.value('bridge_replication_latency_seconds_sum', { bridge: 'lag' })).toBeGreaterThan(30 * 3);
      expect(counterInvariant(m).map((r) => r.holds)).toEqual([true]);
    } finally {
      await fx.amqp.deleteQueues(target);
    }
  });
});

describe('oldest-unforwarded age while the target is away', () => {
  it('grows while the target stalls, goes on growing while the bridge reconnects to a cut target, and is 0 once it forwards again', async () => {
    const [src, dst] = await fx.queues('away-src', 'away-dst');
    const proxy = await fx.proxy(services.amqpUrl);
    const c = fx.config({ bridges: [{ name: 'away', sourceQueue: src!, target: `queue: "${dst}"`, extra: { prefetch: 50, 'retry-interval': 300, 'max-retry-interval': 300 } }], top: { 'http-port': 0 } });
    // The target on a connection of its own, through the proxy; the source reaches RabbitMQ directly.
    const yaml = c.yaml
      .replace(/^( {2}rabbit: .*)$/m, `$1\n  rabbit-target: { type: amqp, url: "${proxy.rewrite(services.amqpUrl)}" }`)
      .replace('target: { connection: rabbit,', 'target: { connection: rabbit-target,');
    const bridge = await fx.start(yaml);
    const api = await apiOf(bridge);
    proxy.stall();
    await fx.amqp.publish(src!, Array.from({ length: 30 }, (_, i) => ({ body: Buffer.from(`away ${i}`), options: { headers: { [ID]: `away-${i}` } } })));
    const held = await untilValue('held', () => status(api, 'away'), (s) => s.inFlight === 30, { timeoutMs: 20_000, everyMs: 100 });
    await sleep(1000);
    const stalled = (await status(api, 'away')).oldestUnforwardedAgeSeconds as number;
    expect(stalled).toBeGreaterThanOrEqual(1);
    // The target cut: the session ends, its 30 go back to the source queue, the bridge reconnects and cannot.
    proxy.cut();
    const away = await untilValue('reconnecting', () => status(api, 'away'), (s) => s.state === 'reconnecting' && s.inFlight === 0, { timeoutMs: 20_000, everyMs: 100 });
    await sleep(2000);
    const later = await status(api, 'away');
    expect(later.state).toBe('reconnecting');
    expect(later.inFlight).toBe(0);
    expect(later.oldestUnforwardedAgeSeconds as number).toBeGreaterThanOrEqual((away.oldestUnforwardedAgeSeconds as number) + 1.9);
    expect(later.oldestUnforwardedAgeSeconds as number).toBeGreaterThan(stalled);
    console.log(`age with the target stalled: ${stalled.toFixed(1)} s (held ${String(held.inFlight)}); reconnecting: ${(away.oldestUnforwardedAgeSeconds as number).toFixed(1)} s, 2 s later ${(later.oldestUnforwardedAgeSeconds as number).toFixed(1)} s`);
    proxy.resume();
    await fx.amqp.waitForCount(src!, (n) => n === 0, 30_000);
    expect(new Set((await fx.amqp.drain(dst!)).map((m) => String(m.headers[ID]))).size).toBe(30);
    await untilValue('age 0', () => status(api, 'away'), (s) => s.oldestUnforwardedAgeSeconds === 0 && s.state === 'running', { timeoutMs: 20_000, everyMs: 200 });
    expect(counterInvariant(await scrape(api)).map((r) => r.holds)).toEqual([true]);
  });
});

describe('counters that add up', () => {
  it('after connection cuts, refusals, duplicates and filter misses: the sum holds at every scrape, and the messages are where it says', async () => {
    const [src, dst, dlq] = await fx.queues('inv-src', 'inv-dst', 'inv-dlq');
    const proxy = await fx.proxy(services.amqpUrl);
    const c = fx.config({
      amqpUrl: proxy.rewrite(services.amqpUrl),
      bridges: [
        {
          name: 'inv',
          sourceQueue: src!,
          // The route header picks the queue (default exchange): `nowhere` is unroutable, refused, then dead-lettered.
          target: 'queue: "${header.route}"',
          deadLetter: `connection: rabbit, queue: "${dlq}"`,
          extra: { prefetch: 50, filter: "kind <> 'skip'", 'max-delivery-attempts': 2, 'retry-interval': 200, 'max-retry-interval': 500 },
        },
      ],
      top: { 'http-port': 0 },
    });
    const bridge = await fx.start(c.yaml);
    const api = await apiOf(bridge);
    const nowhere = uniqueName('inv-nowhere');
    const messages = [
      ...Array.from({ length: 1500 }, (_, i) => ({ body: Buffer.from(`inv ${i}`), options: { headers: { [ID]: `inv-${i}`, route: dst!, kind: 'normal' } } })),
      // Duplicates of the first 50 (dropped by the bridge), filter misses, unroutable ones.
      ...Array.from({ length: 50 }, (_, i) => ({ body: Buffer.from(`inv ${i}`), options: { headers: { [ID]: `inv-${i}`, route: dst!, kind: 'normal' } } })),
      ...Array.from({ length: 30 }, (_, i) => ({ body: Buffer.from(`skip ${i}`), options: { headers: { [ID]: `skip-${i}`, route: dst!, kind: 'skip' } } })),
      ...Array.from({ length: 20 }, (_, i) => ({ body: Buffer.from(`nowhere ${i}`), options: { headers: { [ID]: `nowhere-${i}`, route: nowhere, kind: 'normal' } } })),
    ];
    const scrapes: string[] = [];
    let scraping = true;
    const scraper = (async () => {
      while (scraping) {
        scrapes.push(await scrape(api).catch(() => ''));
        await sleep(100);
      }
    })();
    await fx.amqp.publish(src!, messages);
    // Two cuts of every connection of the bridge while messages are in flight.
    for (let cut = 0; cut < 2; cut++) {
      await untilValue('messages in flight', () => status(api, 'inv'), (s) => (s.inFlight as number) > 0, { timeoutMs: 30_000, everyMs: 20 });
      proxy.cut();
      await sleep(700);
      proxy.resume();
      await untilValue('running again', () => status(api, 'inv'), (s) => s.state === 'running', { timeoutMs: 30_000, everyMs: 100 });
    }
    await fx.amqp.waitForCount(src!, (n) => n === 0, 90_000);
    await untilValue('nothing in flight', () => status(api, 'inv'), (s) => s.inFlight === 0, { timeoutMs: 30_000, everyMs: 200 });
    scraping = false;
    await scraper;
    const last = await scrape(api);
    const [result] = counterInvariant(last);
    const delivered = await fx.amqp.drain(dst!);
    const deadLettered = await fx.amqp.drain(dlq!);

    // Every scrape during the flow and after it adds up (some with messages in flight).
    const results = scrapes.filter((s) => s !== '').map((s) => counterInvariant(s)[0]!);
    expect(results.length).toBeGreaterThan(10);
    expect(results.filter((r) => !r.holds)).toEqual([]);
    expect(results.some((r) => r.terms.inFlight > 0)).toBe(true);
    expect(result?.holds, JSON.stringify(result)).toBe(true);

    // Where each message went, against the terms.
    const t = result!.terms;
    expect(new Set(delivered.map((m) => String(m.headers[ID]))).size).toBe(1500);
    // Each dead-lettered copy counted (an ack a cut lost brings one back: refused and dead-lettered again, counted again).
    expect(new Set(deadLettered.map((m) => String(m.headers[ID]))).size).toBe(20);
    expect(new Set(deadLettered.map((m) => String(m.headers['x-bridge-dead-letter-reason'])))).toEqual(new Set(['unroutable']));
    expect(t.deadLettered).toBe(deadLettered.length);
    // What a cut left unacked went back to RabbitMQ, was counted handed back, and was received again.
    expect(t.handedBack).toBeGreaterThan(0);
    // Plus what was acked but whose ack a cut lost: delivered again, received again, settled again (a duplicate, mostly).
    expect(result!.received).toBeGreaterThanOrEqual(1600 + t.handedBack);
    expect(t.duplicatesDropped).toBeGreaterThanOrEqual(50);
    // Forwarded counts copies confirmed and acked. A copy whose confirm a cut lost is sent again, flagged (two copies, one
    // counted); one confirmed whose ack a cut lost is dropped as a duplicate when it comes back (one copy, not counted).
    expect(t.forwarded).toBeLessThanOrEqual(delivered.length);
    expect(t.forwarded).toBeGreaterThanOrEqual(1500 - t.handedBack);
    const seen = new Set<string>();
    const unflaggedExtra = delivered.filter((m) => {
      const id = String(m.headers[ID]);
      const again = seen.has(id);
      seen.add(id);
      return again && m.headers['x-bridge-possible-duplicate'] === undefined;
    });
    expect(unflaggedExtra).toEqual([]);
    expect(t.filtered).toBeGreaterThanOrEqual(30);
    expect(t.inFlight).toBe(0);
    // The same figures in /bridges/{name}, for the operator page.
    expect(await status(api, 'inv')).toMatchObject({
      sourceDepthAvailable: true,
      inFlight: 0,
      oldestUnforwardedAgeSeconds: 0,
      pause: null,
      declaredState: 'running',
      counters: {
        received: result!.received,
        forwarded: t.forwarded,
        deadLettered: t.deadLettered,
        handedBack: t.handedBack,
        dropped: 0,
        clockSkew: 0,
      },
    });
    console.log(`counter invariant after 2 cuts: ${JSON.stringify(result)}; ${results.length} scrapes, all adding up`);
  });
});
