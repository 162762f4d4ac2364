/** What a Redis duplicate-ID cache (./redis-id-cache.ts) is built with: where Redis is, and the cache's semantics. */
import type { IdCacheSemantics } from '../core/id-cache.js';
import type { RedisTopology, TlsConfig } from '../config/types.js';
import type { Logger } from '../shared/log.js';
import type { EpochReport } from './epochs.js';

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
  /**
   * How long the process keeps what it learnt of an address (or source) no call used (its epoch, ./epochs.ts), ms.
   * Default 10 min; the service passes the longest address-idle-timeout of the bridges.
   */
  addressIdleTimeout?: number;
  /** Told of every detected (or suspected) cache loss, after it is logged: for metrics. */
  onLoss?: (report: EpochReport) => void;
  log?: Logger;
  /**
   * This process's name, the first part of every owner token it makes: with it, the cache keeps the process's
   * liveness key set (./owner-liveness.ts) and takes over at once what dead owners hold. Without it (tools, tests),
   * owners are taken over only when their lease runs out.
   */
  owner?: string;
}
