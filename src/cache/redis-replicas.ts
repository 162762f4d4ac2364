/**
 * `min-replicas-acked`: holds a commit's answer (so the source is not acknowledged) until enough replicas have the
 * write, so that a failover to one of them cannot lose the ID. WAIT covers every earlier write of the connection, and
 * on a Cluster it must go to the master that ran the commit: the one serving the key's slot.
 */
import { Cluster as ClusterClass, type Redis } from 'ioredis';
import { TransientError } from '../shared/errors.js';
import { hashSlot } from './keys.js';
import type { CacheClient } from './redis-client.js';

export interface ReplicaWait {
  /** Replicas that must have the write (min-replicas-acked). */
  acked: number;
  /** Longest the wait lasts, ms (min-replicas-timeout). */
  timeout: number;
  /** Where the Redis is, for sentences. */
  where: string;
  /** Turns a client error into the cache's sentence (RedisConnectionState.translate). */
  translate: (err: unknown) => Error;
}

/** Resolves once `o.acked` replicas have the writes made so far to `key`'s master; rejects with TransientError if not. */
export async function waitForReplicas(redis: CacheClient, key: string, o: ReplicaWait): Promise<void> {
  let node: Redis | undefined;
  if (redis instanceof ClusterClass) {
    const owner = redis.slots[hashSlot(key)]?.[0];
    node = redis.nodes('master').find((n) => `${n.options.host}:${n.options.port}` === owner);
    if (node === undefined) throw new TransientError(`Redis at ${o.where}: no master known for the cache of a commit yet`);
  } else {
    node = redis;
  }
  let acked: number;
  try {
    acked = await node.wait(o.acked, o.timeout);
  } catch (err) {
    throw o.translate(err);
  }
  if (acked < o.acked) {
    throw new TransientError(
      `Redis at ${o.where}: a commit reached ${acked} replica(s) within ${o.timeout} ms, fewer than min-replicas-acked (${o.acked}); the source message stays unacknowledged and the commit is made again`,
    );
  }
}
