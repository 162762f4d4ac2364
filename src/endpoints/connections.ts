/**
 * The broker connections of a process: made by the service (src/service/app.ts), handed to createEndpoints, shared by
 * the endpoints of every bridge. Connections belong to the process, channels and subscriptions to the bridges
 * (src/config/connection-plan.ts says which connection each endpoint goes to). A connection is made by the first
 * endpoint that needs it and closed when the last one let go; a changed connection setting (after a reload) is another
 * connection, used by the bridges started with it, while the old one closes when its last bridge drained.
 */
import type { ConnectionConfig } from '../config/types.js';
import type { AmqpConnectionConfig } from '../config/protocols/amqp-schema.js';
import type { StompConnectionConfig } from '../config/protocols/stomp-schema.js';
import { poolOf, poolSlot, type ConnectionRole } from '../config/connection-plan.js';
import type { OpenConnection } from '../core/metrics.js';
import type { Logger } from '../shared/log.js';
import { SharedAmqpConnection, type AmqpConnector } from './amqp/shared-connection.js';
import { SharedStompConnection, type StompConnector } from './stomp/shared-session.js';

/** What the registry needs of a connection of any protocol. */
interface Owner<E, L> {
  readonly idle: boolean;
  report(): OpenConnection[];
  acquire(events: E): Promise<L>;
}

type Hooks = { changed(): void; idle(): void };

export class Connections {
  private readonly amqpOwners = new Map<string, SharedAmqpConnection>();
  private readonly stompOwners = new Map<string, SharedStompConnection>();

  constructor(
    private readonly log: Logger,
    /** Called when a connection opened or went away (e.g. a log or a gauge refresh); the gauge itself reads open(). */
    private readonly changed: () => void = () => undefined,
  ) {}

  /** The connector of one bridge's AMQP endpoints on `conn`: the connections of its pair of the pool. */
  amqp(conn: AmqpConnectionConfig, bridgeName: string): AmqpConnector {
    return this.connector(this.amqpOwners, conn, bridgeName, (role, label, hooks) => new SharedAmqpConnection(conn, role, label, this.log.child({ connection: conn.name }), hooks));
  }

  /**
   * The connector of one bridge's STOMP endpoints on `conn`: the connections of its pair of the pool, shared where the
   * peer allows it (StompPeerProfile.sharedConnection), else one per endpoint.
   */
  stomp(conn: StompConnectionConfig, bridgeName: string): StompConnector {
    return this.connector(this.stompOwners, conn, bridgeName, (role, label, hooks) => new SharedStompConnection(conn, role, label, this.log.child({ connection: conn.name }), hooks));
  }

  /** Every connection open now, for GET /bridges and the bridge_connections gauge. */
  open(): OpenConnection[] {
    return [...this.amqpOwners.values(), ...this.stompOwners.values()].flatMap((o) => o.report());
  }

  /**
   * A bridge's connector on `conn`: each acquire looks up the connection of its role and pool pair, made on first use,
   * and takes a lease there. A connection with nothing open, nothing opening and nobody holding it is forgotten, so
   * that a setting changed by a reload leaves nothing behind; the next acquire makes a new one.
   */
  private connector<E, L, T extends Owner<E, L>>(
    owners: Map<string, T>,
    conn: ConnectionConfig,
    bridgeName: string,
    make: (role: ConnectionRole, label: string, hooks: Hooks) => T,
  ): { acquire(role: ConnectionRole, events: E): Promise<L> } {
    const pool = poolOf(conn);
    const slot = poolSlot(bridgeName, pool);
    return {
      acquire: (role, events) => {
        const key = keyOf(conn, role, slot);
        let owner = owners.get(key);
        if (owner === undefined) {
          const hooks: Hooks = {
            changed: () => this.changed(),
            idle: () => {
              if (owners.get(key)?.idle) owners.delete(key);
            },
          };
          owner = make(role, pool > 1 ? `${role} ${slot + 1}/${pool}` : role, hooks);
          owners.set(key, owner);
        }
        return owner.acquire(events);
      },
    };
  }
}

/** The settings as resolved, secrets included (the key never leaves the process): another setting, another connection. */
function keyOf(conn: ConnectionConfig, role: ConnectionRole, slot: number): string {
  return `${role}\u0000${slot}\u0000${JSON.stringify(conn)}`;
}
