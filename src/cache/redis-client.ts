/**
 * Builds the ioredis client of the cache for each Redis topology (docs/design.md §4.6): a standalone Redis (`redis-url`), a Redis
 * Cluster (`redis-cluster`: ioredis's Cluster follows MOVED and ASK and sends every call to the master of its slot) or
 * a master found through Sentinel (`redis-sentinel`: ioredis asks the sentinels again after a failover). The connection
 * policy is the same for all three (see redis-id-cache.ts): bounded commands, never give up reconnecting.
 *
 * User, password, database and TLS (`rediss://`) come from the URLs; for Cluster and Sentinel from the first one.
 */
import type { ConnectionOptions } from 'node:tls';
import { Cluster, Redis, type ClusterNode, type RedisOptions } from 'ioredis';
import type { RedisTopology } from '../config/types.js';
import { urlWithPassword } from '../config/files.js';
import { describeUrl } from '../shared/log.js';

export type CacheClient = Redis | Cluster;

export interface ClientPolicy {
  commandTimeout: number;
  connectTimeout: number;
  /** From `password-file`: replaces the (absent) password of the URLs. */
  password?: string;
  /** For rediss:// URLs: CA, client certificate, server name (config/tls.ts). */
  tls?: ConnectionOptions;
  /** True once a failure no retry can fix happened (a TLS certificate problem): reconnecting stops. */
  stopRetrying?: () => boolean;
}

/** Every URL of a topology. */
export function topologyUrls(topology: RedisTopology): string[] {
  return topology.kind === 'standalone' ? [topology.url] : topology.urls;
}

/** Where the cache is, for logs and error messages (no credentials). */
export function describeTopology(topology: RedisTopology): string {
  switch (topology.kind) {
    case 'standalone':
      return describeUrl(topology.url);
    case 'cluster':
      return `Redis Cluster ${topology.urls.map(describeUrl).join(', ')}`;
    case 'sentinel':
      return `master '${topology.name}' of Sentinel ${topology.urls.map(describeUrl).join(', ')}`;
  }
}

/**
 * Pace of reconnect attempts, for a node and for a whole Cluster: never give up (the bridge resumes by itself when
 * Redis is back), unless a failure no retry can fix happened.
 */
function reconnectDelay(policy: ClientPolicy): (times: number) => number | null {
  return (times) => (policy.stopRetrying?.() === true ? null : Math.min(100 * times, 2000));
}

/** Connection settings shared by every topology; see redis-id-cache.ts for why each is what it is. */
function baseOptions(policy: ClientPolicy): RedisOptions {
  return {
    // Calls are batched by address in the cache and the socket gathers the writes of one tick: ioredis's own
    // auto-pipelining would only add its per-command bookkeeping.
    enableAutoPipelining: false,
    commandTimeout: policy.commandTimeout,
    connectTimeout: policy.connectTimeout,
    // A connection that swallows commands without answering (a network black hole) is dropped and rebuilt.
    socketTimeout: policy.commandTimeout * 2,
    // A command waits in the offline queue only until the next failed reconnect attempt: fail closed quickly. A command
    // whose reply was lost gets one resend (the scripts are replay-safe per owner token).
    maxRetriesPerRequest: 1,
    retryStrategy: reconnectDelay(policy),
    connectionName: 'broker-bridge-id-cache',
  };
}

/** User, password, database and TLS of a redis:// or rediss:// URL, as ioredis options. */
function credentialsOf(url: string, policy: ClientPolicy): Pick<RedisOptions, 'username' | 'password' | 'db' | 'tls'> {
  const u = new URL(urlWithPassword(url, policy.password));
  const db = u.pathname.replace(/^\//, '');
  return {
    ...(u.username !== '' ? { username: decodeURIComponent(u.username) } : {}),
    ...(u.password !== '' ? { password: decodeURIComponent(u.password) } : {}),
    ...(db !== '' && /^\d+$/.test(db) ? { db: Number(db) } : {}),
    ...(u.protocol === 'rediss:' ? { tls: policy.tls ?? {} } : {}),
  };
}

function hostPort(url: string): { host: string; port: number } {
  const u = new URL(url);
  return { host: u.hostname.replace(/^\[|\]$/g, ''), port: u.port === '' ? 6379 : Number(u.port) };
}

export function createCacheClient(topology: RedisTopology, policy: ClientPolicy): CacheClient {
  switch (topology.kind) {
    case 'standalone':
      // The password in the URL, not in the options: ioredis lets the URL's (empty) password win over them.
      return new Redis(urlWithPassword(topology.url, policy.password), {
        ...baseOptions(policy),
        ...(/^rediss:/i.test(topology.url) ? { tls: policy.tls ?? {} } : {}),
      });
    case 'sentinel': {
      const first = topology.urls[0]!;
      const { username, password, db, tls } = credentialsOf(first, policy);
      return new Redis({
        ...baseOptions(policy),
        name: topology.name,
        sentinels: topology.urls.map(hostPort),
        ...(username !== undefined ? { username, sentinelUsername: username } : {}),
        ...(password !== undefined ? { password, sentinelPassword: password } : {}),
        ...(db !== undefined ? { db } : {}),
        ...(tls !== undefined ? { tls, sentinelTLS: tls, enableTLSForSentinelMode: true } : {}),
        // Ask the sentinels again quickly after a failover, not only after the old master refuses writes.
        sentinelRetryStrategy: (times: number) => Math.min(100 * times, 1000),
        // A master demoted to replica answers READONLY: reconnect (through the sentinels) instead of failing every call.
        reconnectOnError: (err: Error) => (/^READONLY/.test(err.message) ? 2 : false),
      });
    }
    case 'cluster': {
      const first = topology.urls[0]!;
      const { username, password, tls } = credentialsOf(first, policy);
      const nodes: ClusterNode[] = topology.urls.map(hostPort);
      return new Cluster(nodes, {
        redisOptions: {
          ...baseOptions(policy),
          ...(username !== undefined ? { username } : {}),
          ...(password !== undefined ? { password } : {}),
          ...(tls !== undefined ? { tls } : {}),
        },
        scaleReads: 'master',
        enableAutoPipelining: false,
        // The cluster-level counterpart of retryStrategy: never give up finding the cluster again.
        clusterRetryStrategy: reconnectDelay(policy),
        // During a failover the slot has no master for a moment (CLUSTERDOWN, TRYAGAIN, a dead node): retry a few
        // times, refreshing the slot map, before the call fails as transient and the bridge holds its messages.
        retryDelayOnFailover: 200,
        retryDelayOnClusterDown: 200,
        retryDelayOnTryAgain: 200,
        maxRedirections: 16,
        slotsRefreshTimeout: policy.commandTimeout,
      });
    }
  }
}
