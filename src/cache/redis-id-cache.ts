/**
 * The Redis implementation of the duplicate-ID cache (persist-id-cache: true). Each step of the protocol is one Lua
 * script (./scripts/*.lua, loaded with ioredis `defineCommand`), so it is atomic and safe across bridge replicas;
 * the key layout is in ./keys.ts, the scripts' status codes in ./script-status.ts.
 *
 * Connection policy: fail closed, recover by itself. Every command is bounded (`commandTimeout`, and the offline
 * queue is flushed after a failed reconnect attempt), so while Redis is away every call rejects with TransientError
 * within a few seconds; ioredis keeps reconnecting (retryStrategy never gives up), so calls succeed again once Redis
 * is back, on the same client. Reserves and commits of many in-flight messages share script calls (AddressBatcher),
 * and the writes of one tick share a system call (shared/coalesce-writes.ts).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { RedisTopology } from '../config/types.js';
import type { CacheHorizon, ClaimRequest, ClaimResult, IdCache, IdCacheSemantics, ReserveResult } from '../core/id-cache.js';
import { addressKeys, epochKey, hashSlot, stampKey } from './keys.js';
import { readHorizon } from './horizon.js';
import { ScriptStatus, ScriptReplyError, decodeRecordedReply, decodeReserveReply, decodeScriptReply } from './script-status.js';
import { ConfigError, TransientError, isProgrammerError, redactUrl } from '../shared/errors.js';
import type { TlsConfig } from '../config/types.js';
import { tlsConnectionOptions } from '../config/tls.js';
import { socketSentence, tlsFailure } from '../shared/error-sentences.js';
import { coalesceWrites } from '../shared/coalesce-writes.js';
import { silentLogger, type Logger } from '../shared/log.js';
import { createCacheClient, describeTopology, topologyUrls, type CacheClient } from './redis-client.js';
import { Cluster as ClusterClass, type Redis } from 'ioredis';
import { Epochs, type EpochReport, type EpochState } from './epochs.js';

/**
 * Script name (camelCase of the file name without its `-<numberOfKeys>` suffix) → number of keys; `n` (file suffix
 * `-n`): as many keys as the call brings (all of one hash tag), passed as the first argument.
 */
export const SCRIPT_KEYS = {
  reserve: 5,
  commit: 6,
  release: 3,
  recorded: 2,
  stampRecord: 'n',
  stampClaim: 1,
  stampForget: 'n',
  stampRelease: 1,
  stampDone: 1,
  stampRenew: 1,
  epoch: 1,
} as const;

/** The one script without the epoch guard in front: it reads and writes the epoch marker itself. */
const UNGUARDED: ReadonlySet<ScriptName> = new Set(['epoch']);

export type ScriptName = keyof typeof SCRIPT_KEYS;
type GuardedScript = Exclude<ScriptName, 'epoch'>;

export interface ScriptDefinition {
  lua: string;
  /**
   * Keys the call passes, the epoch marker's included; undefined for a script that takes any number of keys (ioredis
   * then expects the count as the first argument).
   */
  numberOfKeys?: number;
  /** Whether the epoch guard runs first: the call then passes the marker's key and what this process saw of it first. */
  guarded: boolean;
  /** The keys the script's own header documents (its file name's suffix). */
  declaredKeys: number | 'n';
}

let loadedScripts: Record<ScriptName, ScriptDefinition> | undefined;

/**
 * Reads the Lua scripts that sit next to this module (src/cache/scripts when run from source, dist/cache/scripts
 * after the build copied them). Throws at once when one is missing, rather than on the first message.
 */
