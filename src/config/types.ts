/**
 * The resolved configuration the rest of the code consumes: every default applied, every `${VAR}` substituted,
 * every cross-reference checked. Produced only by loadConfig() in ./load.ts from the schema in ./schema.ts.
 * Durations are milliseconds.
 */

export type Protocol = 'amqp' | 'stomp';

/**
 * A `tls:` block with its files read (at load time). Key material and the passphrase are secrets: they go to the TLS
 * socket and nowhere else (never into a log line or an error message). Turned into Node's tls.ConnectionOptions by
 * tlsConnectionOptions() in ./tls.ts.
 */
export interface TlsConfig {
  /** PEM text of the CA certificate(s) from `ca`, and the path it came from (for messages); default: the system's CAs. */
  ca?: string;
  caFile?: string;
  /** PEM client certificate (chain) from `cert`. */
  cert?: string;
  certFile?: string;
  /** PEM private key from `key` (secret). */
  key?: string;
  keyFile?: string;
  /** Passphrase of an encrypted key (secret). */
  passphrase?: string;
  /** Name the server certificate must be for (and SNI); default: the URL's host. */
  servername?: string;
  /** Default true; false accepts any server certificate. */
  rejectUnauthorized: boolean;
}

export interface AmqpConnectionConfig {
  name: string;
  type: 'amqp';
  /** One or more URLs; on a reconnect the next one is tried (failover). */
  urls: string[];
  /** AMQP heartbeat in seconds (default 10). */
  heartbeat: number;
  /** TCP connect + AMQP handshake timeout (default 10000). */
  connectTimeout: number;
  /** TLS options for amqps:// URLs; undefined = Node's defaults (system CAs, name from the URL). */
  tls?: TlsConfig;
}

export interface StompConnectionConfig {
  name: string;
  type: 'stomp';
  /** Failover list, tried in order on each connect (stomp://host:port, stomp+ssl://host:port; login:passcode@ allowed). */
  urls: string[];
  /** STOMP heart-beat [outgoing, incoming] ms (default [10000, 10000]). */
  heartBeat: [number, number];
  /** TCP connect + STOMP CONNECTED timeout (default 10000). */
  connectTimeout: number;
  /** STOMP `host` header (virtual host); default: the URL's host. */
  host?: string;
  /** TLS options for stomp+ssl:// URLs; undefined = Node's defaults (system CAs, name from the URL). */
  tls?: TlsConfig;
}

export type ConnectionConfig = AmqpConnectionConfig | StompConnectionConfig;

export interface SourceConfig {
  connection: ConnectionConfig;
  /** Queue name (AMQP queue; STOMP: `/queue/<queue>` unless it starts with `/`). */
  queue: string;
}

export interface TargetConfig {
  connection: ConnectionConfig;
  /** AMQP: queue name through the default exchange. STOMP: `/queue/<queue>` unless it starts with `/`. */
  queue?: string;
  /** AMQP only: exchange to publish to (with routing-key). */
  exchange?: string;
  /** AMQP only: routing key (default: queue, or ''). */
  routingKey?: string;
}

export interface RetryConfig {
  retryInterval: number; // default 2000
  retryIntervalMultiplier: number; // default 1.0
  maxRetryInterval: number; // default 2000
  /** -1 = forever (default). */
  reconnectAttempts: number;
}

export interface BridgeConfig extends RetryConfig {
  name: string;
  source: SourceConfig;
  target: TargetConfig;
  useDuplicateDetection: boolean; // default true
  duplicateIdHeader: string; // default _AMQ_DUPL_ID
  prefetch: number; // default 500
  maxDeliveryAttempts: number; // default 5
  deadLetter?: TargetConfig;
  /** How long to wait for a target confirmation before treating the connection as broken (default 15000). */
  confirmTimeout: number;
  /** Transactional batches: 1 = no batching (default). */
  maxBatchSize: number;
  /** Longest a partial batch waits for more messages (default 100). */
  maxBatchTime: number;
  /** Messages waiting or in flight and nothing forwarded for this long = stalled (default 60000). */
  stallTimeout: number;
}

export type RedisTopology =
  | { kind: 'standalone'; url: string }
  | { kind: 'cluster'; urls: string[] }
  | { kind: 'sentinel'; name: string; urls: string[] };

export interface IdCacheConfig {
  persistIdCache: boolean; // default true
  idCacheSize: number; // default 2000
  /** Optional expiry of recorded IDs by age; undefined = none. */
  idCacheTtl?: number;
  /** Where the Redis of the cache is: exactly one of redis-url (default redis://localhost:6379), redis-cluster, redis-sentinel. */
  redis: RedisTopology;
  /** After a commit, wait for this many replicas (Redis WAIT); 0 = no wait (default). */
  minReplicasAcked: number;
  /** Longest a commit waits for them (default 1000). */
  minReplicasTimeout: number;
  /** How long redelivered copies the cache cannot vouch for are flagged after a loss (default 86400000). */
  lossWindow: number;
  keyPrefix: string; // default broker-bridge
  /** Lease of a reservation / stamp claim; a crashed owner's reservation is taken over after it (default 30000). */
  reservationLease: number;
  /** How many bridge processes share this Redis; only used for the in-flight vs cache-size warning (default 1). */
  replicas: number;
  /** From `password-file` (secret); sent with AUTH, never logged. A password in the URL stays in the URL instead. */
  password?: string;
  /** TLS options for rediss:// URLs. */
  tls?: TlsConfig;
}

export interface Config {
  /** Absolute path of the file it came from, for messages. */
  file: string;
  connections: Record<string, ConnectionConfig>;
  idCache: IdCacheConfig;
  bridges: BridgeConfig[];
  /** Drain timeout on SIGTERM/SIGINT (default 10000). */
  shutdownTimeout: number;
  logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace';
  /** Port for Prometheus metrics and /health; undefined = off. Deprecated: http-port (httpPort carries its value). */
  metricsPort?: number;
  /** Port of the HTTP API (http-port, or the deprecated metrics-port); undefined = off, 0 = any free port. */
  httpPort?: number;
  /** Address the HTTP API listens on (default 127.0.0.1). */
  httpHost: string;
  /** Bearer token of the admin endpoints; undefined = admin endpoints off (ADMIN_TOKEN_FILE is read by the service). */
  adminToken?: string;
  /** Located notices about deprecated keys ("bridges.yaml:8:1 metrics-port: deprecated, …"), printed with the warnings. */
  deprecations: string[];
}
