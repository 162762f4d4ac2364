/**
 * Picks the duplicate-ID cache implementation from the configuration: Redis when persist-id-cache is true (the
 * default), the in-process cache otherwise — with a warning, since its IDs are lost on restart and not shared
 * between replicas.
 */
import type { IdCacheConfig } from '../config/types.js';
import { describeUrl, type Logger } from '../log.js';
import type { IdCache } from './id-cache.js';
import { MemoryIdCache } from './memory-id-cache.js';
import { RedisIdCache } from './redis-id-cache.js';

export function createIdCache(config: IdCacheConfig, log: Logger): IdCache {
  const common = {
    size: config.idCacheSize,
    lease: config.reservationLease,
    ...(config.idCacheTtl !== undefined ? { ttl: config.idCacheTtl } : {}),
  };
  if (!config.persistIdCache) {
    log.warn(
      { idCacheSize: config.idCacheSize },
      'duplicate-ID cache is in memory: it is lost on restart (and not shared between replicas); set persist-id-cache: true to keep it in Redis',
    );
    return new MemoryIdCache(common);
  }
  log.info(
    { redis: describeUrl(config.redisUrl), keyPrefix: config.keyPrefix, idCacheSize: config.idCacheSize },
    'duplicate-ID cache is in Redis',
  );
  return new RedisIdCache({
    ...common,
    url: config.redisUrl,
    keyPrefix: config.keyPrefix,
    log: log.child({ component: 'id-cache' }),
  });
}

/** What one bridge can have in flight towards one target address. */
export interface InFlightShare {
  bridge: string;
  /** The target address (TargetEndpoint.address, or any stable name of the destination). */
  address: string;
  /** The most unacknowledged messages the bridge holds at once (its prefetch). */
  inFlight: number;
}

/**
 * Warns at start, per target address, when id-cache-size is smaller than what can be in flight there (the sum over
 * the bridges forwarding to it × replicas): a resend of a message could then find its ID already evicted.
 * Returns the addresses it warned about.
 */
export function warnIfIdCacheTooSmall(config: IdCacheConfig, shares: InFlightShare[], log: Logger): string[] {
  const byAddress = new Map<string, { inFlight: number; bridges: string[] }>();
  for (const s of shares) {
    const entry = byAddress.get(s.address) ?? { inFlight: 0, bridges: [] };
    entry.inFlight += s.inFlight;
    entry.bridges.push(s.bridge);
    byAddress.set(s.address, entry);
  }
  const warned: string[] = [];
  for (const [address, { inFlight, bridges }] of byAddress) {
    const total = inFlight * Math.max(1, config.replicas);
    if (config.idCacheSize >= total) continue;
    warned.push(address);
    log.warn(
      { address, bridges, idCacheSize: config.idCacheSize, inFlight: total },
      `id-cache-size ${config.idCacheSize} is smaller than the ${total} messages that can be in flight to ${address} (prefetch × replicas): a resend could fall outside the duplicate-ID cache; raise id-cache-size to at least ${total}`,
    );
  }
  return warned;
}
