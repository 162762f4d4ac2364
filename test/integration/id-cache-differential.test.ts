/**
 * What this proves: for random sequences of IdCache calls (≤ 30 steps, 150 runs; ID_CACHE_DIFF_RUNS sets more) —
 * reserve / commit / release certain and uncertain / recorded / stamp record / stamp claim, raw and as a session makes
 * it / renewStamps / markStampDone / releaseStamp / releaseAckedStamp / forgetStamp, followed by probes that read back what each holds —
 * the in-memory cache (persist-id-cache: false, src/cache/memory-id-cache.ts) answers every call exactly as the Redis
 * cache (src/cache/redis-id-cache.ts and its Lua scripts: what production runs, and the reference here) does, given
 * the same semantics: a small id-cache-size (3–5, so the circular eviction runs), with and without id-cache-ttl, a few
 * addresses, IDs (short ones, and IDs over the 128 bytes a cache keeps by their SHA-256), tokens and session prefixes.
 *
 * Time: Redis takes its clock from the server (TIME) and cannot be given another, so the random sequences run on the
 * real clock with a lease, ttl, marker retention and stamp ttl far longer than a run: nothing expires in them, and they
 * test every decision that does not depend on time. (The one time-based rule that does appear, "late" stamps against a
 * claim's `since`, is kept deterministic: see AFTER_BUSY_MS in test/support/id-cache-pair.ts.) Expiry — leases,
 * takeovers, markers, id-cache-ttl, the stamp record's ttl and what refreshes it, the reservation keys of a quiet
 * address — is checked by fixed sequences with short durations and real waits, far from their boundaries, below.
 *
 * Not compared: vouchesFor (by design the Redis cache flags after a suspected loss, the in-memory one never loses data
 * while it lives) and the exact `since` of a busy answer (each cache's own clock).
 */
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { CachePair, closePairs, deleteKeysUnder, type PairOptions, type Since, type Step } from '../support/id-cache-pair.js';
import { uniqueName } from '../support/services.js';

const BASE = uniqueName('idc-diff');
let runs = 0;

afterAll(async () => {
  await deleteKeysUnder(BASE);
  await closePairs();
});

/** A step and, optionally, what Redis must answer to it (fixed examples say what they expect). */
type Checked = Step | [Step, unknown];

/** Runs `steps` against a fresh pair and requires the same answer from both at every step. */
async function compare(options: PairOptions, steps: readonly Checked[]): Promise<void> {
  runs += 1;
  const pair = new CachePair(`${BASE}-${runs}`, options);
  try {
    for (const [i, item] of steps.entries()) {
      const [step, expected] = Array.isArray(item) ? item : [item, undefined];
      const { memory, redis } = await pair.run(step);
      const where = `step ${i} ${JSON.stringify(step)}: memory answered ${JSON.stringify(memory)}, redis ${JSON.stringify(redis)}`;
      if (expected !== undefined) expect(redis, where).toEqual(expected);
      expect(memory, where).toEqual(redis);
    }
  } finally {
    await pair.close();
  }
}

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;

const ADDRESSES = ['q/out-1', 'q/out-2'] as const;
/**
 * More IDs than the smallest id-cache-size, so that commits evict; among them IDs on both sides of the 128 bytes a
 * cache keeps as they are (src/core/id-cache.ts idCacheKey: longer ones are kept by their SHA-256), two long ones that
 * differ only in their last character, and one shaped like a cache key.
 */
const IDS = ['a', 'b', 'c', 'd', 'e', 'f', '\u00e9'.repeat(64), `${'\u00e9'.repeat(64)}z`, 'L'.repeat(300), `${'L'.repeat(299)}M`, 'sha256:abc'] as const;
/** The IDs stamps are made with: fewer, so that stamp calls meet each other's stamps often. */
const STAMP_IDS = ['a', 'b', 'c'] as const;
/** Tokens `<session>.<n>`: the session prefixes below own some of them. */
const TOKENS = ['s1.1', 's1.2', 's2.1', 's3.1'] as const;
const PREFIXES = ['s1.', 's2.', 's9.'] as const;
const SOURCE = 'q/in';
const FPS = ['fp-1', 'fp-2'] as const;

const address = fc.constantFrom(...ADDRESSES);
const id = fc.constantFrom(...IDS);
const stampId = fc.constantFrom(...STAMP_IDS);
/**
 * Now and then a token the scripts must parse around (it holds their separator and looks like a lease and a mark) or
 * an empty one (refused by both: only that both fail is compared).
 */
