/**
 * The Redis implementation of the duplicate-ID cache (persist-id-cache: true): the cache itself, its options and its
 * loss reports. Each step of the protocol is one Lua script (./scripts/*.lua, loaded by ./script-loader.ts), so it is
 * atomic and safe across bridge replicas; the key layout is in ./keys.ts, the scripts' status codes in
 * ./script-status.ts, the batching of many messages' calls into one script call in ./address-batcher.ts, the
 * translation of errors (and the connection state it reads) in ./redis-errors.ts, the persistence and eviction checks
 * in ./redis-durability.ts.
 *
 * Connection policy: fail closed, recover by itself. Every command is bounded (`commandTimeout`, and the offline
 * queue is flushed after a failed reconnect attempt), so while Redis is away every call rejects with TransientError
 * within a few seconds; ioredis keeps reconnecting (retryStrategy never gives up), so calls succeed again once Redis
 * is back, on the same client. Reserves and commits of many in-flight messages share script calls (AddressBatcher),
 * and the writes of one tick share a system call (shared/coalesce-writes.ts).
 */
import type { RedisTopology } from '../config/types.js';
import { idCacheKey, type CacheHorizon, type ClaimRequest, type ClaimResult, type IdCache, type ReserveResult } from '../core/id-cache.js';
import { addressKeys, epochKey, livenessKey, stampKey } from './keys.js';
import { ProcessLiveness } from './owner-liveness.js';
import { readHorizon } from './horizon.js';
import { ScriptStatus, ScriptReplyError, decodeRecordedReply, decodeReserveReply, decodeScriptReply, isEpochChanged, isOldLayout, type ReserveReply } from './script-status.js';
import { migrateTag, refuseBesideLayoutOne } from './layout-upgrade.js';
import { TransientError } from '../shared/errors.js';
import { tlsConnectionOptions } from '../config/tls.js';
import { coalesceWrites } from '../shared/coalesce-writes.js';
import { silentLogger, type Logger } from '../shared/log.js';
import { createCacheClient, describeTopology, topologyUrls, type CacheClient } from './redis-client.js';
import { Cluster as ClusterClass, type Redis } from 'ioredis';
import { Epochs, type EpochReport, type EpochState } from './epochs.js';
import { SCRIPT_KEYS, defineScripts, type GuardedScript, type ScriptName } from './script-loader.js';
import { logLoss } from './loss-log.js';
import { AddressBatcher, packPairs, type BatchItem, type StampWrite } from './address-batcher.js';
import { RedisConnectionState } from './redis-errors.js';
import { durabilityFindings } from './redis-durability.js';
import { waitForReplicas } from './redis-replicas.js';
import type { RedisIdCacheOptions } from './redis-id-cache-options.js';

/** Kept here too for the callers that load or define the scripts through the cache's module (tests, tools). */
export { defineScripts, loadScripts } from './script-loader.js';

export type { RedisIdCacheOptions } from './redis-id-cache-options.js';

const DAY = 24 * 60 * 60 * 1000;

/** Most times one call is made again after its epoch moved (each time settled first). */
const EPOCH_RETRIES = 3;

type ScriptFn = (...args: (string | number | Buffer)[]) => Promise<unknown>;

export class RedisIdCache implements IdCache {
  readonly kind = 'redis';
  readonly lease: number;
  private readonly redis: CacheClient;
  private readonly topology: RedisTopology;
  private readonly where: string;
  private readonly log: Logger;
  private readonly o: Required<Omit<RedisIdCacheOptions, 'ttl' | 'log' | 'url' | 'topology' | 'onLoss' | 'password' | 'tls' | 'owner' | 'addressIdleTimeout'>> & { ttl: number };
  readonly liveness: ProcessLiveness | undefined;
  private readonly epochs: Epochs;
  private readonly onLoss: ((report: EpochReport) => void) | undefined;
  /** Losses detected or suspected since start, by event. */
  private readonly lossCounts = new Map<string, number>();
  /** Why Redis is unreachable now, whether TLS failed for good; turns errors into sentences. */
  private readonly connection: RedisConnectionState;
  private closed = false;

