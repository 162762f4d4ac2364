/**
 * A MemoryIdCache and a RedisIdCache (on the test Redis, under a key prefix of their own) with the same semantics,
 * driven step by step with the same calls, for test/integration/id-cache-differential.test.ts. Each step's answers are
 * normalised so that the two can be compared with toEqual: a busy claim's `since` is each cache's own clock, so only
 * its presence is compared (and each cache is given back its own value when a later claim passes it).
 */
import { Redis } from 'ioredis';
import { MemoryIdCache } from '../../src/cache/memory-id-cache.js';
import { RedisIdCache } from '../../src/cache/redis-id-cache.js';
import { addressKeys, epochKey, stampKey, tagSafe } from '../../src/cache/keys.js';
import type { ClaimResult, IdCache, IdCacheSemantics } from '../../src/core/id-cache.js';
import { services } from './services.js';
import { sleep } from './wait.js';

/** `since` of a claim: 0 (= now), 1 (before every stamp: all held ones are late), or the cache's last busy answer. */
export type Since = 'now' | 'ancient' | 'last-busy';

export type Step =
  | { op: 'reserve'; address: string; id: string; token: string }
  | { op: 'commit'; address: string; id: string; token: string }
  | { op: 'release'; address: string; id: string; token: string; uncertain: boolean }
  | { op: 'recorded'; address: string; ids: string[] }
  | { op: 'recordStamp'; source: string; fp: string; id: string; token: string; flagged: boolean }
  /** One claimStamp call with the given answers of the target (arbitrary: not necessarily true). */
  | { op: 'claimStamp'; source: string; fp: string; token: string; ownPrefix: string; since: Since; recorded: string[]; notRecorded: string[] }
  /** A claim as a session makes it (src/core/stamp-claim.ts): claim, ask `address` what a check answer names, claim again. */
  | { op: 'claim'; source: string; fp: string; token: string; ownPrefix: string; since: Since; address: string }
  | { op: 'renewStamps'; source: string; fp: string; held: { id: string; token: string }[] }
  | { op: 'markStampDone'; source: string; fp: string; id: string; token: string }
  | { op: 'releaseStamp'; source: string; fp: string; id: string; token: string }
  | { op: 'releaseAckedStamp'; source: string; fp: string; id: string; token: string }
  | { op: 'forgetStamp'; source: string; fp: string; id: string }
  /** Lets real time pass (both caches run on the real clock: Redis has no other). */
  | { op: 'sleep'; ms: number };

/** What a step answered, comparable across the implementations. */
export type Answer = unknown;

/** The semantics both caches get (RedisIdCache's connection options are the helper's business). */
export type PairOptions = IdCacheSemantics;

/** Check rounds of one `claim` step, as StampClaims allows. */
const CHECK_ROUNDS = 4;

/**
 * After a busy answer the pair waits this long before the next step, so that what a later step writes is stamped
 * strictly after the `since` that answer gave, on both clocks: a tie (same millisecond on one clock, not on the other)
 * would make the "late" rule of stamp-claim-1.lua answer differently for a reason that is not a drift.
 */
const AFTER_BUSY_MS = 2;

class Side {
  lastBusy = 0;
  constructor(readonly cache: IdCache) {}

  private since(s: Since): number {
    return s === 'now' ? 0 : s === 'ancient' ? 1 : this.lastBusy;
  }

  private claimAnswer(r: ClaimResult): Answer {
    if (r.status !== 'busy') return r;
    if (!(Number.isFinite(r.since) && r.since > 0)) return { status: 'busy', since: r.since };
    this.lastBusy = r.since;
    return { status: 'busy' };
  }

