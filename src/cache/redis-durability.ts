/**
 * The durability checks of the Redis duplicate-ID cache (persist-id-cache: true): what an operator must know before
 * trusting a Redis with the cache — whether it keeps its data across a restart (AOF or RDB snapshots), and whether its
 * `maxmemory-policy` may evict the cache's keys. Read with CONFIG GET from every master (on a Cluster each holds the
 * cache of its slots); where CONFIG is disabled or not allowed (managed Redis), `skipped` says so.
 */
import { Cluster, type Redis } from 'ioredis';
import { redactUrl } from '../shared/errors.js';
import type { CacheClient } from './redis-client.js';

/** Transient errors (Redis unreachable) reject, through `translate`, as every other call of the cache does. */
export async function durabilityFindings(
  redis: CacheClient,
  where: string,
  translate: (err: unknown) => Error,
): Promise<{ warnings: string[]; skipped?: string }> {
  let settings: Map<string, string>;
  try {
    // On a Cluster, ask every master: each holds the cache of its slots.
    const servers: Redis[] = redis instanceof Cluster ? redis.nodes('master') : [redis];
    const replies = await Promise.all(servers.map(async (r) => configPairs(await r.config('GET', 'appendonly', 'save', 'maxmemory-policy'))));
    settings = mergeWorst(replies);
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    if (err instanceof Error && err.name === 'ReplyError' && /unknown command|NOPERM|no permissions|disabled/i.test(message)) {
      return { warnings: [], skipped: `Redis at ${where} does not allow CONFIG GET (${redactUrl(message)}): its persistence and eviction policy were not checked` };
    }
    throw translate(err);
  }
  const warnings: string[] = [];
  if (settings.get('appendonly') === 'no' && (settings.get('save') ?? '').trim() === '') {
    warnings.push(
      `Redis at ${where} keeps no data across a restart (appendonly no, no save points): a Redis restart empties the duplicate-ID cache, and re-sent IDs then pass; turn on appendonly (or RDB snapshots)`,
    );
  }
  const policy = settings.get('maxmemory-policy') ?? '';
  if (policy.startsWith('allkeys-')) {
    warnings.push(
      `Redis at ${where} has maxmemory-policy ${policy}: under memory pressure it evicts the duplicate-ID cache's keys (which have no TTL), and re-sent IDs then pass; use noeviction (a full Redis then holds messages instead)`,
    );
  } else if (policy.startsWith('volatile-')) {
    warnings.push(
      `Redis at ${where} has maxmemory-policy ${policy}: under memory pressure it evicts keys with a TTL, among them the stamp records of messages without IDs, and such a message redelivered after it may get a second ID that is not flagged; use noeviction (a full Redis then holds messages instead)`,
    );
  }
  return { warnings };
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