  constructor(options: RedisIdCacheOptions) {
    const topology: RedisTopology | undefined = options.topology ?? (options.url !== undefined ? { kind: 'standalone', url: options.url } : undefined);
    if (topology === undefined) throw new TypeError('RedisIdCache needs a url or a topology');
    this.topology = topology;
    this.where = describeTopology(topology);
    this.lease = options.lease;
    this.log = options.log ?? silentLogger;
    this.onLoss = options.onLoss;
    this.o = {
      keyPrefix: options.keyPrefix,
      size: options.size,
      ttl: options.ttl ?? 0,
      idleExpiry: options.idleExpiry ?? 0,
      lease: options.lease,
      markerRetention: options.markerRetention ?? DAY,
      maxMarkers: options.maxMarkers ?? 100_000,
      stampTtl: options.stampTtl ?? DAY,
      cleanupBatch: options.cleanupBatch ?? 100,
      commandTimeout: options.commandTimeout ?? 3000,
      connectTimeout: options.connectTimeout ?? 3000,
      lossWindow: options.lossWindow ?? options.stampTtl ?? DAY,
      noHistoryWindow: options.noHistoryWindow ?? 5 * 60_000,
      minReplicasAcked: options.minReplicasAcked ?? 0,
      minReplicasTimeout: options.minReplicasTimeout ?? 1000,
    };
    if (!(this.o.size >= 1 && this.o.lease > 0 && this.o.ttl >= 0 && this.o.idleExpiry >= 0 && this.o.lossWindow >= 0 && this.o.minReplicasAcked >= 0)) {
      throw new TypeError('RedisIdCache needs size >= 1, lease > 0, ttl >= 0, idleExpiry >= 0, lossWindow >= 0 and minReplicasAcked >= 0');
    }
    this.epochs = new Epochs(
      this.o.lossWindow,
      this.o.noHistoryWindow,
      (name, generation, window, extend, expiry) => this.markEpoch(name, generation, window, extend, expiry),
      (r) => this.reportLoss(r),
      options.addressIdleTimeout,
    );
    const tls = topologyUrls(topology).some((u) => /^rediss:/i.test(u));
    this.connection = new RedisConnectionState(this.where, this.o.commandTimeout, this.log, () => this.closed);
    this.redis = createCacheClient(topology, {
      commandTimeout: this.o.commandTimeout,
      connectTimeout: this.o.connectTimeout,
      ...(options.password !== undefined ? { password: options.password } : {}),
      ...(tls ? { tls: tlsConnectionOptions(options.tls) } : {}),
      // A TLS failure that no retry can fix ends the retries (see tlsFailure in shared/error-sentences.ts); every call then fails with it.
      stopRetrying: () => this.connection.tlsProblem !== undefined,
    });
    defineScripts(this.redis);
    // A new socket per (re)connect, on every node of a Cluster.
    if (this.redis instanceof ClusterClass) {
      this.redis.on('+node', (node: Redis) => node.on('connect', () => coalesceWrites(node.stream)));
    } else {
      const single = this.redis;
      single.on('connect', () => coalesceWrites(single.stream));
    }
    this.connection.watch(this.redis, tls, options.tls);
    const prefix = this.o.keyPrefix;
    this.liveness =
      options.owner === undefined ? undefined : new ProcessLiveness(this.redis, options.owner, (p) => livenessKey(prefix, p), this.log);
  }

  /** False while copies for this address (or from this source) are flagged after a detected or suspected loss. */
  vouchesFor(address: string): boolean {
    return this.epochs.vouchesFor(address);
  }