const token = fc.oneof({ weight: 12, arbitrary: fc.constantFrom(...TOKENS) }, { weight: 1, arbitrary: fc.constantFrom('s2.|9|d', '') });
/** Mostly one fingerprint: the claim rules are about the stamps of one. */
const fp = fc.oneof({ weight: 4, arbitrary: fc.constant(FPS[0]) }, { weight: 1, arbitrary: fc.constant(FPS[1]) });
const since: fc.Arbitrary<Since> = fc.constantFrom('now', 'ancient', 'last-busy');
const ids = fc.uniqueArray(stampId, { maxLength: 3 });
const source = fc.constant(SOURCE);

const step: fc.Arbitrary<Step> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ op: fc.constant('reserve' as const), address, id, token }) },
  { weight: 4, arbitrary: fc.record({ op: fc.constant('commit' as const), address, id, token }) },
  { weight: 3, arbitrary: fc.record({ op: fc.constant('release' as const), address, id, token, uncertain: fc.boolean() }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('recorded' as const), address, ids: fc.uniqueArray(id, { maxLength: 4 }) }) },
  { weight: 4, arbitrary: fc.record({ op: fc.constant('recordStamp' as const), source, fp, id: stampId, token, flagged: fc.boolean() }) },
  {
    weight: 3,
    arbitrary: fc.record({
      op: fc.constant('claimStamp' as const),
      source,
      fp,
      token,
      ownPrefix: fc.constantFrom(...PREFIXES),
      since,
      recorded: ids,
      notRecorded: ids,
    }),
  },
  { weight: 3, arbitrary: fc.record({ op: fc.constant('claim' as const), source, fp, token, ownPrefix: fc.constantFrom(...PREFIXES), since, address }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('renewStamps' as const), source, fp, held: fc.array(fc.record({ id: stampId, token }), { maxLength: 3 }) }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('markStampDone' as const), source, fp, id: stampId, token }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('releaseStamp' as const), source, fp, id: stampId, token }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('releaseAckedStamp' as const), source, fp, id: stampId, token }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('forgetStamp' as const), source, fp, id }) },
);

/** After the random steps: what both hold, read through the port (these probes write too, but nothing follows them). */
function probes(): Step[] {
  const out: Step[] = [];
  for (const a of ADDRESSES) {
    out.push({ op: 'recorded', address: a, ids: [...IDS] });
    for (const i of IDS) out.push({ op: 'reserve', address: a, id: i, token: 'probe.1' });
  }
  for (const f of FPS) {
    // A holder's claim is a replay: it names the stamp the token holds and its marks, and changes nothing.
    for (const t of TOKENS) out.push({ op: 'claimStamp', source: SOURCE, fp: f, token: t, ownPrefix: 'probe.', since: 'now', recorded: [], notRecorded: [] });
    out.push({ op: 'claim', source: SOURCE, fp: f, token: 'probe.2', ownPrefix: 'probe.', since: 'now', address: ADDRESSES[0] });
  }
  return out;
}

/** Long enough that nothing expires within a run (a run takes milliseconds). */
const options: fc.Arbitrary<PairOptions> = fc.record({
  size: fc.integer({ min: 3, max: 5 }),
  ttl: fc.constantFrom(undefined, HOUR),
  idleExpiry: fc.constantFrom(undefined, 2 * HOUR),
  lease: fc.constant(10 * MINUTE),
});

describe('MemoryIdCache answers as RedisIdCache does', () => {
  it('for random sequences of calls (no expiry within a run)', async () => {
    await fc.assert(
      fc.asyncProperty(options, fc.array(step, { minLength: 1, maxLength: 30 }), async (o, steps) => {
        await compare(o, [...steps, ...probes()]);
      }),
      { numRuns: Number(process.env.ID_CACHE_DIFF_RUNS ?? 150) },
    );
  });
});

const S = SOURCE;
const OUT = ADDRESSES[0];
const ok = 'ok';
const busy = { status: 'busy' };
const reserved = { status: 'reserved', possibleDuplicate: false };
const reservedPd = { status: 'reserved', possibleDuplicate: true };
const sleep = (ms: number): Step => ({ op: 'sleep', ms });
const reserve = (id: string, token: string, address: string = OUT): Step => ({ op: 'reserve', address, id, token });
const release = (id: string, token: string, uncertain: boolean): Step => ({ op: 'release', address: OUT, id, token, uncertain });
const recordStamp = (id: string, token: string, flagged = false, fp = 'fp-1'): Step => ({ op: 'recordStamp', source: S, fp, id, token, flagged });
/** A raw claim by another session (prefix s9.), since 0. */
const claimStamp = (token: string, recorded: string[] = [], notRecorded: string[] = [], fp = 'fp-1'): Step => ({
  op: 'claimStamp',
  source: S,
  fp,
  token,
  ownPrefix: 's9.',
  since: 'now',
  recorded,
  notRecorded,
});
/** A claim as a session makes it, asking OUT. */
const claim = (token: string): Step => ({ op: 'claim', source: S, fp: 'fp-1', token, ownPrefix: 's9.', since: 'now', address: OUT });

