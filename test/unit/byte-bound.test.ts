/**
 * max-in-flight-bytes with fake endpoints: the session stops the source once the bodies in flight reach the bound,
 * starts it again below 75% of it, never against an operator's pause, and lets a message larger than the bound pass.
 * Against a real RabbitMQ (and what basic.cancel does to the unacked messages): test/integration/in-flight-bytes.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { MemoryIdCache } from '../../src/cache/memory-id-cache.js';
import type { BridgeConfig } from '../../src/config/types.js';
import type { BridgeMessage } from '../../src/core/message.js';
import { Metrics } from '../../src/core/metrics.js';
import { BridgeSession } from '../../src/core/session.js';
import { ByteBound, deliveryWindow, RESUME_FRACTION } from '../../src/core/session/byte-bound.js';
import { MessageRejectedError } from '../../src/shared/errors.js';
import { silentLogger } from '../../src/shared/log.js';
import { testBridgeConfig } from '../support/bridge-config.js';
import { FakeSource, FakeTarget } from '../support/fake-endpoints.js';
import { sleep, until } from '../support/wait.js';

const quick = (timeoutMs = 2000) => ({ timeoutMs, everyMs: 5 });

function msg(i: number, size: number, id = `id-${i}`): BridgeMessage {
  return { body: Buffer.alloc(size, i % 256), properties: { persistent: true }, headers: { _AMQ_DUPL_ID: id } };
}

/** A resumable fake source that counts its stop and resume calls and how many were under way at once. */
class CountingSource extends FakeSource {
  stops = 0;
  resumes = 0;
  private active = 0;
  maxActive = 0;
  constructor(private readonly callMs = 0) {
    super({ resumable: true });
    this.resumeConsuming = () => this.call(() => ((this.resumes += 1), (this.consuming = true)));
  }
  override stopConsuming(): Promise<void> {
    return this.call(() => ((this.stops += 1), (this.consuming = false)));
  }
  private async call(fn: () => unknown): Promise<void> {
    this.active += 1;
    this.maxActive = Math.max(this.maxActive, this.active);
    if (this.callMs > 0) await sleep(this.callMs);
    fn();
    this.active -= 1;
  }
}

function setup(over: Partial<BridgeConfig> = {}, source: FakeSource = new CountingSource(), opts: { deadLetter?: boolean } = {}) {
  const target = new FakeTarget();
  const deadLetter = opts.deadLetter ? new FakeTarget('fake://dlq') : undefined;
  // The operator's pause, as a supervisor owns it: set it, then ask the session to follow.
  const pause = { paused: false };
  const session = new BridgeSession({
    bridge: testBridgeConfig({ maxInFlightBytes: 1000, ...over }),
    source,
    target,
    deadLetter,
    cache: new MemoryIdCache({ size: 100, lease: 1000 }),
    log: silentLogger,
    metrics: new Metrics(),
    tokenPrefix: 'unit',
    pause,
  });
  const operator = {
    pause: () => {
      pause.paused = true;
      return session.followPause();
    },
    resume: () => {
      pause.paused = false;
      return session.followPause();
    },
  };
  return { source, target, deadLetter, session, operator };
}

/** Lets the session's source calls (chained promises) run. */
const settleCalls = () => sleep(5);

describe('ByteBound', () => {
  it('is over from the bound on, and lets go below the resume mark (75%, at least 1)', () => {
    const flips: boolean[] = [];
    const b = new ByteBound(1000, 100, (over) => flips.push(over));
    expect(b.resumeBelow).toBe(1000 * RESUME_FRACTION);
    b.received(999);
    expect(b.over).toBe(false);
    b.received(1); // exactly the bound: a full window of bodies of the estimated size, not over
    expect(b.over).toBe(false);
    b.received(1);
    expect(b.over).toBe(true);
    b.received(500);
    b.settled(701); // 800: above the mark
    expect(b.over).toBe(true);
    b.settled(51); // 749
    expect(b.over).toBe(false);
    expect(flips).toEqual([true, false]);
    // A bound of 1 byte lets go only when nothing is in flight.
    const one = new ByteBound(1, 100, () => undefined);
    expect(one.resumeBelow).toBe(1);
    one.received(10);
    expect(one.over).toBe(true);
    one.settled(10);
    expect(one.over).toBe(false);
  });

  it('sizes the delivery window from the bodies seen: the largest at once, smaller ones slowly; asks again only on a real change', () => {
    const MIB = 1024 * 1024;
    expect(deliveryWindow(64 * MIB, 500)).toBe(64); // before any delivery: 1 MiB bodies assumed
    expect(deliveryWindow(16 * MIB, 500)).toBe(16);
    expect(deliveryWindow(64 * MIB, 500, 1024)).toBe(500); // small bodies: prefetch
    expect(deliveryWindow(100, 500, 1000)).toBe(1); // a body above the bound: one at a time
    const asked: number[] = [];
    const b = new ByteBound(16 * MIB, 500, () => undefined, (n) => asked.push(n));
    expect(b.window).toBe(16);
    b.received(1024); // small bodies: the window opens to prefetch, once
    for (let i = 0; i < 100; i++) b.received(1024);
    expect(asked).toEqual([500]);
    b.received(2 * MIB); // a large one closes it at once
    expect(asked).toEqual([500, 8]);
    for (let i = 0; i < 3; i++) b.received(1024); // a few small ones change little: 8 -> at most 9, not asked
    expect(asked).toEqual([500, 8]);
    for (let i = 0; i < 200; i++) b.received(1024); // many small ones: open again, in a few steps of at least 25%
    expect(asked.at(-1)).toBe(500);
    expect(asked.length).toBeLessThanOrEqual(25);
    for (let k = 1; k < asked.length - 1; k++) expect(asked[k + 1]! >= asked[k]! * 1.25 || asked[k + 1] === 500).toBe(true);
    // Mixed sizes are sized by the large ones: alternating 1 KiB and 1 MiB keeps the window near 16.
    const mixed = new ByteBound(16 * MIB, 500, () => undefined, () => undefined);
    for (let i = 0; i < 200; i++) mixed.received(i % 2 === 0 ? 1024 : MIB);
    expect(mixed.window).toBeGreaterThanOrEqual(15);
    expect(mixed.window).toBeLessThanOrEqual(17);
  });
});