  /**
   * What /health reports: losses since start by event, and the addresses whose redelivered copies are flagged now,
   * until when and why (`data-lost`, `server-changed`, `no-history` on a first contact, `after-loss` from a marker
   * another process extended). `max`: list at most this many addresses (the HTTP API's answer stays bounded whatever
   * the messages made of the templated addresses); `flaggingAddresses` counts them all.
   */
  trust(max = Number.POSITIVE_INFINITY): { losses: Record<string, number>; flagging: { address: string; until: string; reason: string }[]; flaggingAddresses: number } {
    const flagging = this.epochs.untrusted();
    return {
      losses: Object.fromEntries(this.lossCounts),
      flagging: flagging.slice(0, max).map((u) => ({ address: u.name, until: new Date(u.flagUntil).toISOString(), reason: u.reason })),
      flaggingAddresses: flagging.length,
    };
  }

  private reportLoss(r: EpochReport): void {
    logLoss(this.log, this.where, r);
    if (r.event !== 'no-history') this.lossCounts.set(r.event, (this.lossCounts.get(r.event) ?? 0) + 1);
    this.onLoss?.(r);
  }

  private async markEpoch(name: string, generation: string, window: number, extend: boolean, expiry: number): Promise<EpochState> {
    const fn = (this.redis as unknown as Record<ScriptName, ScriptFn>).epoch;
    let reply: unknown;
    try {
      reply = await fn.apply(this.redis, [epochKey(this.o.keyPrefix, name), generation, window, extend ? 1 : 0, expiry]);
    } catch (err) {
      throw this.translate(err);
    }
    const { fields } = decodeScriptReply('epoch', reply);
    if (fields.length < 4) throw new ScriptReplyError('epoch', `expected 4 fields, got ${JSON.stringify(reply)}`);
    return { value: String(fields[0]), server: String(fields[1]), now: Number(fields[2]), created: Number(fields[3]) === 1 };
  }

  /**
   * What an operator must know before trusting this Redis with the cache (persist-id-cache: true): whether it keeps
   * its data across a restart (AOF or RDB snapshots), and whether its `maxmemory-policy` may evict keys that have no
   * TTL (the cache's). Read with CONFIG GET; where CONFIG is disabled or not allowed (managed Redis), `skipped` says so.
   * Transient errors (Redis unreachable) reject as usual.
   */
  async durabilityFindings(): Promise<{ warnings: string[]; skipped?: string }> {
    this.assertOpen();
    return durabilityFindings(this.redis, this.where, (err) => this.translate(err));
  }

  async horizon(address: string): Promise<CacheHorizon> {
    this.assertOpen();
    try {
      return await readHorizon(this.redis, addressKeys(this.o.keyPrefix, address));
    } catch (err) {
      throw this.translate(err);
    }
  }

  /** Also starts keeping this process's liveness key set, on the first call (the supervisors ping before a session). */
  async ping(): Promise<void> {
    this.assertOpen();
    this.liveness?.start();
    try {
      await this.redis.ping();
    } catch (err) {
      throw this.translate(err);
    }
  }

  /**
   * Reserves and commits are gathered per address while one callback runs and sent as one script call each
   * (the scripts take many id/token pairs): a bridge with hundreds of messages in flight then costs Redis and ioredis
   * a few calls per turn instead of two per message. Every pair is still handled exactly as if sent alone, and a
   * replayed call is still idempotent per token.
   */
  private readonly reserves = new AddressBatcher<ReserveResult>((address, items) => this.reserveMany(address, items));
  private readonly commits = new AddressBatcher<void>((address, items) => this.commitBatch(address, items));

  reserve(address: string, id: string, token: string): Promise<ReserveResult> {
    if (token === '') return Promise.reject(new ScriptReplyError('reserve', 'bad argument: empty token'));
    return this.reserves.add(address, { id: idCacheKey(id), token });
  }

  commit(address: string, id: string, token: string): Promise<void> {
    if (token === '') return Promise.reject(new ScriptReplyError('commit', 'bad argument: empty token'));
    return this.commits.add(address, { id: idCacheKey(id), token });
  }

