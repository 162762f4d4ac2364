/**
 * Picks the duplicate-ID cache implementation from the configuration: Redis when persist-id-cache is true (the
 * default), the in-process cache otherwise (config/warnings.ts warns at start that its IDs are lost on restart and
 * not shared between replicas; this logs only which one was chosen).
 */
import type { IdCacheConfig } from '../config/types.js';
import type { Logger } from '../shared/log.js';
import { describeTopology } from './redis-client.js';
import type { EpochReport } from './epochs.js';
import type { IdCache } from '../core/id-cache.js';
import { MemoryIdCache } from './memory-id-cache.js';
import { RedisIdCache } from './redis-id-cache.js';

/** What else a Redis cache of this process is told (RedisIdCacheOptions). */
export interface IdCacheExtras {
  /** Told of every detected (or suspected) loss of the cache, after it is logged: for metrics. */
  onLoss?: (report: EpochReport) => void;
  /** This process's name, the first part of its owner tokens (RedisIdCacheOptions.owner). */
  owner?: string;
  /**
   * How long the cache's per-address state of the process (not its data) outlives the address's last use, ms; the
   * longest address-idle-timeout of the bridges (default 10 min).
   */
  addressIdleTimeout?: number;
}

export function createIdCache(config: IdCacheConfig, log: Logger, extras: IdCacheExtras = {}): IdCache {
  const { onLoss, owner, addressIdleTimeout } = extras;
  const common = {
    size: config.idCacheSize,
    lease: config.reservationLease,
    ...(config.idCacheTtl !== undefined ? { ttl: config.idCacheTtl } : {}),
    idleExpiry: config.idCacheIdleExpiry,
  };
  if (!config.persistIdCache) {
    log.info(
      { idCacheSize: config.idCacheSize },
      'duplicate-ID cache is in memory: it is lost on restart (and not shared between replicas); set persist-id-cache: true to keep it in Redis',
    );
    return new MemoryIdCache(common);
  }
  log.info(
    { redis: describeTopology(config.redis), topology: config.redis.kind, keyPrefix: config.keyPrefix, idCacheSize: config.idCacheSize },
    'duplicate-ID cache is in Redis',
  );
  return new RedisIdCache({
    ...common,
    topology: config.redis,
    keyPrefix: config.keyPrefix,
    minReplicasAcked: config.minReplicasAcked,
    minReplicasTimeout: config.minReplicasTimeout,
    ...(addressIdleTimeout !== undefined ? { addressIdleTimeout } : {}),
    lossWindow: config.lossWindow,
    ...(onLoss !== undefined ? { onLoss } : {}),
    ...(owner !== undefined ? { owner } : {}),
    log,
    ...(config.password !== undefined ? { password: config.password } : {}),
    ...(config.tls !== undefined ? { tls: config.tls } : {}),
  });
}

/**
 * Before a process consumes anything with a Redis cache: throws ConfigError (after closing the cache) while a process of
 * a build that keeps the cache's layout 1 is alive on the same Redis and prefix (docs/operations.md#upgrading-the-cache-layout).
 * Nothing to check for the in-memory cache.
 */
export async function refuseBesideOldBuilds(cache: IdCache): Promise<void> {
  if (!(cache instanceof RedisIdCache)) return;
  try {
    await cache.refuseBesideOldBuilds();
  } catch (err) {
    await cache.close().catch(() => undefined);
    throw err;
  }
}
