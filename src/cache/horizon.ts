/**
 * How far back one address's cache reaches in Redis: ZCARD of its circular list, and the commit time of its lowest
 * entry (the oldest remembered, read from its `st` entry `c<time>…`) against the Redis clock. Three reads of keys that share the address's hash tag (one
 * slot on a Cluster) plus TIME; no script, nothing written.
 */
import type { Cluster, Redis } from 'ioredis';
import type { CacheHorizon } from '../core/id-cache.js';
import type { AddressKeys } from './keys.js';

export async function readHorizon(redis: Redis | Cluster, keys: AddressKeys): Promise<CacheHorizon> {
  const [ids, oldest] = await Promise.all([redis.zcard(keys.ids), redis.zrange(keys.ids, '0', '0')]);
  const id = oldest[0];
  if (ids === 0 || id === undefined) return { ids, oldestAgeMs: null };
  // Commit times are the Redis clock's (the scripts use TIME); on a Cluster, TIME may come from another node, whose
  // clock is the same machine's or an NTP-synchronised one: far below the seconds a horizon is read in.
  const [entry, time] = await Promise.all([redis.hget(keys.st, id), redis.time()]);
  const at = entry === null ? undefined : /^c(\d+)/.exec(entry)?.[1];
  const now = Number(time[0]) * 1000 + Math.floor(Number(time[1]) / 1000);
  return { ids, oldestAgeMs: at === undefined ? null : Math.max(0, now - Number(at)) };
}
