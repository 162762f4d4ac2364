/**
 * What every source and target endpoint promises the core (src/core/ports.ts), as one suite run against each
 * implementation on its real broker, the way test/support/id-cache-contract.ts serves both caches. A protocol's own
 * test file keeps what only that protocol does (stable IDs, property mapping, broker-side closes, transactions).
 *
 * Every claim is checked on the broker: which messages the queue holds afterwards, how many, in which order, with
 * which headers; never only that a call resolved.
 */
import { describe, expect, it } from 'vitest';
import type { BridgeMessage, SourceDelivery } from '../../src/core/message.js';
import type { SourceEndpoint, TargetEndpoint } from '../../src/core/ports.js';
import { MessageRejectedError, TransientError } from '../../src/shared/errors.js';
import { sendUntilFailure, type SendsUntilFailure } from './send-until-failure.js';
import { TcpProxy } from './tcp-proxy.js';
import { text } from './text.js';
import { sleep, until } from './wait.js';

/** A message as a test client read it from the broker: the body as text, every header as text. */
export interface QueuedMessage {
  body: string;
  headers: Record<string, string>;
}

export interface EndpointOptions {
  /** Connect here instead of the broker (a TcpProxy in front of it). */
  url?: string;
  prefetch?: number;
  confirmTimeout?: number;
}

/** A target set up so that the broker refuses some messages and accepts the others, into `queue`. */
export interface Refusal {
  queue: string;
  target: TargetEndpoint;
  accepted(m: BridgeMessage): BridgeMessage;
  refused(m: BridgeMessage): BridgeMessage;
  /** The MessageRejectedError reason the refusal carries. */
  reason: string;
}

export interface EndpointsUnderTest {
  /** The broker URL the endpoints connect to (what a proxy stands in front of). */
  readonly url: string;
  /** A new, empty queue of this test, removed by the implementation's own cleanup. */
  queue(): Promise<string>;
  source(queue: string, opts?: EndpointOptions): SourceEndpoint;
  target(queue: string, opts?: EndpointOptions): TargetEndpoint;
  /** Puts messages into a queue with a plain test client (persistent, confirmed). */
  publish(queue: string, messages: readonly QueuedMessage[]): Promise<void>;
  /**
   * Takes every message the queue holds once at least `atLeast` arrived and it is quiet: a claim that the queue holds
   * exactly these messages.
   */
  take(queue: string, atLeast: number): Promise<QueuedMessage[]>;
  /** A target with messages the broker refuses (AMQP: unroutable; STOMP: too large for the broker). */
  refusal(): Promise<Refusal>;
  /** Headers every message of the suite carries (e.g. a run marker to find strays in a dead-letter queue). */
  readonly headers?: Record<string, string>;
  /** How many overlapping sends the pipelining claim makes (default 2,000). */
  readonly pipelined?: number;
  /**
   * False for a peer that carries no headers at all (MQTT 3.1.1: a PUBLISH is a topic and a payload): the claims about
   * headers arriving are not made there (what such a peer means for duplicate IDs is docs/delivery.md's). Default true.
   */
  readonly carriesHeaders?: boolean;
  /**
   * The most deliveries the broker hands out unacknowledged, whatever the prefetch asks (MQTT 3.1.1 has no way to ask:
   * Mosquitto sends 20, RabbitMQ's MQTT plugin 10). The source claims then use that many messages. Default: no limit.
   */
  readonly window?: number;
}

interface Collected {
  deliveries: SourceDelivery[];
  lost: TransientError[];
}

