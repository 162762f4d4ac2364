/**
 * From the validated file (kebab-case, as written) to the Config the code consumes (camelCase, every default
 * applied, connections embedded). Bridge settings are layered: schema default < `defaults:` < the bridge itself.
 * Nothing here mutates its input; every object in the result is new (connection objects are shared between the
 * endpoints that use the same connection, which lets the core tell them apart by identity).
 */
import type {
  BridgeConfig,
  Config,
  ConnectionConfig,
  RedisTopology,
  TargetConfig,
} from './types.js';
import {
  bridgeSettingDefaults,
  type BridgeSettingValues,
  type ConfigFile,
  type ConfigFileBridge,
  type ConfigFileConnection,
  type ConfigFileTarget,
} from './schema.js';
import { urlWithPassword, type ConfigFiles, type ConnectionFiles } from './files.js';

/** The bridge settings a layer sets, and only those, so that spreading it over a lower layer never writes `undefined`. */
function settingsSetIn(layer: Partial<BridgeSettingValues> | undefined): Partial<BridgeSettingValues> {
  if (layer === undefined) return {};
  const keys = new Set(Object.keys(bridgeSettingDefaults));
  return Object.fromEntries(
    Object.entries(layer).filter(([k, v]) => keys.has(k) && v !== undefined),
  );
}

function parseHeartBeat(value: string | [number, number]): [number, number] {
  if (Array.isArray(value)) return [value[0], value[1]];
  const [out = 0, inc = 0] = value.split(',').map((s) => Number.parseInt(s.trim(), 10));
  return [out, inc];
}

function resolveConnection(name: string, c: ConfigFileConnection, files: ConnectionFiles): ConnectionConfig {
  // The cross-checks guarantee exactly one of url / urls.
  const given = c.urls !== undefined ? [...c.urls] : c.url !== undefined ? [c.url] : [];
  // The password from password-file goes into the URLs, where the clients (and every redaction) expect credentials.
  const urls = given.map((u) => urlWithPassword(u, files.password));
  const tls = files.tls !== undefined ? { tls: files.tls } : {};
  if (c.type === 'amqp') {
    return { name, type: 'amqp', urls, heartbeat: c.heartbeat, connectTimeout: c['connect-timeout'], ...tls };
  }
  return {
    name,
    type: 'stomp',
    urls,
    heartBeat: parseHeartBeat(c['heart-beat']),
    connectTimeout: c['connect-timeout'],
    ...(c.host !== undefined ? { host: c.host } : {}),
    ...tls,
  };
}

function lookup(connections: Record<string, ConnectionConfig>, name: string): ConnectionConfig {
  const c = connections[name];
  // Unreachable after the cross-checks; a programmer error if it happens.
  if (c === undefined) throw new TypeError(`connection '${name}' was not resolved`);
  return c;
}

function resolveTarget(connections: Record<string, ConnectionConfig>, t: ConfigFileTarget): TargetConfig {
  const connection = lookup(connections, t.connection);
  const out: TargetConfig = { connection };
  if (t.queue !== undefined) out.queue = t.queue;
  if (connection.type === 'amqp') {
    if (t.exchange !== undefined) out.exchange = t.exchange;
    out.routingKey = t['routing-key'] ?? t.queue ?? '';
  }
  return out;
}

function resolveBridge(
  connections: Record<string, ConnectionConfig>,
  defaults: ConfigFile['defaults'],
  b: ConfigFileBridge,
): BridgeConfig {
  const s: BridgeSettingValues = {
    ...bridgeSettingDefaults,
    ...settingsSetIn(defaults),
    ...settingsSetIn(b),
  };
  const bridge: BridgeConfig = {
    name: b.name,
    source: { connection: lookup(connections, b.source.connection), queue: b.source.queue },
    target: resolveTarget(connections, b.target),
    useDuplicateDetection: s['use-duplicate-detection'],
    duplicateIdHeader: s['duplicate-id-header'],
    prefetch: s.prefetch,
    maxDeliveryAttempts: s['max-delivery-attempts'],
    confirmTimeout: s['confirm-timeout'],
    maxBatchSize: s['max-batch-size'],
    maxBatchTime: s['max-batch-time'],
    stallTimeout: s['stall-timeout'],
    retryInterval: s['retry-interval'],
    retryIntervalMultiplier: s['retry-interval-multiplier'],
    maxRetryInterval: s['max-retry-interval'],
    reconnectAttempts: s['reconnect-attempts'],
  };
  if (b['dead-letter'] !== undefined) bridge.deadLetter = resolveTarget(connections, b['dead-letter']);
  return bridge;
}

/** The one Redis topology given (the cross-checks reject two), or the default standalone Redis. */
function redisTopology(ic: ConfigFile['id-cache']): RedisTopology {
  if (ic['redis-cluster'] !== undefined) return { kind: 'cluster', urls: ic['redis-cluster'] };
  if (ic['redis-sentinel'] !== undefined) {
    return { kind: 'sentinel', name: ic['redis-sentinel'].name, urls: ic['redis-sentinel'].urls };
  }
  return { kind: 'standalone', url: ic['redis-url'] ?? DEFAULT_REDIS_URL };
}

const DEFAULT_REDIS_URL = 'redis://localhost:6379';

/** Builds the Config from a file that passed the schema and the cross-checks, and the files it names (./files.ts). */
export function resolveConfig(file: ConfigFile, absolutePath: string, files: ConfigFiles): Config {
  const connections: Record<string, ConnectionConfig> = {};
  for (const [name, c] of Object.entries(file.connections)) connections[name] = resolveConnection(name, c, files.connections[name] ?? {});
  const ic = file['id-cache'];
  const config: Config = {
    file: absolutePath,
    connections,
    idCache: {
      persistIdCache: ic['persist-id-cache'],
      idCacheSize: ic['id-cache-size'],
      redis: redisTopology(ic),
      minReplicasAcked: ic['min-replicas-acked'],
      minReplicasTimeout: ic['min-replicas-timeout'],
      lossWindow: ic['loss-window'],
      keyPrefix: ic['key-prefix'],
      reservationLease: ic['reservation-lease'],
      replicas: ic.replicas,
      ...(ic['id-cache-ttl'] !== undefined ? { idCacheTtl: ic['id-cache-ttl'] } : {}),
      ...(files.idCache.password !== undefined ? { password: files.idCache.password } : {}),
      ...(files.idCache.tls !== undefined ? { tls: files.idCache.tls } : {}),
    },
    bridges: file.bridges.map((b) => resolveBridge(connections, file.defaults, b)),
    shutdownTimeout: file['shutdown-timeout'],
    logLevel: file['log-level'],
    httpHost: file['http-host'],
    deprecations: [],
  };
  if (file['metrics-port'] !== undefined) config.metricsPort = file['metrics-port'];
  const httpPort = file['http-port'] ?? file['metrics-port'];
  if (httpPort !== undefined) config.httpPort = httpPort;
  if (file['admin-token'] !== undefined) config.adminToken = file['admin-token'];
  return config;
}
