/**
 * The broker connections of a process: made by the service (src/service/app.ts), handed to createEndpoints, shared by
 * the endpoints of every bridge. Connections belong to the process, channels and subscriptions to the bridges
 * (src/config/connection-plan.ts says which connection each endpoint goes to). A connection is made by the first
 * endpoint that needs it and closed when the last one let go; a changed connection setting (after a reload) is another
 * connection, used by the bridges started with it, while the old one closes when its last bridge drained.
 */
import type { AmqpConnectionConfig, ConnectionConfig, StompConnectionConfig } from '../config/types.js';
import { poolOf, poolSlot, type ConnectionRole } from '../config/connection-plan.js';
import type { OpenConnection } from '../core/metrics.js';
import type { Logger } from '../shared/log.js';
import { SharedAmqpConnection, type AmqpConnector } from './amqp/shared-connection.js';
import { SharedStompConnection, type StompConnector } from './stomp/shared-session.js';

interface Owner {
  readonly idle: boolean;
  report(): OpenConnection[];
}

export class Connections {
  private readonly owners = new Map<string, { made: unknown; owner: Owner }>();

  constructor(
    private readonly log: Logger,
    /** Called when a connection opened or went away (e.g. a log or a gauge refresh); the gauge itself reads open(). */
    private readonly changed: () => void = () => undefined,
  ) {}

  /** The connector of one bridge's AMQP endpoints on `conn`: the connections of its pair of the pool. */
  amqp(conn: AmqpConnectionConfig, bridgeName: string): AmqpConnector {
    const pool = poolOf(conn);
    const slot = poolSlot(bridgeName, pool);
    return {
      acquire: (role, events) =>
        this.owner(conn, role, slot, () => {
          const made = new SharedAmqpConnection(conn, role, label(role, slot, pool), this.log.child({ connection: conn.name }), this.hooks(conn, role, slot));
          return { made, owner: amqpOwner(conn, role, made) };
        }).acquire(events),
    };
  }

  /**
   * The connector of one bridge's STOMP endpoints on `conn`: the connections of its pair of the pool, shared where the
   * peer allows it (StompPeerProfile.sharedConnection), else one per endpoint.
   */
  stomp(conn: StompConnectionConfig, bridgeName: string): StompConnector {
    const pool = poolOf(conn);
    const slot = poolSlot(bridgeName, pool);
    return {
      acquire: (role, events) =>
        this.owner(conn, role, slot, () => {
          const made = new SharedStompConnection(conn, role, label(role, slot, pool), this.log.child({ connection: conn.name }), this.hooks(conn, role, slot));
          return { made, owner: made };
        }).acquire(events),
    };
  }

  /** Every connection open now, for GET /bridges and the bridge_connections gauge. */
  open(): OpenConnection[] {
    return [...this.owners.values()].flatMap((o) => o.owner.report());
  }

  /** The owner of a connection, made on first use; `make` gives the connection and how the registry reads it. */
  private owner<T>(conn: ConnectionConfig, role: ConnectionRole, slot: number, make: () => { made: T; owner: Owner }): T {
    const key = keyOf(conn, role, slot);
    const existing = this.owners.get(key);
    if (existing !== undefined) return existing.made as T;
    const entry = make();
    this.owners.set(key, entry);
    return entry.made;
  }

  private hooks(conn: ConnectionConfig, role: ConnectionRole, slot: number): { changed(): void; idle(): void } {
    const key = keyOf(conn, role, slot);
    return {
      changed: () => this.changed(),
      // Nothing open and nobody waiting: forgotten, so that a setting changed by a reload leaves no owner behind. The
      // next acquire looks the key up again and makes a new one.
      idle: () => {
        if (this.owners.get(key)?.owner.idle) this.owners.delete(key);
      },
    };
  }
}

/** The settings as resolved, secrets included (the key never leaves the process): another setting, another connection. */
function keyOf(conn: ConnectionConfig, role: ConnectionRole, slot: number): string {
  return `${role}\u0000${slot}\u0000${JSON.stringify(conn)}`;
}

/** `consume`, or `consume 2/4` in a pool of 4: part of the connection's name. */
function label(role: ConnectionRole, slot: number, pool: number): string {
  return pool > 1 ? `${role} ${slot + 1}/${pool}` : role;
}

function amqpOwner(conn: AmqpConnectionConfig, role: ConnectionRole, c: SharedAmqpConnection): Owner {
  return {
    get idle() {
      return c.idle;
    },
    report() {
      const s = c.state;
      if (s === undefined) return [];
      return [{ name: s.name, connection: conn.name, protocol: 'amqp', role, broker: s.broker, endpoints: s.leases, channels: s.channels, channelMax: s.channelMax, blocked: s.blocked }];
    },
  };
}
