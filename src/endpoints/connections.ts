/**
 * The broker connections of a process: made by the service (src/service/app.ts), handed to createEndpoints, shared by
 * the endpoints of every bridge. Connections belong to the process, channels and subscriptions to the bridges
 * (src/config/connection-plan.ts says which connection each endpoint goes to). A connection is made by the first
 * endpoint that needs it and closed when the last one let go; a changed connection setting (after a reload) is another
 * connection, used by the bridges started with it, while the old one closes when its last bridge drained.
 */
import type { ConnectionConfig } from '../config/types.js';
import { poolOf, poolSlot, type ConnectionRole } from '../config/connection-plan.js';
import type { OpenConnection } from '../core/metrics.js';
import type { Logger } from '../shared/log.js';

/**
 * What the registry needs of a shared connection of any protocol (AMQP's SharedAmqpConnection, STOMP's
 * SharedStompConnection): whether it holds nothing, what it reports, and a lease for one endpoint.
 */
export interface SharedOwner<E, L> {
  readonly idle: boolean;
  report(): OpenConnection[];
  acquire(events: E): Promise<L>;
}

/** What a shared connection calls back: it opened or went away (`changed`), it holds nothing any more (`idle`). */
export type OwnerHooks = { changed(): void; idle(): void };

/** How a protocol makes one shared connection: for a role and pool pair, its label, a logger and the hooks. */
export type MakeOwner<E, L> = (role: ConnectionRole, label: string, log: Logger, hooks: OwnerHooks) => SharedOwner<E, L>;

export class Connections {
  /** Every protocol's shared connections, keyed by their settings (which hold the protocol's type), role and pair. */
  private readonly owners = new Map<string, SharedOwner<never, unknown>>();

  constructor(
    private readonly log: Logger,
    /** Called when a connection opened or went away (e.g. a log or a gauge refresh); the gauge itself reads open(). */
    private readonly changed: () => void = () => undefined,
  ) {}

  /**
   * The connector of one bridge's endpoints on `conn`, for a protocol whose endpoints share connections (its record's
   * factories ask for it: AMQP 0-9-1, STOMP): each acquire looks up the connection of its role and pool pair, made by
   * `make` on first use, and takes a lease there. A connection with nothing open, nothing opening and nobody holding it
   * is forgotten, so that a setting changed by a reload leaves nothing behind; the next acquire makes a new one.
   */
  shared<E, L>(conn: ConnectionConfig, bridgeName: string, make: MakeOwner<E, L>): { acquire(role: ConnectionRole, events: E): Promise<L> } {
    const owners = this.owners as Map<string, SharedOwner<E, L>>;
    const pool = poolOf(conn);
    const slot = poolSlot(bridgeName, pool);
    return {
      acquire: (role, events) => {
        const key = keyOf(conn, role, slot);
        let owner = owners.get(key);
        if (owner === undefined) {
          const hooks: OwnerHooks = {
            changed: () => this.changed(),
            idle: () => {
              if (owners.get(key)?.idle) owners.delete(key);
            },
          };
          owner = make(role, pool > 1 ? `${role} ${slot + 1}/${pool}` : role, this.log.child({ connection: conn.name }), hooks);
          owners.set(key, owner);
        }
        return owner.acquire(events);
      },
    };
  }

  /** Every connection open now, for GET /bridges and the bridge_connections gauge. */
  open(): OpenConnection[] {
    return [...this.owners.values()].flatMap((o) => o.report());
  }
}

/** The settings as resolved, secrets included (the key never leaves the process): another setting, another connection. */
function keyOf(conn: ConnectionConfig, role: ConnectionRole, slot: number): string {
  return `${role}\u0000${slot}\u0000${JSON.stringify(conn)}`;
}
