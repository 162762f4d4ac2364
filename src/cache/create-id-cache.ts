/**
 * Picks the duplicate-ID cache implementation from the configuration: Redis when persist-id-cache is true (the
 * default), the in-process cache otherwise (config/warnings.ts warns at start that its IDs are lost on restart and
 * not shared between replicas; this logs only which one was chosen).
 */
import type { IdCacheConfig } from '../config/types.js';
import { describeUrl, type Logger } from '../shared/log.js';
import type { IdCache } from '../core/id-cache.js';
import { MemoryIdCache } from './memory-id-cache.js';
import { RedisIdCache } from './redis-id-cache.js';

export function createIdCache(config: IdCacheConfig, log: Logger): IdCache {
  const common = {
    size: config.idCacheSize,
    lease: config.reservationLease,
    ...(config.idCacheTtl !== undefined ? { ttl: config.idCacheTtl } : {}),
  };
  if (!config.persistIdCache) {
    log.info(
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
    log,
    ...(config.password !== undefined ? { password: config.password } : {}),
    ...(config.tls !== undefined ? { tls: config.tls } : {}),
  });
}