export function loadScripts(): Record<ScriptName, ScriptDefinition> {
  if (loadedScripts) return loadedScripts;
  const dir = new URL('./scripts/', import.meta.url);
  const found = new Map<string, ScriptDefinition>();
  for (const file of readdirSync(dir)) {
    const m = /^([a-z][a-z0-9-]*)-(\d+|n)\.lua$/.exec(file);
    if (!m || m[1] === undefined || m[2] === undefined) continue;
    const name = m[1].replace(/-([a-z0-9])/g, (_, c: string) => c.toUpperCase());
    const guarded = !UNGUARDED.has(name as ScriptName);
    const body = withIncludes(readFileSync(new URL(file, dir), 'utf8'), dir);
    // The guard takes one key (the epoch marker) and one argument off the front of KEYS and ARGV.
    const lua = guarded ? `${readFileSync(new URL('epoch-guard.inc.lua', dir), 'utf8')}\n${body}` : body;
    const keys = m[2] === 'n' ? undefined : Number(m[2]) + (guarded ? 1 : 0);
    found.set(name, { lua, ...(keys === undefined ? {} : { numberOfKeys: keys }), guarded, declaredKeys: m[2] === 'n' ? 'n' : Number(m[2]) });
  }
  const scripts = {} as Record<ScriptName, ScriptDefinition>;
  for (const [name, keys] of Object.entries(SCRIPT_KEYS) as [ScriptName, number | 'n'][]) {
    const def = found.get(name);
    if (!def || def.declaredKeys !== keys) {
      throw new Error(
        `duplicate-ID cache script ${name} (${keys} keys) is missing from ${fileURLToPath(dir)}; the build must copy src/cache/scripts/*.lua there`,
      );
    }
    scripts[name] = def;
  }
  loadedScripts = scripts;
  return scripts;
}

/**
 * Inlines the shared fragments a script names on a line `--#include <file>` (indentation allowed; files next to the
 * scripts; a missing one fails loading at start): Redis runs each script as one self-contained chunk, so code two
 * scripts share is written once and copied in here.
 */