export function endpointContract(name: string, make: () => EndpointsUnderTest): void {
  let ep: EndpointsUnderTest;
  const message = (body: string, headers: Record<string, string> = {}): BridgeMessage => ({
    body: Buffer.from(body),
    properties: { persistent: true },
    headers: { ...ep.headers, ...headers },
  });
  const queued = (body: string, headers: Record<string, string> = {}): QueuedMessage => ({ body, headers: { ...ep.headers, ...headers } });
  const bodies = (ms: readonly { body: string }[]) => ms.map((m) => m.body);
  const deliveredBodies = (ds: readonly SourceDelivery[]) => ds.map((d) => d.message.body.toString());
  const numbered = (n: number, prefix: string) => Array.from({ length: n }, (_, i) => `${prefix}${i}`);

  async function consume(source: SourceEndpoint): Promise<Collected> {
    const c: Collected = { deliveries: [], lost: [] };
    await source.open({ onDelivery: (d) => c.deliveries.push(d), onLost: (e) => c.lost.push(e) });
    return c;
  }

  async function openTarget(queue: string, opts?: EndpointOptions): Promise<{ target: TargetEndpoint; lost: TransientError[] }> {
    const lost: TransientError[] = [];
    const target = ep.target(queue, opts);
    await target.open({ onLost: (e) => lost.push(e) });
    return { target, lost };
  }

  describe(`endpoint contract: ${name}`, () => {
    describe('source', () => {
      it('delivers what the queue holds, in order, each once, not flagged as redelivered, with its headers', async () => {
        ep = make();
        const n = Math.min(20, ep.window ?? 20);
        const q = await ep.queue();
        await ep.publish(
          q,
          numbered(n, 'm').map((b, i) => queued(b, { seq: String(i) })),
        );
        const source = ep.source(q);
        const { deliveries, lost } = await consume(source);
        await until(`${n} deliveries`, () => deliveries.length === n);
        expect(deliveredBodies(deliveries)).toEqual(numbered(n, 'm'));
        if (ep.carriesHeaders !== false) expect(deliveries.map((d) => text(d.message.headers.seq))).toEqual(numbered(n, ''));
        expect(deliveries.every((d) => !d.redelivered)).toBe(true);
        const seqs = deliveries.map((d) => d.seq);
        expect([...seqs].sort((a, b) => a - b)).toEqual(seqs);
        expect(new Set(seqs).size).toBe(n);
        for (const d of deliveries) source.ack(d);
        await source.ackBarrier();
        await source.close();
        expect(lost).toEqual([]);
        expect(await ep.take(q, 0)).toEqual([]);
      });

      it('acks exactly once: acked messages never come back (an ack twice is harmless), unacked ones come back after close, flagged', async () => {
        ep = make();
        const n = Math.min(30, ep.window ?? 30);
        const acked = Math.ceil((n * 2) / 3);
        const q = await ep.queue();
        await ep.publish(q, numbered(n, 'a').map((b) => queued(b)));
        const first = ep.source(q);
        const a = await consume(first);
        await until(`${n} deliveries`, () => a.deliveries.length === n);
        for (const d of a.deliveries.slice(0, acked)) first.ack(d);
        first.ack(a.deliveries[0]!);
        await first.ackBarrier();
        await first.ackBarrier(); // nothing new: resolves at once
        await first.close();
        expect(a.lost).toEqual([]);

        const second = ep.source(q);
        const b = await consume(second);
        await until(`${n - acked} redeliveries`, () => b.deliveries.length === n - acked);
        // A moment for anything that should not come (an acked message) to show up.
        await sleep(300);
        expect(deliveredBodies(b.deliveries)).toEqual(numbered(n, 'a').slice(acked));
        expect(b.deliveries.every((d) => d.redelivered)).toBe(true);
        for (const d of b.deliveries) second.ack(d);
        await second.ackBarrier();
        await second.close();
        expect(await ep.take(q, 0)).toEqual([]);
      });

      it('a delivery handler that throws leaves that message unacked and the source consuming; a second open() is a TypeError (with acks in order, the acks after it wait for it)', async () => {
        ep = make();
        const q = await ep.queue();
        await ep.publish(q, [queued('bad'), queued('good')]);
        const source = ep.source(q);
        const delivered: string[] = [];
        const lost: TransientError[] = [];
        const handlers = {
          onDelivery: (d: SourceDelivery) => {
            if (d.message.body.toString() === 'bad') throw new Error('handler bug');
            delivered.push(d.message.body.toString());
            source.ack(d);
          },
          onLost: (e: TransientError) => lost.push(e),
        };
        await source.open(handlers);
        await until('the delivery after the throwing one', () => delivered.length === 1);
        expect(delivered).toEqual(['good']);
        await expect(source.open(handlers)).rejects.toBeInstanceOf(TypeError);
        if (source.acksInOrder === true) {
          // The ack of 'good' waits for 'bad', which is never acked: the barrier cannot say it reached the broker, and
          // fails when the source closes (a stamp of 'good' must not be forgotten: 'good' comes back).
          const barrier = source.ackBarrier().then(
            () => 'resolved',
            (e: unknown) => e,
          );
          await sleep(300);
          await source.close();
          expect(await barrier).toBeInstanceOf(TransientError);
        } else {
          await source.ackBarrier();
          await source.close();
        }
        expect(lost).toEqual([]);
        // The message whose handler threw was never acked: it comes back, flagged, and is the only one. On a source whose
        // acks take effect in order (MQTT), the ack of the one after it was held back: it comes back too, flagged.
        const expected: [string, boolean][] = source.acksInOrder === true ? [['bad', true], ['good', true]] : [['bad', true]];
        const again = ep.source(q);
        const b = await consume(again);
        await until('the redelivery', () => b.deliveries.length === expected.length);
        await sleep(300);
        expect(b.deliveries.map((d) => [d.message.body.toString(), d.redelivered])).toEqual(expected);
        for (const d of b.deliveries) again.ack(d);
        await again.ackBarrier();
        await again.close();
        expect(await ep.take(q, 0)).toEqual([]);
      });

      it('stopConsuming hands out nothing new; a delivery in flight can still be acked; what was held back stays in the queue', async () => {
        ep = make();
        const q = await ep.queue();
        const source = ep.source(q, { prefetch: 10 });
        const { deliveries } = await consume(source);
        await ep.publish(q, [queued('before')]);
        await until('a delivery', () => deliveries.length === 1);
        await source.stopConsuming();
        await ep.publish(q, [queued('after')]);
        await sleep(300);
        expect(deliveredBodies(deliveries)).toEqual(['before']);
        source.ack(deliveries[0]!);
        await source.ackBarrier();
        await source.close();
        expect(bodies(await ep.take(q, 1))).toEqual(['after']);
      });

      it('reports a lost connection once; acks after it are no-ops, the barrier rejects, and every unacked message goes back', async () => {
        ep = make();
        const q = await ep.queue();
        await ep.publish(q, numbered(5, 'l').map((b) => queued(b)));
        const proxy = await TcpProxy.forUrl(ep.url).start();
        try {
          const source = ep.source(q, { url: proxy.rewrite(ep.url) });
          const { deliveries, lost } = await consume(source);
          await until('5 deliveries', () => deliveries.length === 5);
          source.ack(deliveries[0]!);
          source.ack(deliveries[1]!);
          await source.ackBarrier();
          proxy.cut();
          await until('onLost', () => lost.length > 0);
          await sleep(200);
          expect(lost).toHaveLength(1);
          expect(lost[0]).toBeInstanceOf(TransientError);
          source.ack(deliveries[2]!); // never a throw
          await expect(source.ackBarrier()).rejects.toBeInstanceOf(TransientError);
          await source.close();
        } finally {
          await proxy.stop();
        }
        expect(bodies(await ep.take(q, 3))).toEqual(['l2', 'l3', 'l4']);
      });
    });

    describe('target', () => {
      it('confirms thousands of overlapping sends; the queue holds each once, in order, with its headers', async () => {
        ep = make();
        const n = ep.pipelined ?? 2000;
        const q = await ep.queue();
        const { target, lost } = await openTarget(q);
        await Promise.all(numbered(n, 's').map((b, i) => target.send(message(b, { seq: String(i) }))));
        await target.close();
        const got = await ep.take(q, n);
        expect(bodies(got)).toEqual(numbered(n, 's'));
        if (ep.carriesHeaders !== false) expect(got.map((m) => m.headers.seq)).toEqual(numbered(n, ''));
        expect(lost).toEqual([]);
      });

      it('sendBatch resolves once the whole batch is confirmed, every member confirmed; the queue holds it in order', async () => {
        ep = make();
        const q = await ep.queue();
        const { target } = await openTarget(q);
        expect(typeof target.sendBatch).toBe('function');
        const results = await target.sendBatch!(numbered(10, 'b').map((b) => message(b)));
        expect(results).toEqual(numbered(10, 'b').map(() => ({ outcome: 'confirmed' })));
        await target.close();
        expect(bodies(await ep.take(q, 10))).toEqual(numbered(10, 'b'));
      });

      it('sendBatch with a refused member in the middle: that member is refused with its reason, each other one confirmed or not sent, and the queue holds exactly the confirmed ones', async () => {
        ep = make();
        const r = await ep.refusal();
        await r.target.open({ onLost: () => undefined });
        const batch = ['m0', 'm1', 'm2', 'm3', 'm4'].map((b) => (b === 'm2' ? r.refused(message(b)) : r.accepted(message(b))));
        const results = await r.target.sendBatch!(batch);
        expect(results).toHaveLength(5);
        expect(results[2]).toMatchObject({ outcome: 'refused', error: expect.any(MessageRejectedError) as unknown });
        expect(((results[2] as { error?: Error }).error as MessageRejectedError).reason).toBe(r.reason);
        for (const i of [0, 1, 3, 4]) expect(['confirmed', 'not-sent'], `member ${i}`).toContain(results[i]!.outcome);
        const confirmed = results.flatMap((res, i) => (res.outcome === 'confirmed' ? [`m${i}`] : []));
        // A marker after the batch, so that an empty batch outcome is still read from a settled queue.
        await r.target.send(r.accepted(message('after')));
        await r.target.close();
        expect(bodies(await ep.take(r.queue, confirmed.length + 1))).toEqual([...confirmed, 'after']);
      });

      it('sendBatch cut off by a lost connection: confirmed members are in the queue, not-sent ones are not, nothing else is', async () => {
        ep = make();
        const q = await ep.queue();
        const proxy = await TcpProxy.forUrl(ep.url).start();
        try {
          const { target } = await openTarget(q, { url: proxy.rewrite(ep.url) });
          await target.send(message('before'));
          const n = 400;
          const pad = 'x'.repeat(8 * 1024);
          const sending = target.sendBatch!(numbered(n, 'c').map((b) => message(b, { pad })));
          // Mid-way: 3 MiB cannot pass the proxy in 5 ms.
          await sleep(5);
          proxy.cut();
          const results = await sending;
          expect(results).toHaveLength(n);
          expect(results.filter((res) => res.outcome !== 'confirmed').length, 'the loss came before the end of the batch').toBeGreaterThan(0);
          for (const res of results) {
            expect(['confirmed', 'unknown', 'not-sent']).toContain(res.outcome);
            if (res.outcome !== 'confirmed') expect(res.error, res.outcome).toBeInstanceOf(TransientError);
          }
          await target.close();
          const got = new Set(bodies(await ep.take(q, 1)));
          expect(got.has('before')).toBe(true);
          results.forEach((res, i) => {
            const body = `c${i}`;
            if (res.outcome === 'confirmed') expect(got.has(body), `confirmed ${body} is in the queue`).toBe(true);
            if (res.outcome === 'not-sent') expect(got.has(body), `not-sent ${body} is not in the queue`).toBe(false);
          });
        } finally {
          await proxy.stop();
        }
      });

      it('a refused message rejects with MessageRejectedError and its reason, is not delivered, and the target stays usable (no loss)', async () => {
        ep = make();
        const r = await ep.refusal();
        const lost: TransientError[] = [];
        await r.target.open({ onLost: (e) => lost.push(e) });
        await r.target.send(r.accepted(message('first')));
        const err = await r.target.send(r.refused(message('refused'))).catch((e: unknown) => e);
        expect(err).toBeInstanceOf(MessageRejectedError);
        expect((err as MessageRejectedError).reason).toBe(r.reason);
        await r.target.send(r.accepted(message('second')));
        await r.target.close();
        expect(lost).toEqual([]);
        expect(bodies(await ep.take(r.queue, 2))).toEqual(['first', 'second']);
      });

      it('no confirm within confirmTimeout: the send fails as outcome unknown within seconds, the loss is reported once, later sends fail', async () => {
        ep = make();
        const q = await ep.queue();
        const proxy = await TcpProxy.forUrl(ep.url).start();
        try {
          const { target, lost } = await openTarget(q, { url: proxy.rewrite(ep.url), confirmTimeout: 500 });
          await target.send(message('before'));
          proxy.stall();
          const started = Date.now();
          const err = await target.send(message('stalled')).catch((e: unknown) => e);
          expect(err).toBeInstanceOf(TransientError);
          expect((err as TransientError).outcomeUnknown).toBe(true);
          expect(Date.now() - started).toBeLessThan(3000);
          // Reported by the time the send failed, and once only.
          expect(lost).toHaveLength(1);
          await expect(target.send(message('later'))).rejects.toBeInstanceOf(TransientError);
          await sleep(200);
          expect(lost).toHaveLength(1);
          await target.close();
        } finally {
          await proxy.stop();
        }
        // The stalled proxy discarded the second send: only the confirmed one reached the broker.
        expect(bodies(await ep.take(q, 1))).toEqual(['before']);
      });

      it('a connection cut with sends in flight: onLost once, the unconfirmed fail as TransientError, every confirmed send is in the queue once', async () => {
        ep = make();
        const q = await ep.queue();
        const proxy = await TcpProxy.forUrl(ep.url).start();
        const body = (i: number): string => `c${i}`;
        let sends: SendsUntilFailure = { confirmed: [], failures: [], done: Promise.resolve() };
        let lost: TransientError[] = [];
        try {
          const opened = await openTarget(q, { url: proxy.rewrite(ep.url) });
          const target = opened.target;
          lost = opened.lost;
          sends = sendUntilFailure((i) => target.send(message(body(i))), 100);
          await until('200 confirmed sends', () => sends.confirmed.length >= 200);
          proxy.cut();
          await sends.done;
          await until('onLost', () => lost.length > 0);
          await sleep(200);
          expect(lost).toHaveLength(1);
          expect(lost[0]).toBeInstanceOf(TransientError);
          expect(sends.failures.length).toBeGreaterThan(0);
          for (const f of sends.failures) expect(f).toBeInstanceOf(TransientError);
          const late = await target.send(message('late')).catch((e: unknown) => e);
          expect(late).toBeInstanceOf(TransientError);
          expect((late as TransientError).outcomeUnknown).toBe(false);
          await target.close();
        } finally {
          await proxy.stop();
        }
        const confirmed = sends.confirmed.map(body);
        const got = bodies(await ep.take(q, confirmed.length));
        expect(new Set(got).size, 'a message in the queue twice').toBe(got.length);
        expect(confirmed.filter((b) => !got.includes(b)), 'confirmed sends missing from the queue').toEqual([]);
        expect(got).not.toContain('late');
      });

      it('after close, a send fails at once as not sent (outcome known) and nothing more reaches the queue', async () => {
        ep = make();
        const q = await ep.queue();
        const { target, lost } = await openTarget(q);
        await target.send(message('open'));
        await target.close();
        const err = await target.send(message('closed')).catch((e: unknown) => e);
        expect(err).toBeInstanceOf(TransientError);
        expect((err as TransientError).outcomeUnknown).toBe(false);
        expect(lost).toEqual([]);
        expect(bodies(await ep.take(q, 1))).toEqual(['open']);
      });
    });
  });
}