/** Shrunk counterexamples of the property above (each failed against the MemoryIdCache before the fix). */
describe('MemoryIdCache answers as RedisIdCache does: found by the property', () => {
  const o: PairOptions = { size: 3, lease: 10 * MINUTE };

  it('a flagged stamp marked done (dead-lettered) is done, no longer flagged: one mark, as in stamp-entry.inc.lua', async () => {
    await compare(o, [
      [recordStamp('b', 's1.2', true, 'fp-2'), ok],
      [{ op: 'markStampDone', source: S, fp: 'fp-2', id: 'b', token: 's1.2' }, ok],
      // The holder's replay: memory said possibleDuplicate: true (its flag survived as a second boolean).
      [claimStamp('s1.2', [], [], 'fp-2'), { status: 'claimed', id: 'b', possibleDuplicate: false, done: true }],
    ]);
  });

  it('a flagged stamp a claimer found recorded at the target is done, no longer flagged', async () => {
    await compare(o, [
      [recordStamp('a', 's1.1', true), ok],
      // Held by a live owner: wait; but the stamp is marked done meanwhile.
      [claimStamp('s1.2', ['a']), busy],
      [claimStamp('s1.1'), { status: 'claimed', id: 'a', possibleDuplicate: false, done: true }],
    ]);
  });

  it('rule 3 hands the only, done stamp back unflagged even when it was made flagged', async () => {
    await compare(o, [
      [recordStamp('a', 's1.1', true), ok],
      [{ op: 'releaseStamp', source: S, fp: 'fp-1', id: 'a', token: 's1.1' }, ok],
      [claimStamp('s2.1', ['a']), { status: 'claimed', id: 'a', possibleDuplicate: false, done: true }],
    ]);
  });
});

/**
 * Time: fixed sequences on the real clock (Redis's is the server's), each far (≥ 400 ms) from the boundary it
 * crosses, so that a slow machine cannot turn one answer into the other. They run concurrently (own keys each).
 */