describe('BridgeSession with max-in-flight-bytes', () => {
  it('stops consuming once the bodies in flight exceed the bound, and consumes again below 75% of it', async () => {
    const { source, target, session } = setup();
    target.outcome = () => 'hold';
    await session.open();
    for (let i = 0; i < 3; i++) source.deliver(msg(i, 300));
    await settleCalls();
    expect(session.inFlightBytes).toBe(900);
    expect(source.consuming).toBe(true);
    source.deliver(msg(3, 300));
    await settleCalls();
    expect(source.consuming).toBe(false);
    // A delivery already on the wire when the consumer stopped is taken all the same.
    source.deliver(msg(4, 300));
    await until('5 sent', () => target.sent.length === 5, quick());
    expect(session.inFlightBytes).toBe(1500);
    target.held.splice(0, 2).forEach((r) => r()); // 900: above 750
    await until('2 acked', () => source.acked.length === 2, quick());
    await settleCalls();
    expect(source.consuming).toBe(false);
    target.held.splice(0, 1).forEach((r) => r()); // 600: below 750
    await until('3 acked', () => source.acked.length === 3, quick());
    await until('consuming again', () => source.consuming, quick());
    target.held.splice(0).forEach((r) => r());
    await until('5 acked', () => source.acked.length === 5, quick());
    expect(session.inFlightBytes).toBe(0);
    expect(session.conditions.paused).toBe(false);
    const s = source as CountingSource;
    expect([s.stops, s.resumes]).toEqual([1, 1]);
  });

  it('never resumes a source an operator paused, and an operator resume does not lift the bound while above it', async () => {
    const { source, target, session, operator } = setup();
    target.outcome = () => 'hold';
    await session.open();
    for (let i = 0; i < 4; i++) source.deliver(msg(i, 300));
    await until('4 sent', () => target.sent.length === 4, quick());
    expect(source.consuming).toBe(false);

    // Paused while the bound holds; then everything settles: the bound lets go, the pause does not.
    await operator.pause();
    target.held.splice(0).forEach((r) => r());
    await until('4 acked', () => source.acked.length === 4, quick());
    await settleCalls();
    expect(session.inFlightBytes).toBe(0);
    expect(source.consuming).toBe(false);
    expect(await operator.resume()).toBe(true);
    expect(source.consuming).toBe(true);

    // Over the bound again; an operator's pause and resume in between leave the consumer stopped until it is below.
    for (let i = 4; i < 8; i++) source.deliver(msg(i, 300));
    await until('8 sent', () => target.sent.length === 8, quick());
    await settleCalls();
    expect(source.consuming).toBe(false);
    await operator.pause();
    expect(await operator.resume()).toBe(true);
    expect(session.conditions.paused).toBe(false);
    await settleCalls();
    expect(source.consuming).toBe(false);
    target.held.splice(0, 2).forEach((r) => r()); // 600: below 750
    await until('consuming again', () => source.consuming, quick());
    target.held.splice(0).forEach((r) => r());
    await until('8 acked', () => source.acked.length === 8, quick());
  });

  it('an exclusive consumer (a window, no resumeConsuming) is never stopped at the bound: its window shrinks instead', async () => {
    class ExclusiveSource extends FakeSource {
      stops = 0;
      windows: number[] = [];
      override stopConsuming(): Promise<void> {
        this.stops += 1;
        return super.stopConsuming();
      }
      setWindow(messages: number): Promise<void> {
        this.windows.push(messages);
        return Promise.resolve();
      }
    }
    const source = new ExclusiveSource();
    const { target, session } = setup({}, source);
    target.outcome = () => 'hold';
    await session.open();
    for (let i = 0; i < 5; i++) source.deliver(msg(i, 300));
    await until('5 sent', () => target.sent.length === 5, quick());
    await settleCalls();
    expect(session.inFlightBytes).toBe(1500);
    expect(source.stops, 'a standby would take the queue while it is stopped').toBe(0);
    expect(source.consuming).toBe(true);
    // 1000-byte bound, 300-byte bodies: a window of 3.
    expect(source.windows.at(-1)).toBe(3);
    target.held.splice(0).forEach((r) => r());
    await until('5 acked', () => source.acked.length === 5, quick());
  });

  it('lets a single message larger than the bound pass, when nothing else is in flight', async () => {
    const { source, target, session } = setup();
    target.outcome = () => 'hold';
    await session.open();
    source.deliver(msg(1, 5000));
    await until('sent', () => target.sent.length === 1, quick());
    expect(source.consuming).toBe(false);
    target.held.splice(0).forEach((r) => r());
    await until('acked', () => source.acked.length === 1, quick());
    await until('consuming again', () => source.consuming, quick());
    target.outcome = () => 'confirm';
    source.deliver(msg(2, 5000));
    await until('2 acked', () => source.acked.length === 2, quick());
    await until('consuming again', () => source.consuming, quick());
    expect(target.sent.map((m) => m.body.length)).toEqual([5000, 5000]);
    expect(session.inFlightBytes).toBe(0);
  });

  it('counts down what settles without being forwarded: dropped duplicates and dead-lettered messages', async () => {
    const { source, target, session } = setup({ maxDeliveryAttempts: 1 }, new CountingSource(), { deadLetter: true });
    target.outcome = (m) => (m.headers._AMQ_DUPL_ID === 'bad' ? new MessageRejectedError('unroutable', 'no route') : 'confirm');
    await session.open();
    source.deliver(msg(1, 400, 'same'));
    source.deliver(msg(2, 400, 'same'));
    source.deliver(msg(3, 400, 'bad'));
    await until('3 acked', () => source.acked.length === 3, quick());
    expect(session.inFlightBytes).toBe(0);
    await until('consuming again', () => source.consuming, quick());
  });

  it('never has two source calls under way at once, however fast the bound flips', async () => {
    const source = new CountingSource(15);
    const { target, session } = setup({}, source);
    await session.open();
    // Each 1000-byte message closes the bound and its confirmation opens it again, about as fast as a source call takes.
    for (let i = 0; i < 20; i++) {
      source.deliver(msg(i, 1001));
      await sleep(i % 2 === 0 ? 1 : 25);
    }
    await until('20 acked', () => source.acked.length === 20, quick());
    await until('consuming again', () => source.consuming, quick(3000));
    expect(source.stops).toBeGreaterThan(1);
    expect(source.maxActive).toBe(1);
    expect(target.sent).toHaveLength(20);
  });

  it('does not stop a source that cannot resume on its connection (STOMP): its prefetch bounds it', async () => {
    const source = new FakeSource();
    const { target, session } = setup({}, source);
    target.outcome = () => 'hold';
    await session.open();
    for (let i = 0; i < 5; i++) source.deliver(msg(i, 1001));
    await until('5 sent', () => target.sent.length === 5, quick());
    await settleCalls();
    expect(source.consuming).toBe(true);
    expect(session.inFlightBytes).toBe(5005);
    target.held.splice(0).forEach((r) => r());
    await until('5 acked', () => source.acked.length === 5, quick());
  });

  it('a drain stops the source after a source call under way, and the bound does not start it again', async () => {
    const source = new CountingSource(20);
    const { target, session } = setup({}, source);
    target.outcome = () => 'hold';
    await session.open();
    source.deliver(msg(1, 1001)); // over: a stop is under way
    await until('sent', () => target.sent.length === 1, quick());
    target.held.splice(0).forEach((r) => r()); // below: a resume is queued behind it
    await until('acked', () => source.acked.length === 1, quick());
    const end = await session.drain(1000);
    expect(end).toEqual({ kind: 'drained' });
    expect(source.consuming).toBe(false);
    expect(source.maxActive).toBe(1);
  });
});

describe('BridgeSession: the delivery window', () => {
  /** A resumable fake source with a window: records every setWindow call, each taking `callMs`. */
  class WindowSource extends CountingSource {
    windows: number[] = [];
    constructor(private readonly windowCallMs = 0) {
      super();
    }
    async setWindow(n: number): Promise<void> {
      if (this.windowCallMs > 0) await sleep(this.windowCallMs);
      this.windows.push(n);
    }
  }

  it('asks the source for the window that fits the bodies seen, once per real change', async () => {
    const source = new WindowSource(20);
    const { target, session } = setup({ maxInFlightBytes: 3000, prefetch: 100 }, source);
    target.outcome = () => 'hold';
    await session.open();
    source.deliver(msg(0, 1000)); // 3 fit: asked while the call is slow
    source.deliver(msg(1, 10)); // the estimate barely moves: nothing asked
    await until('window asked', () => source.windows.length === 1, quick());
    expect(source.windows).toEqual([3]);
    expect(source.consuming).toBe(true); // 1010 bytes: not over the bound
    target.held.splice(0).forEach((r) => r());
    await until('2 acked', () => source.acked.length === 2, quick());
    expect(source.stops).toBe(0);
  });
});