  commitMany(address: string, pairs: readonly { id: string; token: string }[]): Promise<void> {
    if (pairs.some((p) => p.token === '')) return Promise.reject(new ScriptReplyError('commit', 'bad argument: empty token'));
    // The pairs are this call's own (IdCache.commitMany): a long ID's is replaced by its cache key in place.
    for (const p of pairs) if (p.id.length > 42) (p as { id: string }).id = idCacheKey(p.id);
    return this.commits.addAll(address, pairs);
  }

  private async reserveMany(address: string, items: BatchItem<ReserveResult>[]): Promise<void> {
    const first = await this.reserveCall(address, items, []);
    const results = first.results;
    // Busy IDs whose holders are dead (their liveness key gone) are taken over at once, in a second call that names them.
    const dead = first.holders.length > 0 && this.liveness ? await this.liveness.dead(first.holders) : [];
    if (dead.length > 0) {
      const busy = items.filter((_, i) => results[i]!.status === 'busy');
      const again = await this.reserveCall(address, busy, dead);
      let j = 0;
      for (let i = 0; i < items.length; i++) if (results[i]!.status === 'busy') results[i] = again.results[j++]!;
    }
    for (let i = 0; i < items.length; i++) items[i]!.resolve(results[i]!);
  }

  private async reserveCall(address: string, items: readonly { id: string; token: string }[], dead: readonly string[]): Promise<ReserveReply> {
    const k = addressKeys(this.o.keyPrefix, address);
    const [first, ...rest] = items as [{ id: string; token: string }, ...{ id: string; token: string }[]];
    const more = [packPairs(rest)[0] ?? '', dead.join(' '), this.o.idleExpiry];
    const reply = await this.run(
      'reserve',
      address,
      [k.ids, k.st, k.stScan, k.uncertain],
      [first.id, first.token, this.o.lease, this.o.ttl, this.o.markerRetention, this.o.maxMarkers, this.o.cleanupBatch, ...more],
    );
    return decodeReserveReply(reply, items.length);
  }

  private async commitBatch(address: string, items: BatchItem<void>[]): Promise<void> {
    const k = addressKeys(this.o.keyPrefix, address);
    const [first, ...rest] = items as [BatchItem<void>, ...BatchItem<void>[]];
    const reply = await this.run(
      'commit',
      address,
      [k.ids, k.seq, k.st, k.uncertain],
      [first.id, first.token, this.o.size, this.o.ttl, this.o.cleanupBatch, packPairs(rest)[0] ?? '', this.o.idleExpiry],
    );
    decodeScriptReply('commit', reply);
    if (this.o.minReplicasAcked > 0) {
      await waitForReplicas(this.redis, k.ids, { acked: this.o.minReplicasAcked, timeout: this.o.minReplicasTimeout, where: this.where, translate: (e) => this.translate(e) });
    }
    for (const item of items) item.resolve();
  }

  async release(address: string, id: string, token: string, uncertain: boolean): Promise<void> {
    const k = addressKeys(this.o.keyPrefix, address);
    const reply = await this.run(
      'release',
      address,
      [k.st, k.uncertain],
      [idCacheKey(id), token, uncertain ? 1 : 0, this.o.markerRetention, this.o.maxMarkers],
    );
    decodeScriptReply('release', reply);
  }

  /**
   * Stamp records and forgets of one source, made while one callback runs (a burst of deliveries, one ack barrier), go
   * as one script call each: their keys share the source's hash tag. Each is handled exactly as if sent alone.
   */
  private readonly records = new AddressBatcher<void, StampWrite>((source, items) => this.recordMany(source, items));
  private readonly forgets = new AddressBatcher<void, StampWrite>((source, items) => this.forgetMany(source, items));

  recordStamp(source: string, fingerprint: string, id: string, token: string, flagged = false): Promise<void> {
    if (token === '') return Promise.reject(new ScriptReplyError('stamp-record', 'bad argument: empty token'));
    return this.records.add(source, { key: stampKey(this.o.keyPrefix, source, fingerprint), id, token, flagged });
  }