function withIncludes(lua: string, dir: URL): string {
  return lua.replace(/^[ \t]*--#include (\S+)[ \t]*$/gm, (_, file: string) => readFileSync(new URL(file, dir), 'utf8').trimEnd());
}

/** Defines every cache script as a command on a client (also used by tests that call a script directly). */
export function defineScripts(redis: Redis | ClusterClass): void {
  for (const [name, def] of Object.entries(loadScripts())) {
    redis.defineCommand(name, def.numberOfKeys === undefined ? { lua: def.lua } : { lua: def.lua, numberOfKeys: def.numberOfKeys });
  }
}

export interface RedisIdCacheOptions extends IdCacheSemantics {
  /** A standalone Redis: redis:// or rediss:// URL (credentials allowed; they never reach logs or errors). */
  url?: string;
  /** Where the Redis is (standalone, Cluster, Sentinel); takes precedence over `url`. */
  topology?: RedisTopology;
  /** Password from `password-file` (the URLs then have none). */
  password?: string;
  /** TLS options for rediss:// URLs. */
  tls?: TlsConfig;
  keyPrefix: string;
  /** Longest a call waits for Redis before rejecting with TransientError. Default 3000 ms. */
  commandTimeout?: number;
  /** TCP connect timeout. Default 3000 ms. */
  connectTimeout?: number;
  /**
   * After a loss is detected or cannot be ruled out, how long copies the cache cannot vouch for are flagged, ms.
   * Default 24 h: as long as a stamp record lives, so as long as the cache would have vouched for one.
   */
  lossWindow?: number;
  /**
   * After a first contact that finds no epoch marker (a new deployment cannot be told from a loss while no bridge ran),
   * how long redelivered copies the cache cannot vouch for are flagged, ms; at most lossWindow. Default 5 min.
   */
  noHistoryWindow?: number;
  /** After each commit, wait for this many replicas to acknowledge it (WAIT); 0 = no wait (default). */
  minReplicasAcked?: number;
  /** Longest that wait lasts, ms (default 1000). */
  minReplicasTimeout?: number;
  /** Told of every detected (or suspected) cache loss, after it is logged: for metrics. */
  onLoss?: (report: EpochReport) => void;
  log?: Logger;
}

const DAY = 24 * 60 * 60 * 1000;

/**
 * Redis error replies that mean "not now" rather than "never": the call is failed as transient. (MOVED and ASK are
 * not among them: the Cluster client follows them, and a standalone client that gets one is pointed at a Cluster node,
 * which is a configuration error said in a sentence.)
 */
const TRANSIENT_REPLIES = /^(LOADING|BUSY|READONLY|MASTERDOWN|CLUSTERDOWN|TRYAGAIN|OOM|NOREPLICAS)\b/;

/** Status of the epoch guard (epoch-guard.inc.lua): the epoch moved, nothing was done. */
const EPOCH_CHANGED = 8;

/** Most times one call is made again after its epoch moved (each time settled first). */
const EPOCH_RETRIES = 3;

type ScriptFn = (...args: (string | number)[]) => Promise<unknown>;

export class RedisIdCache implements IdCache {
  readonly kind = 'redis';
  readonly lease: number;
  private readonly redis: CacheClient;
  private readonly topology: RedisTopology;
  private readonly where: string;
  private readonly log: Logger;
  private readonly o: Required<Omit<RedisIdCacheOptions, 'ttl' | 'log' | 'url' | 'topology' | 'onLoss' | 'password' | 'tls'>> & { ttl: number };
  private readonly epochs: Epochs;
  private readonly onLoss: ((report: EpochReport) => void) | undefined;
  /** Losses detected or suspected since start, by event. */
  private readonly lossCounts = new Map<string, number>();
  /** Set when TLS failed for good (certificate not trusted, wrong name, client certificate refused): not retried. */
  private tlsProblem: ConfigError | undefined;
  /** Why Redis is unreachable right now (undefined while connected): makes timeouts read as the real cause. */
  private downReason: string | undefined;
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
    if (!(this.o.size >= 1 && this.o.lease > 0 && this.o.ttl >= 0 && this.o.lossWindow >= 0 && this.o.minReplicasAcked >= 0)) {
      throw new TypeError('RedisIdCache needs size >= 1, lease > 0, ttl >= 0, lossWindow >= 0 and minReplicasAcked >= 0');
    }
    this.epochs = new Epochs(this.o.lossWindow, this.o.noHistoryWindow, (name, generation, window, extend) => this.markEpoch(name, generation, window, extend), (r) =>
      this.reportLoss(r),
    );
    const tls = topologyUrls(topology).some((u) => /^rediss:/i.test(u));
    this.redis = createCacheClient(topology, {
      commandTimeout: this.o.commandTimeout,
      connectTimeout: this.o.connectTimeout,
      ...(options.password !== undefined ? { password: options.password } : {}),
      ...(tls ? { tls: tlsConnectionOptions(options.tls) } : {}),
      // A TLS failure that no retry can fix ends the retries (see tlsFailure in shared/error-sentences.ts); every call then fails with it.
      stopRetrying: () => this.tlsProblem !== undefined,
    });
    defineScripts(this.redis);
    // A new socket per (re)connect, on every node of a Cluster.
    if (this.redis instanceof ClusterClass) {
      this.redis.on('+node', (node: Redis) => node.on('connect', () => coalesceWrites(node.stream)));
    } else {
      const single = this.redis;
      single.on('connect', () => coalesceWrites(single.stream));
    }
    // Without an 'error' listener a broken connection would crash the process. Log once per state change, not once
    // per reconnect attempt; a connection can end with or without an error, so both events mark it down.
    const markDown = (reason: string, err?: unknown): void => {
      if (this.closed) return;
      if (this.downReason === undefined) {
        this.log.warn(
          err === undefined ? {} : { err },
          `Redis at ${this.where} is unreachable: ${reason}; duplicate checks wait until it is back`,
        );
      }
      this.downReason = reason;
    };
    this.redis.on('error', (err: unknown) => {
      const problem = tls && this.tlsProblem === undefined ? tlsFailure(err, this.where, options.tls) : undefined;
      if (problem !== undefined && !this.closed) {
        this.tlsProblem = new ConfigError(`Redis at ${this.where} cannot be used: ${problem}`, { cause: err });
        this.log.error(`${this.tlsProblem.message}; not retried: fix the certificates or the id-cache tls settings, then restart`);
        this.downReason = problem;
        return;
      }
      markDown(connectionReason(err), err);
    });
    this.redis.on('close', () => markDown(this.downReason ?? 'connection closed'));
    this.redis.on('ready', () => {
      if (this.downReason !== undefined && !this.closed) this.log.info(`Redis at ${this.where} is reachable again`);
      this.downReason = undefined;
    });
  }

  /** False while copies for this address (or from this source) are flagged after a detected or suspected loss. */
  vouchesFor(address: string): boolean {
    return this.epochs.vouchesFor(address);
  }

  /**
   * What /health reports: losses since start by event, and the addresses whose redelivered copies are flagged now,
   * until when and why (`data-lost`, `server-changed`, `no-history` on a first contact, `after-loss` from a marker
   * another process extended).
   */
  trust(): { losses: Record<string, number>; flagging: { address: string; until: string; reason: string }[] } {
    return {
      losses: Object.fromEntries(this.lossCounts),
      flagging: this.epochs.untrusted().map((u) => ({ address: u.name, until: new Date(u.flagUntil).toISOString(), reason: u.reason })),
    };
  }

  private reportLoss(r: EpochReport): void {
    const until = new Date(r.flagUntil).toISOString();
    switch (r.event) {
      case 'data-lost':
        this.log.error(
          { address: r.name, flagUntil: until },
          `the duplicate-ID cache of '${r.name}' in ${this.where} was lost (a Redis restart without persistence, a flush, an eviction, or a failover to a replica without it): re-sent IDs may pass, and redelivered copies the cache no longer vouches for are flagged as possible duplicates until ${until}`,
        );
        break;
      case 'server-changed':
        this.log.error(
          { address: r.name, flagUntil: until },
          `another Redis server now holds the duplicate-ID cache of '${r.name}' in ${this.where} (a restart, a failover or a slot migration), which may lack the latest writes: redelivered copies the cache does not vouch for are flagged as possible duplicates until ${until}`,
        );
        break;
      case 'no-history':
        this.log.warn(
          { address: r.name, flagUntil: until },
          `the duplicate-ID cache of '${r.name}' in ${this.where} has no earlier record: a new deployment, or a Redis that lost its data while no bridge ran; redelivered copies the cache does not vouch for are flagged as possible duplicates until ${until}`,
        );
        break;
    }
    if (r.event !== 'no-history') this.lossCounts.set(r.event, (this.lossCounts.get(r.event) ?? 0) + 1);
    this.onLoss?.(r);
  }

  private async markEpoch(name: string, generation: string, window: number, extend: boolean): Promise<EpochState> {
    const fn = (this.redis as unknown as Record<ScriptName, ScriptFn>).epoch;
    let reply: unknown;
    try {
      reply = await fn.apply(this.redis, [epochKey(this.o.keyPrefix, name), generation, window, extend ? 1 : 0]);
    } catch (err) {
      throw this.translate(err);
    }
    if (!Array.isArray(reply) || Number(reply[0]) !== (ScriptStatus.Ok as number) || reply.length < 5) {
      throw new ScriptReplyError('epoch', JSON.stringify(reply));
    }
    return { value: String(reply[1]), server: String(reply[2]), now: Number(reply[3]), created: Number(reply[4]) === 1 };
  }

  /**
   * What an operator must know before trusting this Redis with the cache (persist-id-cache: true): whether it keeps
   * its data across a restart (AOF or RDB snapshots), and whether its `maxmemory-policy` may evict keys that have no
   * TTL (the cache's). Read with CONFIG GET; where CONFIG is disabled or not allowed (managed Redis), `skipped` says so.
   * Transient errors (Redis unreachable) reject as usual.
   */
  async durabilityFindings(): Promise<{ warnings: string[]; skipped?: string }> {
    this.assertOpen();
    let settings: Map<string, string>;
    try {
      // On a Cluster, ask every master: each holds the cache of its slots.
      const servers: Redis[] = this.redis instanceof ClusterClass ? this.redis.nodes('master') : [this.redis];
      const replies = await Promise.all(servers.map(async (r) => configPairs(await r.config('GET', 'appendonly', 'save', 'maxmemory-policy'))));
      settings = mergeWorst(replies);
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      if (err instanceof Error && err.name === 'ReplyError' && /unknown command|NOPERM|no permissions|disabled/i.test(message)) {
        return { warnings: [], skipped: `Redis at ${this.where} does not allow CONFIG GET (${redactUrl(message)}): its persistence and eviction policy were not checked` };
      }
      throw this.translate(err);
    }
    const warnings: string[] = [];
    if (settings.get('appendonly') === 'no' && (settings.get('save') ?? '').trim() === '') {
      warnings.push(
        `Redis at ${this.where} keeps no data across a restart (appendonly no, no save points): a Redis restart empties the duplicate-ID cache, and re-sent IDs then pass; turn on appendonly (or RDB snapshots)`,
      );
    }
    const policy = settings.get('maxmemory-policy') ?? '';
    if (policy.startsWith('allkeys-')) {
      warnings.push(
        `Redis at ${this.where} has maxmemory-policy ${policy}: under memory pressure it evicts the duplicate-ID cache's keys (which have no TTL), and re-sent IDs then pass; use noeviction (a full Redis then holds messages instead)`,
      );
    } else if (policy.startsWith('volatile-')) {
      warnings.push(
        `Redis at ${this.where} has maxmemory-policy ${policy}: under memory pressure it evicts keys with a TTL, among them the stamp records of messages without IDs, and such a message redelivered after it may get a second ID that is not flagged; use noeviction (a full Redis then holds messages instead)`,
      );
    }
    return { warnings };
  }

  async horizon(address: string): Promise<CacheHorizon> {
    this.assertOpen();
    try {
      return await readHorizon(this.redis, addressKeys(this.o.keyPrefix, address));
    } catch (err) {
      throw this.translate(err);
    }
  }

  async ping(): Promise<void> {
    this.assertOpen();
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
  private readonly commits = new AddressBatcher<void>((address, items) => this.commitMany(address, items));

  reserve(address: string, id: string, token: string): Promise<ReserveResult> {
    if (token === '') return Promise.reject(new ScriptReplyError('reserve', 'bad argument: empty token'));
    return this.reserves.add(address, { id, token });
  }

  commit(address: string, id: string, token: string): Promise<void> {
    if (token === '') return Promise.reject(new ScriptReplyError('commit', 'bad argument: empty token'));
    return this.commits.add(address, { id, token });
  }

  private async reserveMany(address: string, items: BatchItem<ReserveResult>[]): Promise<void> {
    const k = addressKeys(this.o.keyPrefix, address);
    const [first, ...rest] = items as [BatchItem<ReserveResult>, ...BatchItem<ReserveResult>[]];
    const reply = await this.run(
      'reserve',
      address,
      [k.ids, k.at, k.res, k.resExp, k.uncertain],
      [first.id, first.token, this.o.lease, this.o.ttl, this.o.markerRetention, this.o.maxMarkers, this.o.cleanupBatch, ...packPairs(rest)],
    );
    const outcomes = decodeReserveReply(reply, items.length);
    for (let i = 0; i < items.length; i++) items[i]!.resolve(outcomes[i]!);
  }

  private async commitMany(address: string, items: BatchItem<void>[]): Promise<void> {
    const k = addressKeys(this.o.keyPrefix, address);
    const [first, ...rest] = items as [BatchItem<void>, ...BatchItem<void>[]];
    const reply = await this.run(
      'commit',
      address,
      [k.ids, k.at, k.seq, k.res, k.resExp, k.uncertain],
      [first.id, first.token, this.o.size, this.o.ttl, this.o.cleanupBatch, ...packPairs(rest)],
    );
    decodeScriptReply('commit', reply, [ScriptStatus.Ok] as const);
    if (this.o.minReplicasAcked > 0) await this.waitForReplicas(k.ids);
    for (const item of items) item.resolve();
  }

  /**
   * min-replicas-acked: holds the commit's answer (so the source is not acknowledged) until enough replicas have the
   * write, so a failover to one of them cannot lose the ID. WAIT covers every earlier write of the connection, and on a
   * Cluster it must go to the master that ran the commit: the one serving the key's slot.
   */
  private async waitForReplicas(key: string): Promise<void> {
    let node: Redis | undefined;
    if (this.redis instanceof ClusterClass) {
      const owner = this.redis.slots[hashSlot(key)]?.[0];
      node = this.redis.nodes('master').find((n) => `${n.options.host}:${n.options.port}` === owner);
      if (node === undefined) throw new TransientError(`Redis at ${this.where}: no master known for the cache of a commit yet`);
    } else {
      node = this.redis;
    }
    let acked: number;
    try {
      acked = await node.wait(this.o.minReplicasAcked, this.o.minReplicasTimeout);
    } catch (err) {
      throw this.translate(err);
    }
    if (acked < this.o.minReplicasAcked) {
      throw new TransientError(
        `Redis at ${this.where}: a commit reached ${acked} replica(s) within ${this.o.minReplicasTimeout} ms, fewer than min-replicas-acked (${this.o.minReplicasAcked}); the source message stays unacknowledged and the commit is made again`,
      );
    }
  }

  async release(address: string, id: string, token: string, uncertain: boolean): Promise<void> {
    const k = addressKeys(this.o.keyPrefix, address);
    const reply = await this.run(
      'release',
      address,
      [k.res, k.resExp, k.uncertain],
      [id, token, uncertain ? 1 : 0, this.o.markerRetention, this.o.maxMarkers],
    );
    decodeScriptReply('release', reply, [ScriptStatus.Ok, ScriptStatus.NotOwner] as const);
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
    decodeScriptReply('stamp-record', reply, [ScriptStatus.Ok] as const);
    for (const item of items) item.resolve();
  }

  private async forgetMany(source: string, items: BatchItem<void, StampWrite>[]): Promise<void> {
    const reply = await this.run('stampForget', source, items.map((i) => i.key), items.map((i) => i.id));
    decodeScriptReply('stamp-forget', reply, [ScriptStatus.Ok] as const);
    for (const item of items) item.resolve();
  }

  async recorded(address: string, ids: readonly string[]): Promise<boolean[]> {
    if (ids.length === 0) return [];
    const k = addressKeys(this.o.keyPrefix, address);
    const reply = await this.run('recorded', address, [k.ids, k.at], [this.o.ttl, ...ids]);
    return decodeRecordedReply(reply, ids.length);
  }

  async claimStamp(source: string, fingerprint: string, token: string, request: ClaimRequest): Promise<ClaimResult> {
    const reply = await this.run(
      'stampClaim',
      source,
      [stampKey(this.o.keyPrefix, source, fingerprint)],
      [token, this.o.lease, this.o.stampTtl, request.ownPrefix, request.since, request.recorded.length, ...request.recorded, ...request.notRecorded],
    );
    const r = decodeScriptReply('stamp-claim', reply, [
      ScriptStatus.Claimed,
      ScriptStatus.Check,
      ScriptStatus.None,
      ScriptStatus.Busy,
    ] as const);
    switch (r.status) {
      case ScriptStatus.Claimed:
        return { status: 'claimed', id: r.id, possibleDuplicate: r.possibleDuplicate, done: r.done };
      case ScriptStatus.Check:
        return { status: 'check', ids: r.ids };
      case ScriptStatus.None:
        return { status: 'none', possibleDuplicate: r.possibleDuplicate };
      case ScriptStatus.Busy:
        if (r.since === undefined) throw new ScriptReplyError('stamp-claim', 'busy without the clock');
        return { status: 'busy', since: r.since };
    }
  }

  async renewStamps(source: string, fingerprint: string, held: readonly { id: string; token: string }[]): Promise<string[]> {
    if (held.length === 0) return [];
    const reply = await this.run('stampRenew', source, [stampKey(this.o.keyPrefix, source, fingerprint)], [
      this.o.lease,
      this.o.stampTtl,
      ...held.flatMap((h) => [h.id, h.token]),
    ]);
    decodeScriptReply('stamp-renew', reply, [ScriptStatus.Ok] as const);
    return (reply as unknown[]).slice(1).map((id) => (Buffer.isBuffer(id) ? id.toString('utf8') : String(id)));
  }

  async markStampDone(source: string, fingerprint: string, id: string, token: string): Promise<void> {
    const reply = await this.run('stampDone', source, [stampKey(this.o.keyPrefix, source, fingerprint)], [id, token, this.o.stampTtl]);
    decodeScriptReply('stamp-done', reply, [ScriptStatus.Ok, ScriptStatus.NotOwner] as const);
  }

  forgetStamp(source: string, fingerprint: string, id: string): Promise<void> {
    return this.forgets.add(source, { key: stampKey(this.o.keyPrefix, source, fingerprint), id, token: '', flagged: false });
  }

  async releaseStamp(source: string, fingerprint: string, id: string, token: string): Promise<void> {
    const reply = await this.run(
      'stampRelease',
      source,
      [stampKey(this.o.keyPrefix, source, fingerprint)],
      [id, token, this.o.stampTtl],
    );
    decodeScriptReply('stamp-release', reply, [ScriptStatus.Ok, ScriptStatus.NotOwner] as const);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
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
  private async run(name: GuardedScript, tag: string, keys: string[], args: (string | number)[]): Promise<unknown> {
    this.assertOpen();
    const fn = (this.redis as unknown as Record<ScriptName, ScriptFn>)[name];
    const marker = epochKey(this.o.keyPrefix, tag);
    for (let attempt = 0; ; attempt++) {
      const seen = this.epochs.seen(tag);
      // A script of any number of keys takes their count first (the marker's key included).
      const head = SCRIPT_KEYS[name] === 'n' ? [keys.length + 1] : [];
      let reply: unknown;
      try {
        reply = await fn.apply(this.redis, [...head, marker, ...keys, seen, ...args]);
      } catch (err) {
        throw this.translate(err);
      }
      if (!Array.isArray(reply) || Number(reply[0]) !== EPOCH_CHANGED) return reply;
      if (attempt >= EPOCH_RETRIES) {
        throw new TransientError(`the duplicate-ID cache of '${tag}' in ${this.where} keeps changing under the bridge (epoch moved ${attempt + 1} times in a row)`);
      }
      await this.epochs.settle(tag, seen, String(reply[1]));
    }
  }

  /** Connection trouble → TransientError with a sentence; a script or argument bug (TypeError, …) stays a plain error. */
  private translate(err: unknown): Error {
    if (err instanceof ScriptReplyError || isProgrammerError(err)) return err;
    if (this.tlsProblem !== undefined) return this.tlsProblem;
    const message = err instanceof Error ? err.message : String(err);
    if (err instanceof Error && err.name === 'ReplyError' && /^(MOVED|ASK)\b/.test(message)) {
      return new Error(
        `Redis at ${this.where} is a node of a Redis Cluster (it answered ${message.split(' ')[0]}): configure id-cache.redis-cluster with its nodes instead of redis-url`,
        { cause: err },
      );
    }
    if (err instanceof Error && err.name === 'ReplyError' && /^(NOAUTH|WRONGPASS)\b/.test(message)) {
      // As a wrong broker password: no retry can fix it, and the sentence says what to change.
      return new ConfigError(
        `Redis at ${this.where} refused the login (${redactUrl(message)}): check the id-cache password (password-file, or the one in the Redis URL)`,
        { cause: err },
      );
    }
    if (err instanceof Error && err.name === 'ReplyError' && !TRANSIENT_REPLIES.test(message)) {
      return new Error(`Redis at ${this.where} refused a duplicate-ID cache command: ${redactUrl(message)}`, {
        cause: err,
      });
    }
    if (err instanceof Error && err.name === 'ReplyError') {
      return new TransientError(`Redis at ${this.where} is not available: ${redactUrl(message)}`, { cause: err });
    }
    if (message === 'Command timed out' && this.downReason === undefined) {
      return new TransientError(`Redis at ${this.where} did not answer within ${this.o.commandTimeout} ms`, {
        cause: err,
      });
    }
    const reason = this.downReason ?? connectionReason(err);
    return new TransientError(`Redis at ${this.where} is unreachable: ${reason}`, { cause: err });
  }
}

/** A low-level connection error as a few words ("connection refused"), without credentials. */
function connectionReason(err: unknown): string {
  const socket = socketSentence(err, 'reason');
  if (socket !== undefined) return socket;
  const message = err instanceof Error ? err.message : String(err);
  if (/^(NOAUTH|WRONGPASS)/.test(message)) return 'authentication failed';
  if (message === 'Connection is closed.') return 'connection closed';
  return redactUrl(message);
}

/** What a batched call carries for one message; reserve and commit use `id` and `token` only. */
interface IdToken {
  id: string;
  token: string;
}

/** A stamp record (or forget: `token` and `flagged` unused) of one source. */
interface StampWrite extends IdToken {
  key: string;
  flagged: boolean;
}

type BatchItem<R, P extends IdToken = IdToken> = P & {
  resolve(result: R): void;
  reject(err: unknown): void;
};

/**
 * The pairs after the first, as the scripts' one packed argument (`<bytes>:<id><bytes>:<token>` repeated), or nothing.
 * With two arguments per ID the client builds (and then flattens) a string of hundreds of pieces per call; one flat
 * argument cost about a third less client CPU per call of 200 IDs in a micro-benchmark (0.6 → 0.4 ms).
 */
export function packPairs(items: readonly { id: string; token: string }[]): string[] {
  if (items.length === 0) return [];
  const parts = new Array<string>(items.length);
  for (let i = 0; i < items.length; i++) {
    const { id, token } = items[i]!;
    parts[i] = `${Buffer.byteLength(id)}:${id}${Buffer.byteLength(token)}:${token}`;
  }
  return [parts.join('')];
}

/** Most pairs per script call: keeps one call's time inside Redis short (~10 µs a pair). */
const MAX_BATCH = 200;

/**
 * Most calls of one batcher in flight per address. Calls made while they are out wait and leave together when one
 * returns, so batches grow with the load instead of with how deliveries happen to be grouped: a STOMP source hands
 * over one frame per socket read, and with a call per read the reserves and commits of STOMP→AMQP went out ~1.5 IDs
 * per script call (26,266 calls for 20,000 messages in the bench), each paying the script's fixed cost in Redis
 * (~40 µs: the epoch guard's INFO, TIME, housekeeping) and a command in the client. Two, not one, so that a batch is
 * always being gathered while the other is answered.
 */
const MAX_IN_FLIGHT = 2;

/**
 * Collects calls per address until the current callback returns, and hands them over in chunks of at most MAX_BATCH,
 * with at most MAX_IN_FLIGHT chunks of one address out at a time (the rest wait for one to return).
 */
class AddressBatcher<R, P extends IdToken = IdToken> {
  private queued = new Map<string, BatchItem<R, P>[]>();
  private readonly inFlight = new Map<string, number>();
  private scheduled = false;

  constructor(private readonly send: (address: string, items: BatchItem<R, P>[]) => Promise<void>) {}

  /** `payload` must be a fresh object of the caller's: it becomes the batch item (a spread copy of it cost ~3 µs a call). */
  add(address: string, payload: P): Promise<R> {
    const item = payload as BatchItem<R, P>;
    const promise = new Promise<R>((resolve, reject) => {
      item.resolve = resolve;
      item.reject = reject;
    });
    const list = this.queued.get(address);
    if (list) list.push(item);
    else this.queued.set(address, [item]);
    if (!this.scheduled) {
      this.scheduled = true;
      // nextTick, not setImmediate: the calls made while one socket read is handled (a burst of deliveries or
      // confirms) still form one batch, without waiting behind the rest of the event loop (~3 ms measured).
      process.nextTick(() => this.flush());
    }
    return promise;
  }

  private flush(): void {
    this.scheduled = false;
    for (const address of [...this.queued.keys()]) this.sendQueued(address);
  }

  /** Sends what waits for `address`, as far as the in-flight limit allows; the rest goes when a call returns. */
  private sendQueued(address: string): void {
    const items = this.queued.get(address);
    if (items === undefined) return;
    let out = this.inFlight.get(address) ?? 0;
    let i = 0;
    while (i < items.length && out < MAX_IN_FLIGHT) {
      const chunk = items.slice(i, i + MAX_BATCH);
      i += chunk.length;
      out += 1;
      this.send(address, chunk)
        .catch((err: unknown) => {
          for (const item of chunk) item.reject(err);
        })
        .finally(() => this.returned(address));
    }
    this.inFlight.set(address, out);
    if (i >= items.length) this.queued.delete(address);
    else this.queued.set(address, i === 0 ? items : items.slice(i));
  }

  private returned(address: string): void {
    const out = (this.inFlight.get(address) ?? 1) - 1;
    if (out === 0) this.inFlight.delete(address);
    else this.inFlight.set(address, out);
    this.sendQueued(address);
  }
}

/**
 * The settings of several servers as one: the worst of each (a server without persistence, or with an evicting
 * policy, speaks for all), so that the warnings name what at least one master does.
 */
function mergeWorst(all: Map<string, string>[]): Map<string, string> {
  const out = new Map<string, string>(all[0] ?? []);
  for (const m of all.slice(1)) {
    if (m.get('appendonly') === 'no' && (m.get('save') ?? '').trim() === '') {
      out.set('appendonly', 'no');
      out.set('save', '');
    }
    const policy = m.get('maxmemory-policy') ?? '';
    if (policy.startsWith('allkeys-') || (policy.startsWith('volatile-') && !(out.get('maxmemory-policy') ?? '').startsWith('allkeys-'))) {
      out.set('maxmemory-policy', policy);
    }
  }
  return out;
}

/** CONFIG GET's reply as name → value: a flat [name, value, …] array (RESP2) or a map/object (RESP3). */
function configPairs(reply: unknown): Map<string, string> {
  const out = new Map<string, string>();
  const str = (v: unknown): string => (typeof v === 'string' ? v : Buffer.isBuffer(v) ? v.toString('utf8') : '');
  if (Array.isArray(reply)) {
    for (let i = 0; i + 1 < reply.length; i += 2) out.set(str(reply[i]), str(reply[i + 1]));
  } else if (reply instanceof Map) {
    for (const [k, v] of reply) out.set(str(k), str(v));
  } else if (reply !== null && typeof reply === 'object') {
    for (const [k, v] of Object.entries(reply)) out.set(k, str(v));
  }
  return out;
}
