/**
 * The bridge end to end on AMQP: the real `broker-bridge run` process between queues of the real RabbitMQ, with the
 * duplicate-ID cache in the real Redis. Every test asserts what the target (and dead-letter) queues hold.
 */
import { describe, expect, it } from 'vitest';
import type { ReceivedMessage, TestMessage } from '../support/amqp.js';
import { useBridgeFixture } from '../support/bridge-fixture.js';
import { services } from '../support/services.js';
import { quietAfterCrash, sleep } from '../support/wait.js';

const ID = '_AMQ_DUPL_ID';
const POSSIBLE_DUP = 'x-bridge-possible-duplicate';

const fx = useBridgeFixture();
const { queues: newQueues, start, config } = fx;

function numbered(n: number, from = 0, withId = true): TestMessage[] {
  return Array.from({ length: n }, (_, k) => {
    const i = from + k;
    return {
      body: Buffer.from(`message ${i} ${'x'.repeat(64)}`),
      options: withId ? { headers: { [ID]: `id-${i}` }, messageId: undefined } : { headers: { seq: i } },
    };
  });
}

function idOf(m: ReceivedMessage): string {
  const v = m.headers[ID];
  return Buffer.isBuffer(v) ? v.toString() : String(v);
}

function seqOf(m: ReceivedMessage): number {
  return Number(/^message (\d+)/.exec(m.body.toString())?.[1]);
}

