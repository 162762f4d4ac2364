/**
 * What a protocol's record (./protocol.ts) is given and gives back for `broker-bridge check` (src/service/check.ts runs
 * the loop, the cache's Redis and the formatting): the context of one run, and what the run learnt of each connection
 * by reaching it, which the count of connections (`countConnections`) needs afterwards.
 */
import type { BridgeConfig, Config, ConnectionConfig, TargetConfig } from '../config/types.js';
import type { PlannedConnection } from '../config/connection-plan.js';
import type { Finding } from '../core/finding.js';

/** What connecting told about a connection: the AMQP broker's channel_max, whether the STOMP peer shares a connection. */
export interface Learnt {
  channelMax?: number;
  shared?: boolean;
}

/** One `check` run, as each record's `check` sees it. */
export interface CheckContext {
  config: Config;
  /** config.bridges. */
  bridges: readonly BridgeConfig[];
  /** `check --declare`: declare what the configuration names and the broker lacks (AMQP queues and exchanges). */
  declare: boolean;
  /** Filled by `check` (keyed by connection name), read by `countConnections` once every check has run. */
  learnt: Map<string, Learnt>;
}

/** What one connection of the configuration opens (src/config/connection-plan.ts), for the `connections` finding. */
export interface ConnectionCount {
  count: number;
  /** In the parentheses after the count: `consuming with 2 channels`, `one per endpoint: …`. */
  how: string;
  /** Anything wrong with it (an AMQP connection over its broker's channel_max). */
  findings?: Finding[];
}

/** What a record's `countConnections` gets: the connection's planned connections, the bridges, what `check` learnt. */
export interface CountContext {
  /** The planned connections of this connection (connectionPlan filtered on its name). */
  planned: readonly PlannedConnection[];
  bridges: readonly BridgeConfig[];
  learnt: Learnt | undefined;
}

/**
 * The count of a protocol whose peer may take many endpoints on one connection (STOMP, NATS, MQTT): one per planned
 * connection when `check` learnt that it does, one per endpoint otherwise (a peer that could not be reached is not
 * known to share one).
 */
export function sharedOrPerEndpoint({ planned, learnt }: CountContext): ConnectionCount {
  const shared = learnt?.shared === true;
  return {
    count: shared ? planned.length : planned.reduce((n, p) => n + p.endpoints, 0),
    how: shared
      ? 'shared: the peer takes many subscriptions per connection'
      : learnt?.shared === false
        ? 'one per endpoint: the peer does not share a connection'
        : 'one per endpoint: the peer was not reached, so is not known to share one',
  };
}

/** What each bridge uses on one connection: its source queue, its target, its dead-letter destination. */
export function usesOf(conn: ConnectionConfig, bridges: readonly BridgeConfig[]): { bridge: string; role: 'source' | 'target' | 'dead-letter'; target?: TargetConfig; queue?: string }[] {
  const uses: { bridge: string; role: 'source' | 'target' | 'dead-letter'; target?: TargetConfig; queue?: string }[] = [];
  for (const b of bridges) {
    if (b.source.connection.name === conn.name) uses.push({ bridge: b.name, role: 'source', queue: b.source.queue });
    if (b.target.connection.name === conn.name) uses.push({ bridge: b.name, role: 'target', target: b.target });
    if (b.deadLetter?.connection.name === conn.name) uses.push({ bridge: b.name, role: 'dead-letter', target: b.deadLetter });
  }
  return uses;
}