  async run(step: Step): Promise<Answer> {
    const c = this.cache;
    try {
      switch (step.op) {
        case 'reserve':
          return await c.reserve(step.address, step.id, step.token);
        case 'commit':
          await c.commit(step.address, step.id, step.token);
          return 'ok';
        case 'release':
          await c.release(step.address, step.id, step.token, step.uncertain);
          return 'ok';
        case 'recorded':
          return await c.recorded(step.address, step.ids);
        case 'recordStamp':
          await c.recordStamp(step.source, step.fp, step.id, step.token, step.flagged);
          return 'ok';
        case 'claimStamp': {
          const request = { ownPrefix: step.ownPrefix, since: this.since(step.since), recorded: step.recorded, notRecorded: step.notRecorded };
          return this.claimAnswer(await c.claimStamp(step.source, step.fp, step.token, request));
        }
        case 'claim': {
          const since = this.since(step.since);
          const rounds: Answer[] = [];
          let recorded: string[] = [];
          const notRecorded = new Set<string>();
          for (let round = 0; round < CHECK_ROUNDS; round++) {
            const r = await c.claimStamp(step.source, step.fp, step.token, { ownPrefix: step.ownPrefix, since, recorded, notRecorded: [...notRecorded] });
            rounds.push(this.claimAnswer(r));
            if (r.status !== 'check') break;
            const flags = await c.recorded(step.address, r.ids);
            rounds.push(flags);
            recorded = r.ids.filter((_, i) => flags[i]);
            for (const [i, id] of r.ids.entries()) if (!flags[i]) notRecorded.add(id);
          }
          return rounds;
        }
        case 'renewStamps':
          return await c.renewStamps(step.source, step.fp, step.held);
        case 'markStampDone':
          await c.markStampDone(step.source, step.fp, step.id, step.token);
          return 'ok';
        case 'releaseStamp':
          await c.releaseStamp(step.source, step.fp, step.id, step.token);
          return 'ok';
        case 'releaseAckedStamp':
          await c.releaseAckedStamp(step.source, step.fp, step.id, step.token);
          return 'ok';
        case 'forgetStamp':
          await c.forgetStamp(step.source, step.fp, step.id);
          return 'ok';
        case 'sleep':
          await sleep(step.ms);
          return 'ok';
      }
    } catch {
      // The errors differ by design (a TypeError in memory, a ScriptReplyError from Redis): only that it failed counts.
      return { error: true };
    }
  }
}

function busy(a: Answer): boolean {
  const has = (x: unknown): boolean => typeof x === 'object' && x !== null && (x as { status?: unknown }).status === 'busy';
  return has(a) || (Array.isArray(a) && a.some(has));
}

let admin: Redis | undefined;
function adminClient(): Redis {
  admin ??= new Redis(services.redisUrl);
  return admin;
}

/** Closes the admin connection the pairs use to delete their keys (call once, after the last pair). */
export async function closePairs(): Promise<void> {
  await admin?.quit();
  admin = undefined;
}

/** Deletes every key under `prefix` (SCAN: for what a pair left behind, e.g. after a failed run). */
export async function deleteKeysUnder(prefix: string): Promise<void> {
  let cursor = '0';
  do {
    const [next, batch] = await adminClient().scan(cursor, 'MATCH', `${tagSafe(prefix)}*`, 'COUNT', 1000);
    cursor = next;
    if (batch.length > 0) await adminClient().del(...batch);
  } while (cursor !== '0');
}

export class CachePair {
  readonly memory: Side;
  readonly redis: Side;
  private readonly addresses = new Set<string>();
  private readonly stamps = new Map<string, Set<string>>();

  constructor(
    private readonly prefix: string,
    options: PairOptions,
  ) {
    this.memory = new Side(new MemoryIdCache(options));
    // With an idle expiry, the process forgets an address's epoch before Redis does, as the service configures it.
    const idle = options.idleExpiry ? { addressIdleTimeout: options.idleExpiry / 4 } : {};
    this.redis = new Side(new RedisIdCache({ ...options, ...idle, url: services.redisUrl, keyPrefix: prefix }));
  }

  /** Runs one step on both caches (memory first, then Redis) and returns both answers. */
  async run(step: Step): Promise<{ memory: Answer; redis: Answer }> {
    this.note(step);
    if (step.op === 'sleep') {
      await sleep(step.ms);
      return { memory: 'ok', redis: 'ok' };
    }
    const memory = await this.memory.run(step);
    const redis = await this.redis.run(step);
    if (busy(memory) || busy(redis)) await sleep(AFTER_BUSY_MS);
    return { memory, redis };
  }

  /** Closes both caches and deletes the keys the steps can have written. */
  async close(): Promise<void> {
    await Promise.all([this.memory.cache.close(), this.redis.cache.close()]);
    const keys: string[] = [];
    for (const address of this.addresses) {
      const k = addressKeys(this.prefix, address);
      keys.push(k.ids, k.seq, k.st, k.stScan, k.uncertain, epochKey(this.prefix, address));
    }
    for (const [source, fps] of this.stamps) {
      keys.push(epochKey(this.prefix, source));
      for (const fp of fps) keys.push(stampKey(this.prefix, source, fp));
    }
    if (keys.length > 0) await adminClient().del(...keys);
  }

  private note(step: Step): void {
    if ('address' in step) this.addresses.add(step.address);
    if ('source' in step) {
      let fps = this.stamps.get(step.source);
      if (!fps) this.stamps.set(step.source, (fps = new Set()));
      fps.add(step.fp);
    }
  }
}