  private async recordMany(source: string, items: BatchItem<void, StampWrite>[]): Promise<void> {
    const args: (string | number)[] = [this.o.lease, this.o.stampTtl];
    for (const i of items) args.push(i.id, i.token, i.flagged ? 1 : 0);
    const reply = await this.run('stampRecord', source, items.map((i) => i.key), args);
    decodeScriptReply('stampRecord', reply);
    for (const item of items) item.resolve();
  }

  private async forgetMany(source: string, items: BatchItem<void, StampWrite>[]): Promise<void> {
    const reply = await this.run('stampForget', source, items.map((i) => i.key), items.map((i) => i.id));
    decodeScriptReply('stampForget', reply);
    for (const item of items) item.resolve();
  }

  async recorded(address: string, ids: readonly string[]): Promise<boolean[]> {
    if (ids.length === 0) return [];
    const k = addressKeys(this.o.keyPrefix, address);
    const reply = await this.run('recorded', address, [k.st], [this.o.ttl, ...ids.map(idCacheKey)]);
    return decodeRecordedReply(reply, ids.length);
  }

  async claimStamp(source: string, fingerprint: string, token: string, request: ClaimRequest): Promise<ClaimResult> {
    let dead: readonly string[] = [];
    for (;;) {
      const reply = await this.run(
        'stampClaim',
        source,
        [stampKey(this.o.keyPrefix, source, fingerprint)],
        [token, this.o.lease, this.o.stampTtl, request.ownPrefix, request.since, dead.join(' '), request.recorded.length, ...request.recorded, ...request.notRecorded],
      );
      const r = decodeScriptReply('stampClaim', reply);
      switch (r.status) {
        case ScriptStatus.Claimed:
          return { status: 'claimed', id: r.id, possibleDuplicate: r.possibleDuplicate, done: r.done };
        case ScriptStatus.Check:
          return { status: 'check', ids: r.ids };
        case ScriptStatus.None:
          return { status: 'none', possibleDuplicate: r.possibleDuplicate };
        case ScriptStatus.Busy: {
          // Held by a process whose liveness key is gone: its stamps are free at once; ask again naming it (once).
          const found = dead.length === 0 && this.liveness ? await this.liveness.dead(r.holders) : [];
          if (found.length === 0) return { status: 'busy', since: r.since };
          dead = found;
        }
      }
    }
  }

  async renewStamps(source: string, fingerprint: string, held: readonly { id: string; token: string }[]): Promise<string[]> {
    if (held.length === 0) return [];
    const reply = await this.run('stampRenew', source, [stampKey(this.o.keyPrefix, source, fingerprint)], [
      this.o.lease,
      this.o.stampTtl,
      ...held.flatMap((h) => [h.id, h.token]),
    ]);
    decodeScriptReply('stampRenew', reply);
    return (reply as unknown[]).slice(1).map((id) => (Buffer.isBuffer(id) ? id.toString('utf8') : String(id)));
  }

  async markStampDone(source: string, fingerprint: string, id: string, token: string): Promise<void> {
    const reply = await this.run('stampDone', source, [stampKey(this.o.keyPrefix, source, fingerprint)], [id, token, this.o.stampTtl]);
    decodeScriptReply('stampDone', reply);
  }

  forgetStamp(source: string, fingerprint: string, id: string): Promise<void> {
    return this.forgets.add(source, { key: stampKey(this.o.keyPrefix, source, fingerprint), id, token: '', flagged: false });
  }

  async releaseStamp(source: string, fingerprint: string, id: string, token: string): Promise<void> {
    const reply = await this.run('stampRelease', source, [stampKey(this.o.keyPrefix, source, fingerprint)], [id, token, this.o.stampTtl]);
    decodeScriptReply('stampRelease', reply);
  }

