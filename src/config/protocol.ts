/**
 * A protocol as the configuration sees it: one record per protocol (./protocols/<protocol>.ts), listed once in
 * ./protocols.ts. The cross-checks, resolving, the cache address, the broker's name, the files of a connection, the
 * template keys, the warnings and the connection plan loop over the records (or look one up by the connection's
 * `type`) instead of switching on `type`; the engine's own record is src/endpoints/protocol.ts. A connection's keys and
 * resolved type are the protocol's schema module's (./protocols/<protocol>-schema.ts), not the record's: the record's
 * types come from the schema, so the schema cannot import the records. How to add one: docs/development.md, "Adding a
 * protocol".
 */
import type { AddressSyntax } from '../routing/address-values.js';
import type { ProblemCollector } from './problems.js';
import type { Data } from './raw-data.js';
import type { ConnectionFiles } from './referenced-file.js';
import type { ConfigFileConnection, ConfigFileSource, ConfigFileTarget } from './schema.js';
import type { BridgeConfig, ConnectionConfig, ConnectionKeysResolved, SourceConfig, TargetConfig } from './types.js';

export type ConnectionType = ConnectionConfig['type'];

/** The connection of `type` T as written in the file (schema output) and as resolved (./types.ts). */
export type FileConnectionOf<T extends ConnectionType> = Extract<ConfigFileConnection, { type: T }>;
export type ConnectionOf<T extends ConnectionType> = Extract<ConnectionConfig, { type: T }>;

export type Role = 'source' | 'target' | 'dead-letter';

/** The file's keys of a connection that resolving replaces for every protocol (./resolve.ts). */
export const CONNECTION_KEYS_RESOLVED: readonly ConnectionKeysResolved[] = ['url', 'urls', 'password-file', 'tls'];

/** What resolving gives every connection, whatever its protocol: its name, its URLs (password in) and its TLS files. */
export interface ResolvedParts {
  name: string;
  urls: string[];
  tls?: ConnectionFiles['tls'];
}

/** One endpoint of a bridge, as plain data (./raw-data.ts), for the cross-checks. */
export interface EndpointCheck {
  /** ['bridges', i, role]. */
  path: readonly PropertyKey[];
  ep: Data;
  role: Role;
  /** The connection's name. */
  connection: string;
  out: ProblemCollector;
}

/** Where one message goes, for a templated target: what the endpoint is given, and the cache address it is keyed by. */
export interface ResolvedRoute {
  /** AMQP: the routing key (on the target's exchange); STOMP: the destination; NATS: the subject; MQTT: the topic; AMQP 1.0: the node address. */
  route: string;
  /** The duplicate-ID cache's address: exactly cacheAddress() of a fixed target with this routing key or queue. */
  address: string;
}

/**
 * The node a source reads and a target on the same connection writes, for the same-node loop check (./cross-checks.ts):
 * `node` is compared, `shown` is what the message quotes, `key` where a target's problem is located.
 */
export interface LoopNodes {
  /** The word of the message: `same queue as the source`, `same node as the source`. */
  what: string;
  source(ep: Data): { node: string; shown: string } | undefined;
  target(ep: Data): { node: string; key: string } | undefined;
}

/** The record of one protocol, for the configuration. */
export interface ConfigProtocol<T extends ConnectionType = ConnectionType> {
  /** The connection's `type:` in bridges.yaml. */
  readonly type: T;

