/**
 * The session's state machine with fake endpoints (pure logic: ordering, when acks happen, retries, dead-lettering,
 * failing closed). Delivery itself is proven against real brokers in test/integration.
 */
import { describe, expect, it } from 'vitest';
import { MemoryIdCache } from '../../src/cache/memory-id-cache.js';
import type { IdCache } from '../../src/core/id-cache.js';
import type { BridgeConfig } from '../../src/config/types.js';
import { MessageRejectedError, TransientError } from '../../src/shared/errors.js';
import { TARGET_FULL } from '../../src/core/session/refusal-policy.js';
import type { BridgeMessage } from '../../src/core/message.js';
import { Metrics } from '../../src/core/metrics.js';
import { BridgeSession } from '../../src/core/session.js';
import { fingerprint } from '../../src/core/duplicate-id.js';
import { StampClaims } from '../../src/core/stamp-claim.js';
import { silentLogger } from '../../src/shared/log.js';
import { text } from '../support/text.js';
import { sleep, until } from '../support/wait.js';
import { testBridgeConfig } from '../support/bridge-config.js';
import { FakeSource, FakeTarget } from '../support/fake-endpoints.js';

/** Fake endpoints answer within milliseconds: poll often, fail fast. */
const quick = (timeoutMs = 2000) => ({ timeoutMs, everyMs: 5 });

function cfg(over: Partial<BridgeConfig> = {}): BridgeConfig {
  return testBridgeConfig({ name: 'test', ...over });
}

function msg(i: number, id: string | null = `id-${i}`): BridgeMessage {
  return { body: Buffer.from(`m${i}`), properties: { persistent: true }, headers: id ? { _AMQ_DUPL_ID: id } : {} };
}

function setup(over: Partial<BridgeConfig> = {}, opts: { cache?: IdCache; deadLetter?: boolean; tokenPrefix?: string } = {}) {
  const source = new FakeSource();
  const target = new FakeTarget();
  const deadLetter = opts.deadLetter ? new FakeTarget('fake://dlq') : undefined;
  const cache = opts.cache ?? new MemoryIdCache({ size: 100, lease: 1000 });
  const session = new BridgeSession({
    bridge: cfg(over),
    source,
    target,
    deadLetter,
    cache,
    log: silentLogger,
    metrics: new Metrics(),
    tokenPrefix: opts.tokenPrefix ?? 'unit',
  });
  return { source, target, deadLetter, cache, session };
}

