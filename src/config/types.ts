/**
 * The resolved configuration the rest of the code consumes: every default applied, every `${VAR}` substituted,
 * every cross-reference checked. Produced only by loadConfig() in ./load.ts.
 *
 * Each type is the schema's output (./schema.ts: the one place of a key's type, default and description) with its
 * keys in camelCase; written out here is only what resolving changes: connections named and embedded where they are
 * referred to, `url`/`urls` as one list carrying the password of `password-file`, `tls:` files read, the Redis
 * topology as one value, the STOMP heart-beat as a pair. Durations are milliseconds, as in the file.
 */
import type { HeaderRules } from '../routing/header-rules.js';
import type { Selector } from '../routing/selector.js';
import type { CamelKeys } from './camel-keys.js';
import type { BridgeSettingValues, ConfigFile, ConfigFileBridge, ConfigFileSource, ConfigFileTarget } from './schema.js';
import type { ConnectionConfigs } from './connection-types.js';

import type { TlsConfig } from './connection-types.js';
export type { ConnectionKeysResolved, TlsConfig } from './connection-types.js';

/** A resolved connection, of any protocol: the union of every protocol's (./connection-types.ts ConnectionConfigs). */
export type ConnectionConfig = ConnectionConfigs[keyof ConnectionConfigs];

/**
 * `queue` on AMQP and STOMP (and the stream on NATS, '' on MQTT); `topic` and the other MQTT keys on MQTT, where
 * resolving applies their defaults and sets `clientId` to the one the endpoint connects with
 * (../config/protocols/mqtt-address.ts defaultClientId, unless the file sets it).
 */
export type SourceConfig = CamelKeys<Omit<ConfigFileSource, 'connection' | 'queue' | 'consumer' | 'exclusive'>> & {
  connection: ConnectionConfig;
  /**
   * AMQP and STOMP: the queue. NATS: the stream (`stream`), so that messages and checks can name what is read. MQTT: ''.
   * AMQP 1.0: the node address (`address`, which it also keeps).
   */
  queue: string;
  /** NATS only: the durable pull consumer (`consumer`). */
  consumer?: string;
  /** `exclusive`: the only active consumer of the queue; other processes stand by. */
  exclusive: boolean;
};

/**
 * On an AMQP connection, routingKey is always set: `routing-key`, else the queue, else ''. On MQTT, the MQTT keys have
 * their defaults and `clientId` is set (as for SourceConfig).
 */
export type TargetConfig = CamelKeys<Omit<ConfigFileTarget, 'connection'>> & {
  connection: ConnectionConfig;
  /**
   * A bridge's target only: its routing key (AMQP), queue (STOMP), subject (NATS), topic (MQTT) or address (AMQP 1.0) when that is an address template with references
   * (src/routing/address-template.ts), as written; the key itself keeps the same text. Undefined for a fixed target,
   * whose routing key or queue is then the literal address (`$${` unescaped).
   */
  template?: string;
};

/** The per-bridge settings, resolved: schema default < `defaults:` < the bridge. */
export type BridgeSettings = CamelKeys<BridgeSettingValues>;

export type BridgeConfig = BridgeSettings & {
  name: ConfigFileBridge['name'];
  /** `state:` as declared (default running); src/core/supervisor/pause-state.ts applies it. */
  state: ConfigFileBridge['state'];
  source: SourceConfig;
  target: TargetConfig;
  deadLetter?: TargetConfig;
  /** `rename-headers`, `remove-headers`, `set-headers`; undefined = none. */
  headerRules?: HeaderRules;
  /**
   * `filter`, compiled (checked when the file was loaded): only the messages it selects are forwarded; what happens to
   * the others is filterMiss. Serialises as its text (JSON.stringify), which is what reload compares.
   */
  filter?: Selector;
};

type IdCacheFile = ConfigFile['id-cache'];

/** Where the Redis of the cache is: the one of redis-url (default), redis-cluster and redis-sentinel given. */
export type RedisTopology =
  | { kind: 'standalone'; url: string }
  | { kind: 'cluster'; urls: string[] }
  | ({ kind: 'sentinel' } & NonNullable<IdCacheFile['redis-sentinel']>);

export type IdCacheConfig = CamelKeys<
  Omit<IdCacheFile, 'redis-url' | 'redis-cluster' | 'redis-sentinel' | 'password-file' | 'tls'>
> & {
  redis: RedisTopology;
  /** From `password-file` (secret); sent with AUTH, never logged. A password in the URL stays in the URL instead. */
  password?: string;
  tls?: TlsConfig;
};

/**
 * httpPort is `http-port`, else the deprecated `metrics-port` (metricsPort keeps its own value); undefined = off,
 * 0 = any free port.
 */
export type Config = CamelKeys<Omit<ConfigFile, 'connections' | 'id-cache' | 'defaults' | 'bridges'>> & {
  /** Absolute path of the file it came from, for messages. */
  file: string;
  connections: Record<string, ConnectionConfig>;
  idCache: IdCacheConfig;
  bridges: BridgeConfig[];
  /** Located notices about deprecated keys ("bridges.yaml:8:1 metrics-port: deprecated, …"), printed with the warnings. */
  deprecations: string[];
};