  // Cross-checks, on the plain data (./cross-checks.ts).
  /**
   * Its own keys on another protocol's endpoint (`host`), refused in its words: called for every record but the
   * endpoint's own, before the endpoint's own check. Absent where the other protocols refuse its keys in theirs.
   */
  refuseElsewhere?(check: EndpointCheck, host: ConfigProtocol): void;
  /** The keys of other protocols its endpoints refuse in their own words (refuseElsewhere leaves those alone). */
  readonly refuses: { readonly source: readonly string[]; readonly target: readonly string[] };
  /** What its endpoints take instead of another protocol's keys, as the sentence refusing one words it. */
  readonly takes: {
    /** After `connection 'c' is <type> (`: `its source takes queue` (MQTT's keys). */
    readonly source: string;
    readonly target: string;
    /** After `; use `: `queue` (NATS's keys). */
    readonly useSource: string;
    readonly useTarget: string;
  };
  /** A source's shape on this protocol (its own keys required, other protocols' keys it refuses itself). */
  checkSource(check: EndpointCheck): void;
  /** A target's or a dead-letter destination's shape. */
  checkTarget(check: EndpointCheck): void;
  /** The same-node loop check; absent where the protocol has a rule of its own (checkBridges) or none. */
  readonly loop?: LoopNodes;
  /** Rules across bridges (MQTT's client ids and topic loops), once over the whole file after the per-bridge checks. */
  checkBridges?(raw: Data, out: ProblemCollector): void;

  // Files (./files.ts).
  /** The scheme a URL must use for a `tls:` block to apply. */
  readonly tlsScheme: string;
  /** A URL naming a user, for the sentence asking for one beside `password-file`. */
  readonly userExample: string;
  /** The files of its own connection keys (NATS: credentials-file), read at load like password-file. */
  readFiles?(connection: FileConnectionOf<T>, urls: readonly string[], path: readonly (string | number)[], baseDir: string, out: ProblemCollector): ConnectionFiles;

  // Resolving (./resolve.ts).
  resolveConnection(connection: FileConnectionOf<T>, resolved: ResolvedParts, files: ConnectionFiles): ConnectionOf<T>;
  resolveSource(source: ConfigFileSource, connection: ConnectionOf<T>, bridge: string): SourceConfig;
  /** The target's keys resolving sets on this protocol (defaults), over the file's own. */
  targetDefaults?(target: ConfigFileTarget, connection: ConnectionOf<T>, bridge: string, role: Role): Partial<TargetConfig>;
  /** The file keys of a target that may be address templates (./env.ts TEMPLATE_KEYS is their union). */
  readonly templateKeys: readonly string[];
  /** The resolved target's text that is its address template, if any. */
  templateText(target: TargetConfig): string | undefined;

  // Addresses (./target-address.ts, ./broker-name.ts).
  /** What its brokers read as structure in an address: what a template value may not hold (../routing/address-values.ts). */
  readonly addressSyntax: AddressSyntax;
  /** Whether a target splits its address into tokens; absent: its syntax's tokensAlways. */
  splitsTokens?(target: TargetConfig & { connection: ConnectionOf<T> }): boolean;
  /**
   * Whether a `${property.topic}` its source hands on may hold the target's token separator as the topic's own
   * structure (MQTT with `topic-separator: "."`); absent: never.
   */
  topicSpansTokens?(source: SourceConfig & { connection: ConnectionOf<T> }): boolean;
  cacheAddress(target: TargetConfig & { connection: ConnectionOf<T> }): string;
  resolvedRoute(target: TargetConfig & { connection: ConnectionOf<T> }, resolved: string): ResolvedRoute;
  /** The broker `url` reaches (scheme, host, port, virtual host), before ./broker-name.ts bounds it. */
  brokerName(connection: ConnectionOf<T>, url: string): string;

  // Warnings and the connection plan (./warnings.ts, ./loop-warnings.ts, ./connection-plan.ts).
  /**
   * What `validate` and the start say of a bridge with an end on this protocol (MQTT 3.1.1's missing headers, an AMQP
   * template on an exchange of unknown type): called once per bridge that uses the protocol, in the order of its
   * source, target and dead-letter connections.
   */
  bridgeWarnings?(bridge: BridgeConfig, replicas: number): string[];
  /**
   * A connection that carries no headers, so no loop path (MQTT 3.1.1): its name for the loop warning and what to use
   * instead; undefined where it carries them.
   */
  headerless?(connection: ConnectionOf<T>): { what: string; instead: string } | undefined;
  /**
   * Where its endpoints are channels of a shared connection that the broker bounds (AMQP 0-9-1's channel_max): one per
   * endpoint, and on a consuming connection this many more (the depth reads' channel).
   */
  readonly channels?: { readonly perConsumingConnection: number };
}
