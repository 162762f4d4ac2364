/**
 * A protocol is one record: what the engine needs of it, declared once in its folder (`<protocol>/<protocol>-protocol.ts`)
 * and listed once in ./protocols.ts. The engine loops over the records (./create-endpoints.ts builds a bridge's
 * endpoints through them; the service hands `describeBridge` to the supervisors for /bridges and the page; `check`
 * and replay ask them too) instead of switching on a connection's `type`. How to add one: docs/development.md, "Adding a protocol".
 */
import type { BridgeConfig, ConnectionConfig, SourceConfig, TargetConfig } from '../config/types.js';
import type { Finding } from '../core/finding.js';
import type { SourceEndpoint, TargetEndpoint } from '../core/ports.js';
import type { Logger } from '../shared/log.js';
import type { Connections } from './connections.js';
import type { CheckContext, ConnectionCount, CountContext } from './protocol-check.js';
import type { ReplayReading } from './protocol-replay.js';

/** The connection of `type` T, as resolved (src/config/types.ts). */
export type ConnectionOf<T extends ConnectionConfig['type']> = Extract<ConnectionConfig, { type: T }>;

/** Everything a source factory gets: one object, so that a protocol takes what it needs and ignores the rest. */
export interface SourceOptions<C extends ConnectionConfig = ConnectionConfig> {
  /** The bridge as resolved (prefetch, max-in-flight-bytes, confirm-timeout, filter, …). */
  bridge: BridgeConfig;
  /** bridge.source, with its connection narrowed to this protocol's. */
  source: SourceConfig & { connection: C };
  /** A child logger of the bridge's, with `role: source`. */
  log: Logger;
  /** The process's shared connections (./connections.ts); absent when each endpoint connects on its own (tests, tools). */
  connections?: Connections;
}

/** Everything a target factory gets (the bridge's target or its dead-letter destination). */
export interface TargetOptions<C extends ConnectionConfig = ConnectionConfig> {
  bridge: BridgeConfig;
  /** bridge.target or bridge.deadLetter, with its connection narrowed to this protocol's. */
  target: TargetConfig & { connection: C };
  role: 'target' | 'dead-letter';
  log: Logger;
  connections?: Connections;
}

/** The record of one protocol. */
export interface Protocol<T extends ConnectionConfig['type'] = ConnectionConfig['type']> {
  /** The connection's `type:` in bridges.yaml. */
  readonly type: T;
  /** A new source endpoint for one session (constructors assign: nothing connects before open()). */
  createSource(options: SourceOptions<ConnectionOf<T>>): SourceEndpoint;
  /** A new target endpoint for one session. */
  createTarget(options: TargetOptions<ConnectionOf<T>>): TargetEndpoint;
  /** The source's address for /bridges and the page, after `<type> <connection> `: `queue 'orders'`. */
  describeSource(source: SourceConfig & { connection: ConnectionOf<T> }): string;
  /** The target's address, likewise: `exchange 'events' routing key 'a.b'`, `subject 'orders.{region}'`. */
  describeTarget(target: TargetConfig & { connection: ConnectionOf<T> }): string;
  /**
   * Whether the source can tell its depth (AMQP passive declare, JetStream num_pending): `true`, or why not, as the
   * note /bridges shows in its place (`not available over STOMP`).
   */
  readonly sourceDepth: true | string;
  /**
   * `broker-bridge check` for one connection of this type (src/service/check.ts loops over the connections): reach it
   * once and report what was found, one finding each — never consuming or publishing. Never throws: an unreachable
   * peer is an error finding. What connecting tells that the count needs goes into `context.learnt`.
   */
  check(conn: ConnectionOf<T>, context: CheckContext): Promise<Finding[]>;
  /** How many broker connections `run` opens on this connection, after every `check` ran (`context.learnt`). */
  countConnections(conn: ConnectionOf<T>, context: CountContext): ConnectionCount;
  /** Whether replay can read the bridge's dead-letter destination back, and how (src/service/replay-origin.ts). */
  readonly replay: ReplayReading<ConnectionOf<T>>;
}
