/**
 * Which connections a configuration opens, worked out from the configuration alone: the one rule the endpoints follow
 * at run time (src/endpoints/connections.ts), the start-up warnings and `broker-bridge check` all use.
 *
 * Connections belong to the process, channels (AMQP) and subscriptions (STOMP) to the bridges: for each configured
 * connection the process keeps one connection for consuming and one for publishing — never one for both, since RabbitMQ
 * blocks a whole connection under a memory or disk alarm and a publishing connection must not carry the acks a consumer
 * needs to free memory — and `pool: N` makes that N pairs. A bridge goes to pair poolSlot(its name, N) of each
 * connection it uses: its source to the consuming connection of that pair, its target and dead-letter destination to
 * the publishing one.
 */
import type { BridgeConfig, ConnectionConfig } from './types.js';
import { configProtocolOf } from './protocols.js';

export type ConnectionRole = 'consume' | 'publish';

/** RabbitMQ's default channel_max (channels per connection), what a plan is held against before anything connected. */
export const RABBITMQ_DEFAULT_CHANNEL_MAX = 2047;

/** `pool` of a connection (1 when not set, or for a connection type without one). */
export function poolOf(conn: ConnectionConfig): number {
  return ('pool' in conn ? conn.pool : undefined) ?? 1;
}

/**
 * The pair (0 … pool-1) of a connection that a bridge's endpoints use: FNV-1a of the bridge name, so that it is the
 * same in every process, across restarts and reloads, whatever other bridges the file has.
 */
export function poolSlot(bridgeName: string, pool: number): number {
  if (pool <= 1) return 0;
  let h = 0x811c9dc5;
  for (let i = 0; i < bridgeName.length; i++) {
    h ^= bridgeName.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h % pool;
}

/** One connection of the plan: a configured connection's consuming or publishing connection of one pair. */
export interface PlannedConnection {
  /** The connection's key under `connections:`. */
  connection: ConnectionConfig;
  role: ConnectionRole;
  /** Its pair (0-based) and the connection's pool. */
  slot: number;
  pool: number;
  /** The bridges with an endpoint on it, in file order, each once. */
  bridges: string[];
  /** Endpoints on it: sources (consume), targets and dead-letter destinations (publish). */
  endpoints: number;
  /**
   * AMQP: the channels it carries at most: one per endpoint, and on a consuming connection one more, shared by every
   * source on it for the queue depth reads (src/endpoints/amqp/shared-connection.ts). 0 for STOMP.
   */
  channels: number;
}

/** Every connection the bridges open (before a STOMP peer says whether it takes more than one subscriber), in file order. */
export function connectionPlan(bridges: readonly BridgeConfig[]): PlannedConnection[] {
  const plan = new Map<string, PlannedConnection>();
  const use = (conn: ConnectionConfig, role: ConnectionRole, bridge: string): void => {
    const pool = poolOf(conn);
    const slot = poolSlot(bridge, pool);
    const key = `${conn.name}\u0000${role}\u0000${slot}`;
    const channels = configProtocolOf(conn.type).channels;
    let p = plan.get(key);
    if (p === undefined) {
      p = { connection: conn, role, slot, pool, bridges: [], endpoints: 0, channels: role === 'consume' ? (channels?.perConsumingConnection ?? 0) : 0 };
      plan.set(key, p);
    }
    p.endpoints += 1;
    if (channels !== undefined) p.channels += 1;
    if (p.bridges.at(-1) !== bridge) p.bridges.push(bridge);
  };
  for (const b of bridges) {
    use(b.source.connection, 'consume', b.name);
    use(b.target.connection, 'publish', b.name);
    if (b.deadLetter) use(b.deadLetter.connection, 'publish', b.name);
  }
  return [...plan.values()];
}

/**
 * The smallest pool with which no connection of `conn` carries more than `channelMax` channels, for these bridges
 * (exact: the pairs are the ones poolSlot gives); undefined when even the largest pool would not do.
 */
export function poolNeeded(conn: ConnectionConfig, bridges: readonly BridgeConfig[], channelMax: number): number | undefined {
  for (let pool = 1; pool <= 64; pool++) {
    const withPool = { ...conn, pool };
    const swap = (c: ConnectionConfig): ConnectionConfig => (c.name === conn.name ? withPool : c);
    const rebased = bridges.map((b) => ({
      ...b,
      source: { ...b.source, connection: swap(b.source.connection) },
      target: { ...b.target, connection: swap(b.target.connection) },
      ...(b.deadLetter ? { deadLetter: { ...b.deadLetter, connection: swap(b.deadLetter.connection) } } : {}),
    }));
    const worst = Math.max(0, ...connectionPlan(rebased).filter((p) => p.connection.name === conn.name).map((p) => p.channels));
    if (worst <= channelMax) return pool;
  }
  return undefined;
}

/**
 * Connections of the plan whose protocol counts channels (AMQP) that would carry more than `channelMax`, each as a sentence saying what to set.
 * A bridge whose channel cannot be opened there retries, and logs why (src/endpoints/amqp/shared-connection.ts).
 */
export function channelBudgetProblems(bridges: readonly BridgeConfig[], channelMax = RABBITMQ_DEFAULT_CHANNEL_MAX, where = "RabbitMQ's default channel_max"): string[] {
  const out: string[] = [];
  const said = new Set<string>();
  for (const p of connectionPlan(bridges)) {
    if (configProtocolOf(p.connection.type).channels === undefined || p.channels <= channelMax || said.has(p.connection.name)) continue;
    said.add(p.connection.name);
    const pool = poolNeeded(p.connection, bridges, channelMax);
    const cure = pool === undefined ? 'split the bridges over several processes' : `set pool: ${pool} on connection '${p.connection.name}'`;
    out.push(
      `connection '${p.connection.name}': its ${p.role === 'consume' ? 'consuming' : 'publishing'} connection${p.pool > 1 ? ` ${p.slot + 1}/${p.pool}` : ''} would carry ${p.channels} channels (${p.bridges.length} bridges), more than ${where} of ${channelMax}; the bridges past it cannot open their channels and keep retrying: ${cure}`,
    );
  }
  return out;
}