describe('AMQP → AMQP bridge', () => {
  it('forwards 5,000 distinct messages once each and drops 1,000 re-sent IDs, preserving bodies, headers and properties', async () => {
    const [src, dst] = await newQueues('src', 'dst');
    // The cache must hold every ID for the re-sends to be recognised (the default 2000 would have evicted id-0..).
    const { yaml } = config({ bridges: [{ sourceQueue: src!, target: `queue: "${dst}"`, extra: { prefetch: 1000 } }], idCache: { 'id-cache-size': 10000 } });
    const bridge = await start(yaml);

    const body = (i: number) => Buffer.concat([Buffer.from(`message ${i} `), Buffer.from([0, 1, 2, 255, 254, 0]), Buffer.from('é✓')]);
    const original: TestMessage[] = Array.from({ length: 5000 }, (_, i) => ({
      body: body(i),
      options: {
        headers: { [ID]: `id-${i}`, 'x-int': i, 'x-str': `s${i}`, 'x-bool': i % 2 === 0, 'x-nested': { a: 1, b: 'two' } },
        contentType: 'application/octet-stream',
        contentEncoding: 'identity',
        correlationId: `corr-${i}`,
        replyTo: 'replies',
        messageId: `mid-${i}`,
        type: 'order.created',
        appId: 'test-suite',
        priority: 3,
        timestamp: 1_700_000_000 + i,
      },
    }));
    await fx.amqp.publish(src!, original);
    await fx.amqp.publish(src!, original.slice(0, 1000));

    await fx.amqp.waitForCount(src!, (n) => n === 0);
    expect(await fx.amqp.settledCount(dst!)).toBe(5000);
    const got = await fx.amqp.drain(dst!);
    expect(got).toHaveLength(5000);
    const ids = got.map(idOf);
    expect(new Set(ids).size).toBe(5000);
    // Order is preserved per bridge: the originals arrive in publish order.
    expect(ids).toEqual(Array.from({ length: 5000 }, (_, i) => `id-${i}`));
    for (const m of got) {
      const i = seqOf(m);
      expect(m.body.equals(body(i))).toBe(true);
      expect(m.headers['x-int']).toBe(i);
      expect(m.headers['x-str']).toBe(`s${i}`);
      expect(m.headers['x-bool']).toBe(i % 2 === 0);
      expect(m.headers['x-nested']).toEqual({ a: 1, b: 'two' });
      expect(m.headers[POSSIBLE_DUP]).toBeUndefined();
      expect(m.properties).toMatchObject({
        contentType: 'application/octet-stream',
        contentEncoding: 'identity',
        correlationId: `corr-${i}`,
        replyTo: 'replies',
        messageId: `mid-${i}`,
        type: 'order.created',
        appId: 'test-suite',
        priority: 3,
        timestamp: 1_700_000_000 + i,
        deliveryMode: 2,
      });
    }
    // The re-sends leave the target as it was: the drops are counted once the bridge has logged them (at most prefetch
    // of them may still be in the bridge when the source shows nothing ready).
    await bridge.waitForLog((l) => l.msg.startsWith('duplicate dropped'), 30_000, 1000);
    expect(bridge.count((l) => l.msg.startsWith('duplicate dropped'))).toBe(1000);
  });

  it('stamps IDs and keeps them stable across a SIGKILL mid-stream: nothing lost, no message under two IDs', async () => {
    const [src, dst] = await newQueues('src', 'dst');
    const lease = 3000;
    const { yaml } = config({ bridges: [{ sourceQueue: src!, target: `queue: "${dst}"`, extra: { prefetch: 200 } }], idCache: { 'reservation-lease': lease } });
    const total = 4000;
    await fx.amqp.publish(src!, numbered(total, 0, false));
    let bridge = await start(yaml);
    await fx.amqp.waitForCount(dst!, (n) => n >= 1000);
    await bridge.kill('SIGKILL');
    const atKill = await fx.amqp.count(dst!);
    expect(atKill).toBeLessThan(total);
    bridge = await start(yaml);
    await fx.amqp.waitForCount(src!, (n) => n === 0);
    // The source has nothing ready, but the new process may still hold redeliveries aside: those whose stamp the killed
    // one held until its lease runs out (at most `lease` after the kill). The target is settled only after a quiet
    // period longer than that; a shorter one (CI, once) read 3,901 here while 99 were still to come.
    const delivered = await fx.amqp.settledCount(dst!, quietAfterCrash(lease));
    const got = await fx.amqp.drain(dst!);
    expect(got.length).toBe(delivered);

    const idsBySeq = new Map<number, Set<string>>();
    for (const m of got) {
      const id = idOf(m);
      expect(id).toMatch(/^bb-[0-9a-f-]{36}$/);
      const s = idsBySeq.get(seqOf(m)) ?? new Set();
      s.add(id);
      idsBySeq.set(seqOf(m), s);
    }
    // Nothing lost.
    expect([...idsBySeq.keys()].sort((a, b) => a - b)).toEqual(Array.from({ length: total }, (_, i) => i));
    // No source message reached the target under two different IDs.
    const twoIds = [...idsBySeq.entries()].filter(([, s]) => s.size > 1);
    expect(twoIds).toEqual([]);
    // Distinct messages never share an ID.
    expect(new Set(got.map(idOf)).size).toBe(total);
    // Any extra copy (crash between confirm and commit) is flagged.
    const counts = new Map<string, ReceivedMessage[]>();
    for (const m of got) counts.set(idOf(m), [...(counts.get(idOf(m)) ?? []), m]);
    for (const copies of counts.values()) {
      const flagged = copies.filter((c) => c.headers[POSSIBLE_DUP] === true).length;
      expect(flagged).toBeGreaterThanOrEqual(copies.length - 1);
    }
  });

  it('forwards 1,000 messages with byte-identical bodies and no ID, each under its own stamped ID', async () => {
    const [src, dst] = await newQueues('src', 'dst');
    const { yaml } = config({ bridges: [{ sourceQueue: src!, target: `queue: "${dst}"` }] });
    await start(yaml);
    const same = Buffer.from('the very same bytes');
    await fx.amqp.publish(src!, Array.from({ length: 1000 }, () => ({ body: same })));
    await fx.amqp.waitForCount(src!, (n) => n === 0);
    expect(await fx.amqp.settledCount(dst!)).toBe(1000);
    const got = await fx.amqp.drain(dst!);
    expect(got.every((m) => m.body.equals(same))).toBe(true);
    expect(new Set(got.map(idOf)).size).toBe(1000);
  });

  it('id-cache-size 10: after 11 IDs a re-send of the 1st is forwarded again, a re-send of the 11th is dropped', async () => {
    const [src, dst] = await newQueues('src', 'dst');
    const { yaml } = config({ bridges: [{ sourceQueue: src!, target: `queue: "${dst}"`, extra: { prefetch: 1 } }], idCache: { 'id-cache-size': 10 } });
    await start(yaml);
    await fx.amqp.publish(src!, numbered(11));
    await fx.amqp.waitForCount(dst!, (n) => n === 11);
    await fx.amqp.publish(src!, [numbered(1, 0)[0]!, numbered(1, 10)[0]!]);
    await fx.amqp.waitForCount(src!, (n) => n === 0);
    expect(await fx.amqp.settledCount(dst!)).toBe(12);
    const got = (await fx.amqp.drain(dst!)).map(idOf);
    expect(got).toEqual([...Array.from({ length: 11 }, (_, i) => `id-${i}`), 'id-0']);
  });

  it.each([
    [true, 0],
    [false, 50],
  ])('persist-id-cache %s: re-sent IDs after a restart are dropped (true) or forwarded again (false)', async (persist, expectedAgain) => {
    const [src, dst] = await newQueues('src', 'dst');
    const { yaml } = config({ bridges: [{ sourceQueue: src!, target: `queue: "${dst}"` }], idCache: { 'persist-id-cache': persist } });
    let bridge = await start(yaml);
    await fx.amqp.publish(src!, numbered(50));
    await fx.amqp.waitForCount(dst!, (n) => n === 50);
    expect(await bridge.stop()).toBe(0);
    bridge = await start(yaml);
    await fx.amqp.publish(src!, numbered(50));
    await fx.amqp.waitForCount(src!, (n) => n === 0);
    expect(await fx.amqp.settledCount(dst!)).toBe(50 + expectedAgain);
    // Warned once at start, not once per layer that notices it.
    expect(bridge.count((l) => l.level === 40 && /in memory/.test(l.msg))).toBe(persist ? 0 : 1);
    // No log line binds a key twice (pino writes both; a JSON reader keeps one of them).
    for (const line of bridge.lines) {
      const keys = [...line.matchAll(/[{,]"([^"]+)":/g)].map((m) => m[1]);
      const twice = keys.filter((k, i) => keys.indexOf(k) !== i && ['endpoint', 'role', 'component', 'bridge', 'session', 'msg', 'level', 'time'].includes(k!));
      expect(twice, line).toEqual([]);
    }
  });

  it('two bridge processes on one source queue and one Redis forward each re-sent ID once', async () => {
    const [src, dst] = await newQueues('src', 'dst');
    const { yaml } = config({ bridges: [{ sourceQueue: src!, target: `queue: "${dst}"`, extra: { prefetch: 50 } }], idCache: { replicas: 2 } });
    await Promise.all([start(yaml), start(yaml)]);
    // Every ID three times, interleaved so both replicas see copies of the same ID at the same time.
    const msgs = numbered(2000);
    await fx.amqp.publish(src!, msgs.flatMap((m) => [m, m, m]));
    await fx.amqp.waitForCount(src!, (n) => n === 0);
    // The source's count is of ready messages: the last copies may still be held, a replica waiting on the other's
    // reservation of their ID. CI under load once found the target quiet for 1.5 s at 1,998; so wait for all 2,000
    // (a loss fails here, naming the count), then for quiet (an extra copy fails below).
    await fx.amqp.waitForCount(dst!, (n) => n >= 2000, 60_000);
    expect(await fx.amqp.settledCount(dst!)).toBe(2000);
    const ids = (await fx.amqp.drain(dst!)).map(idOf);
    expect(new Set(ids).size).toBe(2000);
  });

  it('holds messages while Redis is unreachable, forwards nothing unchecked, and resumes by itself', async () => {
    const [src, dst] = await newQueues('src', 'dst');
    const proxy = await fx.proxy(services.redisUrl);
    const { yaml } = config({ bridges: [{ sourceQueue: src!, target: `queue: "${dst}"`, extra: { prefetch: 100 } }], redisUrl: proxy.rewrite(services.redisUrl) });
    const bridge = await start(yaml);
    await fx.amqp.publish(src!, numbered(500));
    await fx.amqp.waitForCount(dst!, (n) => n === 500);

    proxy.cut();
    // The same 500 IDs again, plus 500 new ones, while the cache is away.
    await fx.amqp.publish(src!, [...numbered(500), ...numbered(500, 500)]);
    await bridge.waitForLog((l) => /cache unreachable/.test(l.msg), 30_000);
    await sleep(3000);
    // Nothing was forwarded without a check: neither the re-sent IDs nor the new ones.
    expect(await fx.amqp.count(dst!)).toBe(500);
    // Counts ready messages only: up to 100 (the prefetch window) are held unacked by the bridge.
    expect(await fx.amqp.count(src!)).toBeGreaterThanOrEqual(900);

    proxy.resume();
    await fx.amqp.waitForCount(src!, (n) => n === 0, 60_000);
    expect(await fx.amqp.settledCount(dst!)).toBe(1000);
    const ids = (await fx.amqp.drain(dst!)).map(idOf);
    expect(new Set(ids)).toEqual(new Set(Array.from({ length: 1000 }, (_, i) => `id-${i}`)));
    expect(bridge.count((l) => /cache unreachable/.test(l.msg))).toBe(1);
  });

  it.each([
    ['a missing exchange', (x: string) => `exchange: "${x}-missing", routing-key: k`, 'not-found'],
    ['an exchange with no binding', (x: string) => `exchange: "amq.direct", routing-key: "${x}-nobody"`, 'unroutable'],
  ])('does not treat a message to %s as delivered: dead-letters it after max-delivery-attempts with the reason', async (_what, target, reason) => {
    const [src, dlq] = await newQueues('src', 'dlq');
    const { yaml } = config({
      bridges: [{ sourceQueue: src!, target: target(src!), deadLetter: `connection: rabbit, queue: "${dlq}"`, extra: { 'max-delivery-attempts': 3 } }],
    });
    const bridge = await start(yaml);
    await fx.amqp.publish(src!, numbered(5));
    await fx.amqp.waitForCount(dlq!, (n) => n >= 5, 60_000);
    expect(await fx.amqp.settledCount(dlq!)).toBe(5);
    expect(await fx.amqp.count(src!)).toBe(0);
    const dead = await fx.amqp.drain(dlq!);
    expect(dead.map(idOf).sort()).toEqual(['id-0', 'id-1', 'id-2', 'id-3', 'id-4']);
    for (const m of dead) {
      expect(m.headers['x-bridge-dead-letter-reason']).toBe(reason);
      expect(String(m.headers['x-bridge-dead-letter-detail'])).not.toBe('');
      expect(m.headers['x-bridge-delivery-attempts']).toBe(3);
      expect(m.body.toString()).toMatch(/^message \d/);
    }
    expect(bridge.count((l) => /refused a message: sending it again/.test(l.msg))).toBe(10);
  });

  it('drains on SIGTERM mid-stream: exit 0, and after a restart every message is at the target exactly once', async () => {
    const [src, dst] = await newQueues('src', 'dst');
    // loss-window 0: this fresh address's first contact (a new deployment, or a loss while no bridge ran, for all the
    // bridge can tell) would otherwise flag the redeliveries of the next 5 minutes; this test is about drains.
    const { yaml } = config({ bridges: [{ sourceQueue: src!, target: `queue: "${dst}"`, extra: { prefetch: 200 } }], idCache: { 'id-cache-size': 10000, 'loss-window': 0 } });
    await fx.amqp.publish(src!, numbered(3000));
    let bridge = await start(yaml);
    await fx.amqp.waitForCount(dst!, (n) => n >= 500);
    expect(await bridge.stop()).toBe(0);
    expect(bridge.count((l) => /shutting down/.test(l.msg))).toBe(1);
    expect(await fx.amqp.count(dst!)).toBeLessThan(3000);
    bridge = await start(yaml);
    await fx.amqp.waitForCount(src!, (n) => n === 0);
    expect(await fx.amqp.settledCount(dst!)).toBe(3000);
    const got = await fx.amqp.drain(dst!);
    expect(new Set(got.map(idOf)).size).toBe(3000);
    // Nothing was forwarded twice: a clean drain leaves no send of unknown outcome behind.
    expect(got.filter((m) => m.headers[POSSIBLE_DUP] === true)).toHaveLength(0);
  });

  it('never prints credentials: URLs in logs and errors carry no user:password', async () => {
    const [src] = await newQueues('src');
    // A wrong password makes the bridge log connection errors, which are the likeliest place for a URL to leak.
    const secret = 'not-the-password-4711';
    const url = new URL(services.amqpUrl);
    url.password = secret;
    const { yaml } = config({ bridges: [{ sourceQueue: src!, target: 'queue: nowhere' }], amqpUrl: url.toString() });
    const bridge = fx.spawn(yaml);
    // The AMQP failure itself (other warnings, e.g. about the test Redis's persistence, may come first).
    await bridge.waitForLog((l) => l.level >= 40 && JSON.stringify(l).includes(`${url.hostname}:${url.port}`), 30_000);
    await sleep(500);
    const everything = JSON.stringify(bridge.logs) + bridge.stderr.join('');
    // The failure is reported, and names the broker (host and port), just not the credentials.
    expect(everything).toContain(`${url.hostname}:${url.port}`);
    expect(everything).not.toContain(secret);
    expect(everything).not.toMatch(/amqp:\/\/[^\s"@/]*:[^\s"@/]*@/);
  });

  it('stops with a clear error instead of dropping when a message is refused and there is no dead-letter destination', async () => {
    const [src] = await newQueues('src');
    const { yaml } = config({ bridges: [{ sourceQueue: src!, target: `exchange: "amq.direct", routing-key: "${src}-nobody"`, extra: { 'max-delivery-attempts': 2 } }] });
    const bridge = await start(yaml);
    await fx.amqp.publish(src!, numbered(3));
    expect(await bridge.waitExit()).toBe(1);
    expect(bridge.count((l) => /no dead-letter destination is configured/.test(l.msg))).toBeGreaterThan(0);
    // Nothing was dropped: every message is back in the source queue.
    expect(await fx.amqp.waitForCount(src!, (n) => n === 3)).toBe(3);
  });
});

/**
 * Byte-identical messages without any ID, through two bridge processes that are both SIGKILLed mid-stream (issue 12).
 * Identical messages are interchangeable, so a test can only count IDs: fewer distinct IDs than messages means one was
 * lost; an ID with two unflagged copies, or more IDs with an unflagged copy than messages, an undetected duplicate.
 * Before the fix a redelivery could take the stamp of a message that had been forwarded and acked, and was dropped as
 * its duplicate: at commit 0488464 this test lost 138–297 of 1,500 messages in every one of 5 rounds (src/core/stamp-claim.ts
 * says why).
 */
describe('AMQP → AMQP: byte-identical messages without IDs, two bridge processes, both SIGKILLed mid-stream', () => {
  const ROUNDS = Number(process.env.IDENTICAL_CRASH_ROUNDS ?? 5);
  const MESSAGES = 1500;

  interface RoundResult {
    distinctIds: number;
    unflaggedIds: number;
    copies: number;
    /** Unflagged copies of an ID beyond its first. */
    unflaggedExtra: number;
  }

  async function round(n: number): Promise<RoundResult | undefined> {
    const [src, dst] = await newQueues(`identical-src-${n}`, `identical-dst-${n}`);
    // A short lease: the killed owners' stamps and reservations are taken over within seconds.
    const lease = 2000;
    const { yaml } = config({ bridges: [{ sourceQueue: src!, target: `queue: "${dst}"`, extra: { prefetch: 200 } }], idCache: { 'reservation-lease': lease, replicas: 2 } });
    const same = Buffer.from(`the very same bytes, round ${n}`);
    await fx.amqp.publish(src!, Array.from({ length: MESSAGES }, () => ({ body: same })));

    const first = await Promise.all([start(yaml), start(yaml)]);
    // Kill both while the stream flows: hundreds forwarded, hundreds in flight or still in the sockets.
    await fx.amqp.waitForCount(dst!, (c) => c >= MESSAGES / 3, 60_000);
    await Promise.all(first.map((p) => p.kill('SIGKILL')));
    // Two fast processes can finish the whole stream within one poll of the queue depth (100 ms): then this round shows
    // nothing about a crash, and is played again.
    if ((await fx.amqp.count(dst!)) >= MESSAGES) return undefined;

    await Promise.all([start(yaml), start(yaml)]);
    await fx.amqp.waitForCount(src!, (c) => c === 0, 90_000);
    await fx.amqp.settledCount(dst!, quietAfterCrash(lease));
    const got = await fx.amqp.drain(dst!);
    await fx.stopAll();
    expect(got.every((m) => m.body.equals(same))).toBe(true);

    const byId = new Map<string, ReceivedMessage[]>();
    for (const m of got) byId.set(idOf(m), [...(byId.get(idOf(m)) ?? []), m]);
    let unflaggedIds = 0;
    let unflaggedExtra = 0;
    for (const copies of byId.values()) {
      const unflagged = copies.filter((c) => c.headers[POSSIBLE_DUP] !== true).length;
      if (unflagged > 0) unflaggedIds += 1;
      unflaggedExtra += Math.max(0, unflagged - 1);
    }
    return { distinctIds: byId.size, unflaggedIds, copies: got.length, unflaggedExtra };
  }

  it(`loses none of ${MESSAGES} messages and lets no duplicate pass unflagged, in each of ${ROUNDS} rounds`, async () => {
    const results: RoundResult[] = [];
    for (let n = 1, replays = 0; n <= ROUNDS; n++) {
      const r = await round(n + replays * 100);
      if (r !== undefined) results.push(r);
      else if (++replays <= 3) n--;
      else throw new Error('the stream finished before the SIGKILL in 4 tries: no round showed a crash mid-stream');
    }
    // One line per round in the output, so that a failing run shows how many were lost or doubled in each.
    console.log(
      results
        .map((r, i) => `round ${i + 1}: ${r.distinctIds} distinct IDs (${r.unflaggedIds} with an unflagged copy) for ${MESSAGES} messages, ${r.copies} copies, ${r.unflaggedExtra} unflagged extra`)
        .join('\n'),
    );
    for (const r of results) {
      expect(r.distinctIds).toBeGreaterThanOrEqual(MESSAGES);
      expect(r.unflaggedExtra).toBe(0);
      expect(r.unflaggedIds).toBeLessThanOrEqual(MESSAGES);
    }
  }, ROUNDS * 90_000);
});