describe.concurrent('MemoryIdCache answers as RedisIdCache does: expiry', () => {
  it('a stamp record lives stampTtl after the last write, and a claim that marks a stamp done is a write', async () => {
    await compare({ size: 5, lease: 10 * MINUTE, stampTtl: 1500 }, [
      [recordStamp('a', 's1.1'), ok],
      [sleep(900), ok],
      // Found recorded at the target: marked done (PEXPIRE in stamp-claim-1.lua); its holder lives: wait.
      [claimStamp('s2.1', ['a']), busy],
      [sleep(900), ok],
      // 1800 ms after the record, 900 after the mark: still there (memory had forgotten it: `none`).
      [claimStamp('s2.1'), busy],
    ]);
  });

  it('renewStamps with no stamp held writes nothing: it does not extend the record', async () => {
    await compare({ size: 5, lease: 10 * MINUTE, stampTtl: 1500 }, [
      [recordStamp('a', 's1.1'), ok],
      [sleep(900), ok],
      [{ op: 'renewStamps', source: S, fp: 'fp-1', held: [] }, []],
      [sleep(900), ok],
      // Gone 1500 ms after the record (memory had extended it to 900 + 1500 and answered busy).
      [claimStamp('s2.1'), { status: 'none', possibleDuplicate: false }],
    ]);
  });

  it('a stamp record another write kept alive is still there past the first stampTtl', async () => {
    await compare({ size: 5, lease: 10 * MINUTE, stampTtl: 1500 }, [
      [recordStamp('a', 's1.1'), ok],
      [sleep(900), ok],
      [{ op: 'renewStamps', source: S, fp: 'fp-1', held: [{ id: 'a', token: 's1.1' }] }, []],
      [sleep(900), ok],
      // Still there (and not done: the claimer is asked to look it up at the target). A claim that only reads writes nothing.
      [claimStamp('s2.1'), { status: 'check', ids: ['a'] }],
      [sleep(1900), ok],
      [claimStamp('s2.1'), { status: 'none', possibleDuplicate: false }],
    ]);
  });

  it('an abandoned reservation is forgotten once its lease + marker retention ran out', async () => {
    await compare({ size: 5, lease: 300, markerRetention: 1000 }, [
      [reserve('x', 's1.1'), reserved],
      [reserve('y', 's1.1', ADDRESSES[1]), reserved],
      [sleep(700), ok],
      // Within lease + retention: the abandoned reservation is taken over, flagged.
      [reserve('y', 's2.1', ADDRESSES[1]), reservedPd],
      [sleep(1000), ok],
      // 1700 ms after x's reserve (> 300 + 1000): forgotten, so not flagged (reserve-4.lua; memory once kept it).
      [reserve('x', 's2.1'), reserved],
    ]);
  });

  it('an abandoned reservation cleaned up by another reserve is a marker for marker-retention', async () => {
    await compare({ size: 5, lease: 300, markerRetention: 1000 }, [
      [reserve('x', 's1.1'), reserved],
      [sleep(700), ok],
      // Housekeeping turns x's reservation into a marker until 700 + 1000.
      [reserve('y', 's1.1'), reserved],
      [sleep(500), ok],
      [reserve('x', 's2.1'), reservedPd],
      [release('x', 's2.1', false), ok],
      [sleep(1500), ok],
      // The release re-marked x (its reservation was a possible duplicate) at 1200; 1500 later it is forgotten.
      [reserve('x', 's3.1'), reserved],
    ]);
  });

  it('an uncertain marker is remembered for marker-retention, then forgotten', async () => {
    await compare({ size: 5, lease: 10 * MINUTE, markerRetention: 800 }, [
      [reserve('x', 's1.1'), reserved],
      [release('x', 's1.1', true), ok],
      [sleep(300), ok],
      [reserve('x', 's2.1'), reservedPd],
      [release('x', 's2.1', true), ok],
      [sleep(1300), ok],
      [reserve('x', 's3.1'), reserved],
    ]);
  });

  it('an address that sees no reserve or commit for the idle expiry forgets its IDs; a reserve keeps them, as a commit does', async () => {
    const OTHER = ADDRESSES[1];
    await compare({ size: 3, idleExpiry: 1000, lease: 10 * MINUTE }, [
      [{ op: 'commit', address: OUT, id: 'a', token: 's1.1' }, ok],
      [{ op: 'commit', address: OTHER, id: 'b', token: 's1.1' }, ok],
      [sleep(600), ok],
      // A reserve on OUT (answered duplicate) keeps its IDs for another idle expiry; OTHER sees nothing.
      [reserve('a', 's1.2'), { status: 'duplicate' }],
      [sleep(600), ok],
      [{ op: 'recorded', address: OUT, ids: ['a'] }, [true]],
      [{ op: 'recorded', address: OTHER, ids: ['b'] }, [false]],
      [reserve('b', 's1.2', OTHER), reserved],
      [sleep(1300), ok],
      [{ op: 'recorded', address: OUT, ids: ['a'] }, [false]],
      [{ op: 'commit', address: OUT, id: 'c', token: 's1.3' }, ok],
      [{ op: 'commit', address: OUT, id: 'd', token: 's1.3' }, ok],
      [{ op: 'recorded', address: OUT, ids: ['a', 'c', 'd'] }, [false, true, true]],
    ]);
  });

  it('a recorded ID older than id-cache-ttl counts as absent, and is recorded afresh', async () => {
    await compare({ size: 3, ttl: 800, lease: 10 * MINUTE }, [
      [{ op: 'commit', address: OUT, id: 'a', token: 's1.1' }, ok],
      [reserve('a', 's1.2'), { status: 'duplicate' }],
      [sleep(1300), ok],
      [{ op: 'recorded', address: OUT, ids: ['a'] }, [false]],
      [reserve('a', 's1.2'), reserved],
      [{ op: 'commit', address: OUT, id: 'a', token: 's1.2' }, ok],
      [{ op: 'commit', address: OUT, id: 'b', token: 's1.2' }, ok],
      [{ op: 'recorded', address: OUT, ids: ['a', 'b'] }, [true, true]],
    ]);
  });

  it('a stamp whose lease ran out is claimed by another, and its old holder is told it lost it', async () => {
    await compare({ size: 5, lease: 400 }, [
      [recordStamp('a', 's1.1', true), ok],
      [claim('s2.1'), [{ status: 'check', ids: ['a'] }, [false], busy]],
      [sleep(900), ok],
      [claim('s2.1'), [{ status: 'check', ids: ['a'] }, [false], { status: 'claimed', id: 'a', possibleDuplicate: true, done: false }]],
      [{ op: 'renewStamps', source: S, fp: 'fp-1', held: [{ id: 'a', token: 's1.1' }] }, ['a']],
      [reserve('x', 's1.1'), reserved],
      [sleep(900), ok],
      [reserve('x', 's2.1'), reservedPd],
    ]);
  });
});