describe('BridgeSession', () => {
  it('sends in source order and acks each message only after the target confirmed it', async () => {
    const { source, target, session } = setup();
    target.outcome = () => 'hold';
    await session.open();
    for (let i = 0; i < 5; i++) source.deliver(msg(i));
    await until('5 sent', () => target.sent.length === 5, quick());
    expect(target.sent.map((m) => m.headers._AMQ_DUPL_ID)).toEqual(['id-0', 'id-1', 'id-2', 'id-3', 'id-4']);
    expect(source.acked).toEqual([]);
    target.held.splice(0, 2).forEach((r) => r());
    await until('2 acked', () => source.acked.length === 2, quick());
    expect(source.acked).toEqual([1, 2]);
  });

  it('forwards one of two in-flight copies of an ID and acks both', async () => {
    const { source, target, session } = setup();
    await session.open();
    source.deliver(msg(1));
    source.deliver(msg(1));
    source.deliver(msg(2));
    await until('3 acked', () => source.acked.length === 3, quick());
    expect(target.sent.map((m) => m.headers._AMQ_DUPL_ID)).toEqual(['id-1', 'id-2']);
  });

  it('stamps a fresh ID on each first delivery, even for identical content', async () => {
    const { source, target, session } = setup();
    await session.open();
    source.deliver(msg(1, null));
    source.deliver(msg(1, null));
    await until('2 acked', () => source.acked.length === 2, quick());
    const ids = target.sent.map((m) => m.headers._AMQ_DUPL_ID);
    expect(new Set(ids).size).toBe(2);
    expect(text(ids[0])).toMatch(/^bb-/);
  });

  it('uses the stable source identity when there is no header', async () => {
    const { source, target, session } = setup();
    await session.open();
    source.deliver(msg(1, null), false, 'ID:broker-1:1');
    source.deliver(msg(1, null), true, 'ID:broker-1:1');
    await until('2 acked', () => source.acked.length === 2, quick());
    expect(target.sent.map((m) => m.headers._AMQ_DUPL_ID)).toEqual(['ID:broker-1:1']);
  });

  it('retries a refused message, then dead-letters it with the reason and acks it', async () => {
    const { source, target, deadLetter, session } = setup({}, { deadLetter: true });
    target.outcome = (m) => (m.headers._AMQ_DUPL_ID === 'id-1' ? new MessageRejectedError('unroutable', 'no route') : 'confirm');
    await session.open();
    source.deliver(msg(1));
    source.deliver(msg(2));
    await until('2 acked', () => source.acked.length === 2, quick());
    expect(target.sent.filter((m) => m.headers._AMQ_DUPL_ID === 'id-1')).toHaveLength(3);
    expect(deadLetter!.sent).toHaveLength(1);
    expect(deadLetter!.sent[0]!.headers).toMatchObject({ 'x-bridge-dead-letter-reason': 'unroutable', 'x-bridge-delivery-attempts': 3, _AMQ_DUPL_ID: 'id-1' });
  });

  it('isolates the culprit of an ambiguous refusal: innocent messages go through flagged, the culprit is dead-lettered', async () => {
    const { source, target, deadLetter, session } = setup({}, { deadLetter: true });
    target.outcome = () => 'hold';
    await session.open();
    source.deliver(msg(1));
    source.deliver(msg(2));
    source.deliver(msg(3));
    await until('3 sent', () => target.sent.length === 3, quick());
    // The broker closed the channel for one of them without saying which.
    target.outcome = (m) => (m.headers._AMQ_DUPL_ID === 'id-2' ? new MessageRejectedError('precondition-failed', 'too big') : 'confirm');
    target.heldReject.splice(0).forEach((r) => r(new MessageRejectedError('precondition-failed', 'channel closed', { ambiguous: true })));
    await until('3 acked', () => source.acked.length === 3, quick());
    const resent = target.sent.slice(3);
    expect(resent.filter((m) => m.headers._AMQ_DUPL_ID === 'id-1')).toHaveLength(1);
    expect(resent.filter((m) => m.headers._AMQ_DUPL_ID === 'id-3')).toHaveLength(1);
    expect(resent.every((m) => m.headers['x-bridge-possible-duplicate'] === true)).toBe(true);
    // The culprit is counted only when refused alone: 3 attempts, then the dead-letter destination.
    expect(resent.filter((m) => m.headers._AMQ_DUPL_ID === 'id-2')).toHaveLength(3);
    expect(deadLetter!.sent.map((m) => m.headers._AMQ_DUPL_ID)).toEqual(['id-2']);
  });

  it('holds messages a full target refuses, counts no attempt, takes no new work meanwhile, and sends them when it has room', async () => {
    const { source, target, deadLetter, session } = setup({ maxDeliveryAttempts: 2 }, { deadLetter: true });
    let room = false;
    target.outcome = () => (room ? 'confirm' : new MessageRejectedError(TARGET_FULL, 'basic.nack'));
    await session.open();
    for (let i = 0; i < 3; i++) source.deliver(msg(i));
    await until('target full', () => session.conditions.targetFullSince !== undefined, quick());
    // Many more refusals than max-delivery-attempts allows a bad message: still held, none dead-lettered.
    await until('refused 6 times', () => target.sent.length >= 6, quick());
    source.deliver(msg(3));
    await sleep(50);
    expect(target.sent.some((m) => m.headers._AMQ_DUPL_ID === 'id-3'), 'no new work while full').toBe(false);
    expect(source.acked).toEqual([]);
    room = true;
    await until('4 acked', () => source.acked.length === 4, quick(5000));
    expect(deadLetter!.sent).toEqual([]);
    expect(session.conditions.targetFullSince).toBeUndefined();
    // Each ID confirmed once, in source order, unflagged (a refused publish was not delivered).
    const confirmedOrder = target.sent.slice(-4).map((m) => m.headers._AMQ_DUPL_ID);
    expect(confirmedOrder).toEqual(['id-0', 'id-1', 'id-2', 'id-3']);
    expect(target.sent.every((m) => m.headers['x-bridge-possible-duplicate'] === undefined)).toBe(true);
  });

  it('settles a batch member by member: confirmed members are acked and never sent again; a refused one alone is retried', async () => {
    const { source, target, deadLetter, session } = setup({ maxBatchSize: 5, maxBatchTime: 1000, maxDeliveryAttempts: 2 }, { deadLetter: true });
    target.batching = true;
    target.outcome = (m) => (m.headers._AMQ_DUPL_ID === 'id-2' ? new MessageRejectedError('unroutable', 'no route') : 'confirm');
    await session.open();
    for (let i = 0; i < 5; i++) source.deliver(msg(i));
    await until('5 acked', () => source.acked.length === 5, quick());
    expect(target.batches).toEqual([5]);
    const sends = (id: string) => target.sent.filter((m) => m.headers._AMQ_DUPL_ID === id).length;
    for (const id of ['id-0', 'id-1', 'id-3', 'id-4']) expect(sends(id), id).toBe(1);
    expect(sends('id-2')).toBe(2);
    expect(deadLetter!.sent.map((m) => m.headers._AMQ_DUPL_ID)).toEqual(['id-2']);
  });

  it('settles a message the source could not read alone: dead-lettered with what was read, acked, never sent or reserved; the next goes on', async () => {
    const { source, target, deadLetter, cache, session } = setup({}, { deadLetter: true });
    await session.open();
    source.deliver(msg(1, 'big-1'), false, undefined, { reason: 'too-large', detail: 'over max-frame-size (65536 bytes)', dropped: 'body', size: 70_000 });
    source.deliver(msg(2));
    await until('2 acked', () => source.acked.length === 2, quick());
    expect(target.sent.map((m) => m.headers._AMQ_DUPL_ID)).toEqual(['id-2']);
    expect(deadLetter!.sent).toHaveLength(1);
    expect(deadLetter!.sent[0]!.headers).toMatchObject({
      'x-bridge-dead-letter-reason': 'too-large',
      'x-bridge-dead-letter-detail': 'over max-frame-size (65536 bytes)',
      'x-bridge-dropped': 'body',
      'x-bridge-original-size': 70_000,
      _AMQ_DUPL_ID: 'big-1',
    });
    // Never near the cache: its ID was neither reserved nor recorded.
    expect((await cache.reserve('fake://target', 'big-1', 'other.1')).status).toBe('reserved');
    expect(source.rejected).toEqual([]);
  });

  it('hands an unreadable message back to the broker when the source asks for it, and acks nothing of it', async () => {
    const { source, target, deadLetter, session } = setup({}, { deadLetter: true });
    await session.open();
    source.deliver(msg(1), false, undefined, { reason: 'too-large', detail: 'd', dropped: 'body', handBack: true });
    source.deliver(msg(2));
    await until('1 acked, 1 rejected', () => source.acked.length === 1 && source.rejected.length === 1, quick());
    expect(source.rejected).toEqual([1]);
    expect(source.acked).toEqual([2]);
    expect(deadLetter!.sent).toEqual([]);
    expect(target.sent.map((m) => m.headers._AMQ_DUPL_ID)).toEqual(['id-2']);
  });

  it('stops without acking a refused message when there is no dead-letter destination', async () => {
    const { source, target, session } = setup();
    target.outcome = () => new MessageRejectedError('nacked', 'nack');
    await session.open();
    source.deliver(msg(1));
    const end = await session.finished;
    expect(end.kind).toBe('failed');
    expect(end.kind === 'failed' && end.error.message).toMatch(/no dead-letter destination/);
    expect(source.acked).toEqual([]);
    expect(source.closed).toBe(true);
  });

  it('fails closed: nothing is sent or acked while the cache is unreachable, and the flow resumes when it returns', async () => {
    const real = new MemoryIdCache({ size: 100, lease: 1000 });
    let down = true;
    const flaky = new Proxy(real, {
      get(t, p, r) {
        const v: unknown = Reflect.get(t, p, r);
        if (typeof v !== 'function') return v;
        return (...args: unknown[]) => (down ? Promise.reject(new TransientError('redis down')) : (v as (...a: unknown[]) => unknown).apply(t, args));
      },
    }) as IdCache;
    const { source, target, session } = setup({}, { cache: flaky });
    await session.open();
    for (let i = 0; i < 3; i++) source.deliver(msg(i));
    await sleep(300);
    expect(target.sent).toHaveLength(0);
    expect(source.acked).toEqual([]);
    down = false;
    await until('3 acked', () => source.acked.length === 3, quick(5000));
    expect(target.sent).toHaveLength(3);
  });

  it('commits the IDs confirmed together in one cache call, and acks each only once that call answered', async () => {
    const real = new MemoryIdCache({ size: 100, lease: 1000 });
    const commits: string[][] = [];
    const single: string[] = [];
    let open!: () => void;
    let gate = new Promise<void>((r) => (open = r));
    const gated = new Proxy(real, {
      get(t, p, r) {
        const v: unknown = Reflect.get(t, p, r);
        if (p === 'commit') {
          return (address: string, id: string, token: string) => {
            single.push(id);
            return real.commit(address, id, token);
          };
        }
        if (p !== 'commitMany') return v;
        return async (address: string, pairs: { id: string; token: string }[]) => {
          commits.push(pairs.map((x) => x.id));
          await gate;
          return real.commitMany(address, pairs);
        };
      },
    }) as IdCache;
    const { source, target, session } = setup({}, { cache: gated });
    target.outcome = () => 'hold';
    await session.open();
    for (let i = 0; i < 5; i++) source.deliver(msg(i));
    await until('5 sent', () => target.sent.length === 5, quick());
    target.held.splice(0, 3).forEach((r) => r()); // three confirmations in one callback
    await until('one commit call', () => commits.length === 1, quick());
    await sleep(50);
    expect(commits).toEqual([['id-0', 'id-1', 'id-2']]);
    expect(source.acked).toEqual([]);
    open();
    await until('3 acked', () => source.acked.length === 3, quick());
    expect(source.acked).toEqual([1, 2, 3]);
    expect(single).toEqual([]);
    gate = Promise.reject(new Error('script error: not transient'));
    gate.catch(() => undefined);
    target.held.splice(0, 2).forEach((r) => r());
    // A commit the cache refuses for good ends the session; its messages stay unacked (the broker redelivers them).
    const end = await session.finished;
    expect(commits).toEqual([['id-0', 'id-1', 'id-2'], ['id-3', 'id-4']]);
    expect(end.kind).toBe('failed');
    expect(source.acked).toEqual([1, 2, 3]);
  });

  it('on a lost target, acks nothing unconfirmed and flags the next copy of an uncertain send', async () => {
    const { source, target, session, cache } = setup();
    target.outcome = () => 'hold';
    await session.open();
    source.deliver(msg(1));
    await until('1 sent', () => target.sent.length === 1, quick());
    target.handlers!.onLost(new TransientError('gone', { outcomeUnknown: true }));
    const end = await session.finished;
    expect(end.kind).toBe('failed');
    expect(source.acked).toEqual([]);
    expect(await cache.reserve('fake://target', 'id-1', 'next-owner')).toEqual({ status: 'reserved', possibleDuplicate: true });
  });

  it('sends transactional batches, and a failed commit acks nothing of the batch', async () => {
    const { source, target, session } = setup({ maxBatchSize: 4, maxBatchTime: 50 });
    target.batching = true;
    await session.open();
    for (let i = 0; i < 8; i++) source.deliver(msg(i));
    await until('8 acked', () => source.acked.length === 8, quick());
    expect(target.batches).toEqual([4, 4]);

    const second = setup({ maxBatchSize: 4, maxBatchTime: 50 });
    second.target.batching = true;
    second.target.outcome = () => new TransientError('commit failed', { outcomeUnknown: true });
    await second.session.open();
    for (let i = 0; i < 4; i++) second.source.deliver(msg(i));
    const end = await second.session.finished;
    expect(end.kind).toBe('failed');
    expect(second.source.acked).toEqual([]);
  });

  it('drops a re-sent ID inside a batch', async () => {
    const { source, target, session } = setup({ maxBatchSize: 10, maxBatchTime: 30 });
    target.batching = true;
    await session.open();
    source.deliver(msg(1));
    source.deliver(msg(2));
    source.deliver(msg(1));
    source.deliver(msg(3));
    await until('4 acked', () => source.acked.length === 4, quick());
    expect(target.sent.map((m) => m.headers._AMQ_DUPL_ID)).toEqual(['id-1', 'id-2', 'id-3']);
  });

  it('after a lapse of its liveness, holds sends until it is live again and flags what it reserved before; later reservations go unflagged', async () => {
    const liveness = { live: true, lapses: 0, untilLive: () => until('live', () => liveness.live, quick()) };
    const cache = Object.assign(new MemoryIdCache({ size: 100, lease: 1000 }), { liveness });
    const { source, target, session } = setup({}, { cache });
    await session.open();
    // The target blocks: two messages are reserved and wait at the gate.
    target.handlers!.onBlocked!(true);
    source.deliver(msg(1));
    source.deliver(msg(2));
    await sleep(30);
    expect(target.sent).toEqual([]);
    // The process froze past its liveness: other processes may have taken those reservations over.
    liveness.live = false;
    liveness.lapses = 1;
    target.handlers!.onBlocked!(false);
    await sleep(30);
    expect(target.sent, 'nothing goes out while this process is not live').toEqual([]);
    liveness.live = true;
    await until('2 acked', () => source.acked.length === 2, quick());
    expect(target.sent.map((m) => [m.headers._AMQ_DUPL_ID, m.headers['x-bridge-possible-duplicate']])).toEqual([
      ['id-1', true],
      ['id-2', true],
    ]);
    source.deliver(msg(3));
    await until('3 acked', () => source.acked.length === 3, quick());
    expect(target.sent[2]!.headers['x-bridge-possible-duplicate']).toBeUndefined();
  });

  it('a drain hands back at once a redelivery that waits for another owner\'s reservation, instead of waiting for it', async () => {
    const cache = new MemoryIdCache({ size: 100, lease: 60_000 });
    // Another process holds id-1 (a crashed one, say, whose lease runs for a minute).
    await cache.reserve('fake://target', 'id-1', 'other.1.1.1');
    const { source, target, session } = setup({}, { cache });
    await session.open();
    source.deliver(msg(1), true);
    source.deliver(msg(2));
    await until('id-2 acked', () => source.acked.length === 1, quick());
    const started = Date.now();
    expect(await session.drain(10_000)).toEqual({ kind: 'stopped', unfinished: 1 });
    expect(Date.now() - started).toBeLessThan(3000);
    expect(target.sent.map((m) => m.headers._AMQ_DUPL_ID)).toEqual(['id-2']);
    expect(source.acked).toEqual([2]);
  });

  it('a session that ends on the source side waits for the target to answer what is in flight: a confirmed message is committed, its redelivery dropped', async () => {
    const cache = new MemoryIdCache({ size: 100, lease: 60_000 });
    const { source, target, session } = setup({}, { cache });
    target.outcome = () => 'hold';
    await session.open();
    source.deliver(msg(1));
    await until('sent', () => target.sent.length === 1, quick());
    // The source's connection goes; the target confirms a moment later (it is healthy, its answer was on its way).
    source.handlers!.onLost(new TransientError('source gone'));
    await sleep(50);
    target.held.splice(0).forEach((r) => r());
    const end = await session.finished;
    expect(end.kind).toBe('failed');
    expect(source.acked).toEqual([]);
    // Committed, not released as uncertain: the redelivery is a duplicate, not a flagged second copy.
    expect(await cache.reserve('fake://target', 'id-1', 'next.1.1.1')).toEqual({ status: 'duplicate' });
  });

  it('a session that ends after acks no barrier proved gives their stamps back as acked: a byte-identical redelivery is forwarded flagged, never dropped', async () => {
    const cache = new MemoryIdCache({ size: 100, lease: 200 });
    const first = setup({}, { cache, tokenPrefix: 'first' });
    first.source.barrierFails = true;
    await first.session.open();
    first.source.deliver(msg(1, null));
    await until('acked', () => first.source.acked.length === 1, quick());
    first.source.handlers!.onLost(new TransientError('source gone'));
    expect((await first.session.finished).kind).toBe('failed');
    // The same bytes come back: the first copy's ack may have arrived, and this be its twin, never forwarded. Before,
    // the stamp stayed held until its lease ran out, then this redelivery took it as its own and was dropped.
    const second = setup({}, { cache, tokenPrefix: 'second' });
    await second.session.open();
    await sleep(400);
    second.source.deliver(msg(1, null), true);
    await until('acked', () => second.source.acked.length === 1, quick());
    const [firstCopy] = first.target.sent;
    expect(second.target.sent.map((m) => m.headers['x-bridge-possible-duplicate'])).toEqual([true]);
    expect(second.target.sent[0]!.headers._AMQ_DUPL_ID).not.toBe(firstCopy!.headers._AMQ_DUPL_ID);
  });

  it('keeps source order after a refusal: the refused message is sent again alone, before any later message', async () => {
    const { source, target, session } = setup({ maxDeliveryAttempts: 5 }, { deadLetter: true });
    let refusals = 0;
    target.outcome = (m) => {
      if (m.headers._AMQ_DUPL_ID === 'id-3' && refusals < 3) {
        refusals += 1;
        return new MessageRejectedError('unroutable', 'no route');
      }
      return 'confirm';
    };
    await session.open();
    for (let i = 1; i <= 10; i++) source.deliver(msg(i));
    await until('10 acked', () => source.acked.length === 10, quick());
    const sent = target.sent.map((m) => text(m.headers._AMQ_DUPL_ID));
    const tries = sent.flatMap((id, i) => (id === 'id-3' ? [i] : []));
    expect(tries).toHaveLength(4);
    // The sends already in flight at the first refusal may pass it; after that, id-3 alone until it is taken, then
    // every later message in source order.
    expect(sent.slice(tries[1], tries[3]! + 1)).toEqual(['id-3', 'id-3', 'id-3']);
    const later = sent.slice(tries[3]! + 1);
    expect(later).toEqual([...later].sort((a, b) => Number(a.slice(3)) - Number(b.slice(3))));
    expect(new Set(sent)).toEqual(new Set(Array.from({ length: 10 }, (_, i) => `id-${i + 1}`)));
  });

  it('a drain that runs out of time ends stopped, naming what stays unacked (a normal end, not a failure)', async () => {
    const { source, target, session } = setup();
    target.outcome = () => 'hold';
    await session.open();
    source.deliver(msg(1));
    source.deliver(msg(2));
    await until('2 sent', () => target.sent.length === 2, quick());
    target.held.splice(0, 1).forEach((r) => r());
    expect(await session.drain(100)).toEqual({ kind: 'stopped', unfinished: 1 });
    expect(source.acked).toEqual([1]);
  });

  it('a suspect resent alone whose outcome is lost is given back as uncertain: its redelivery is flagged', async () => {
    const cache = new MemoryIdCache({ size: 100, lease: 1000 });
    const { source, target, deadLetter, session } = setup({}, { cache, deadLetter: true });
    target.outcome = () => 'hold';
    await session.open();
    source.deliver(msg(1));
    source.deliver(msg(2));
    await until('2 sent', () => target.sent.length === 2, quick());
    // Refused without saying which: each is resent alone; the first resend's connection is lost before its confirm.
    target.heldReject.splice(0).forEach((r) => r(new MessageRejectedError('precondition-failed', 'channel closed', { ambiguous: true })));
    await until('a suspect resent', () => target.sent.length === 3, quick());
    target.heldReject.splice(0).forEach((r) => r(new TransientError('connection lost', { outcomeUnknown: true })));
    await session.finished;
    expect(source.acked).toEqual([]);
    expect(deadLetter!.sent).toEqual([]);
    // The next session's reservation of that ID: the copy may be at the target, so its resend must carry the flag.
    const suspect = text(target.sent[2]!.headers._AMQ_DUPL_ID);
    expect(await cache.reserve('fake://target', suspect, 'next.1')).toEqual({ status: 'reserved', possibleDuplicate: true });
  });

  it('drains on stop: stops consuming, finishes in-flight messages, then closes', async () => {
    const { source, target, session } = setup();
    target.outcome = () => 'hold';
    await session.open();
    source.deliver(msg(1));
    await until('1 sent', () => target.sent.length === 1, quick());
    const drained = session.drain(2000);
    await sleep(20);
    expect(source.consuming).toBe(false);
    target.held.forEach((r) => r());
    expect(await drained).toEqual({ kind: 'drained' });
    expect(source.acked).toEqual([1]);
    expect(source.closed && target.closed).toBe(true);
  });

  it('sets a redelivery aside while a crashed owner holds a stamp it may stand for, and lets later messages pass', async () => {
    const cache = new MemoryIdCache({ size: 100, lease: 300 });
    // A crashed process stamped an identical message and never finished it: its lease (300 ms) still runs.
    await cache.recordStamp('fake://source', fingerprint(msg(9, null)), 'bb-crashed', 'dead.1.1');
    const { source, target, session } = setup({}, { cache });
    await session.open();
    source.deliver(msg(9, null), true);
    source.deliver(msg(1));
    source.deliver(msg(2));
    await until('2 acked', () => source.acked.length === 2, quick());
    expect(target.sent.map((m) => m.headers._AMQ_DUPL_ID)).toEqual(['id-1', 'id-2']);
    // Once the lease ran out, the redelivery takes that stamp: it was never forwarded.
    await until('3 acked', () => source.acked.length === 3, quick(3000));
    expect(target.sent[2]?.headers._AMQ_DUPL_ID).toBe('bb-crashed');
  });

  it('renews the stamps of messages in flight, and ends the session when one was taken over', async () => {
    const cache = new MemoryIdCache({ size: 100, lease: 150 });
    const { source, target, session } = setup({}, { cache });
    target.outcome = () => 'hold';
    await session.open();
    source.deliver(msg(1, null));
    await until('1 sent', () => target.sent.length === 1, quick());
    const id = text(target.sent[0]?.headers._AMQ_DUPL_ID);
    const fp = fingerprint(msg(1, null));
    // Held far longer than a lease: still this delivery's, never claimable by a redelivery elsewhere.
    await sleep(500);
    const other = new StampClaims({ cache, sourceAddress: 'fake://source', targetAddress: 'fake://target', ownPrefix: 'elsewhere.', call: (fn) => fn() });
    expect(await other.claim(fp, 'elsewhere.1', 0)).toEqual(expect.objectContaining({ status: 'busy' }));
    // Taken anyway (as after an outage of the cache longer than the lease): the session ends, nothing is acked.
    await cache.forgetStamp('fake://source', fp, id);
    const end = await session.finished;
    expect(end.kind).toBe('failed');
    expect(end.kind === 'failed' && end.error.message).toMatch(/taken over/);
    expect(source.acked).toEqual([]);
  });
});
