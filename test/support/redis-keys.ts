/**
 * Removes what a test or a bench run left in the cache's Redis: every key under its key prefixes.
 */
import { Redis } from 'ioredis';

/** Most keys one DEL is given: a run of 1,000 bridges leaves tens of thousands, and one command of them all blocks Redis. */
const DEL_CHUNK = 500;

/** Deletes every key `<prefix>:*` of each prefix at `redisUrl`, on a connection of its own. */
export async function deleteKeysUnder(redisUrl: string, ...prefixes: readonly string[]): Promise<void> {
  const redis = new Redis(redisUrl);
  try {
    for (const prefix of prefixes) {
      const keys = await redis.keys(`${prefix}:*`);
      for (let i = 0; i < keys.length; i += DEL_CHUNK) await redis.del(...keys.slice(i, i + DEL_CHUNK));
    }
  } finally {
    redis.disconnect();
  }
}