  async releaseAckedStamp(source: string, fingerprint: string, id: string, token: string): Promise<void> {
    const reply = await this.run('stampRelease', source, [stampKey(this.o.keyPrefix, source, fingerprint)], [id, token, this.o.stampTtl, 'u']);
    decodeScriptReply('stampRelease', reply);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.liveness?.stop();
    let timer: NodeJS.Timeout | undefined;
    try {
      // QUIT lets queued replies arrive; when Redis is away it would wait for a reconnect, so cap it.
      await Promise.race([
        this.redis.quit().catch(() => undefined),
        new Promise((resolve) => {
          timer = setTimeout(resolve, 1000);
        }),
      ]);
    } finally {
      if (timer) clearTimeout(timer);
      this.redis.disconnect();
    }
  }

  private assertOpen(): void {
    if (this.closed) throw new Error('the duplicate-ID cache is closed');
  }

  /**
   * Runs a guarded script on the keys of one hash tag (`tag`: the address or source they belong to). When the guard
   * answers that the epoch moved, the news is settled (logged, flag window set) and the call made again: the guard did
   * nothing, so going again is safe.
   */
  private async run(name: GuardedScript, tag: string, keys: string[], args: (string | number | Buffer)[]): Promise<unknown> {
    this.assertOpen();
    const fn = (this.redis as unknown as Record<ScriptName, ScriptFn>)[name];
    const marker = epochKey(this.o.keyPrefix, tag);
    for (let attempt = 0, moves = 0; ; attempt++) {
      const seen = this.epochs.seen(tag);
      // A script of any number of keys takes their count first (the marker's key included).
      const head = SCRIPT_KEYS[name] === 'n' ? [keys.length + 1] : [];
      let reply: unknown;
      try {
        reply = await fn.apply(this.redis, [...head, marker, ...keys, seen, ...args]);
      } catch (err) {
        throw this.translate(err);
      }
      if (isOldLayout(reply)) {
        // The tag's keys are (partly) in layout 1: move them, then go again (the guard did nothing).
        if (moves++ >= EPOCH_RETRIES) throw new TransientError(`the duplicate-ID cache of '${tag}' in ${this.where} is still in layout 1 after ${moves} moves (is a process of an older build writing it?)`);
        await this.migrate(tag);
        attempt--;
        continue;
      }
      if (!isEpochChanged(reply)) return reply;
      if (attempt >= EPOCH_RETRIES) {
        throw new TransientError(`the duplicate-ID cache of '${tag}' in ${this.where} keeps changing under the bridge (epoch moved ${attempt + 1} times in a row)`);
      }
      // A target address's marker expires with its idle keys; a source's stamp marker does not (epoch-1.lua ARGV[4]).
      await this.epochs.settle(tag, seen, String(reply[1]), name === 'reserve' || name === 'commit' ? this.o.idleExpiry : 0);
    }
  }

  /** Moves a hash tag's layout-1 keys into layout 2 (./layout-upgrade.ts); logged once per tag. */
  private async migrate(tag: string): Promise<void> {
    let calls: number;
    try {
      calls = await migrateTag(this.redis, this.o.keyPrefix, tag);
    } catch (err) {
      throw this.translate(err);
    }
    this.log.info({ tag, calls }, `moved the duplicate-ID cache of '${tag}' in ${this.where} from layout 1 to layout 2`);
  }

  /**
   * Throws ConfigError while a process of a build that keeps layout 1 is alive on this Redis under this prefix (the
   * two cannot share addresses: docs/operations.md#upgrading-the-cache-layout). Called once at start, before any
   * bridge; waits while Redis is unreachable.
   */
  async refuseBesideOldBuilds(): Promise<void> {
    this.assertOpen();
    await refuseBesideLayoutOne(this.redis, this.o.keyPrefix, this.where, this.log, (err) => this.translate(err));
  }

  private translate(err: unknown): Error {
    return this.connection.translate(err);
  }
}
