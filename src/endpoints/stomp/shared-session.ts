/**
 * One STOMP connection that the endpoints of many bridges share where the peer allows it (StompPeerProfile
 * .sharedConnection: ActiveMQ Classic), each with subscriptions and transactions of its own; receipts are unique per
 * connection (./stomp-receipts.ts), so each request's answer reaches the endpoint that asked. Like the AMQP one
 * (../amqp/shared-connection.ts): made on demand, one attempt shared by concurrent callers, no reconnect of its own,
 * closed (DISCONNECT) when the last endpoint let go.
 *
 * Whether the peer allows it is known only once it answered CONNECTED: a connection to a peer that does not is handed
 * to the one endpoint that asked (an exclusive lease, closed with it), and the next callers connect each on their own,
 * at once, until a connection shows a peer that allows sharing again (a failover list may hold both kinds).
 *
 * A lost connection reaches every lease on it. So does anything an endpoint does that ends the connection: a SEND or
 * COMMIT without its RECEIPT within confirm-timeout fails the connection (./stomp-target.ts), since a peer answers the
 * frames of one connection in order and one that does not answer is stuck for every subscriber on it; an ERROR that
 * names no request and can be about nothing in flight ends it too, by the protocol. An ERROR that names its receipt (a
 * refused SEND, SUBSCRIBE or COMMIT) stays with the request that asked; one that names none is put on the transactions
 * (or SENDs) in flight, whatever bridge they are of, and the connection stays (./stomp-session.ts).
 */
import type { StompConnectionConfig } from '../../config/protocols/stomp-schema.js';
import type { ConnectionRole } from '../../config/connection-plan.js';
import type { OpenConnection } from '../../core/metrics.js';
import { TransientError } from '../../shared/errors.js';
import type { Logger } from '../../shared/log.js';
import { connectStomp, type StompSession } from './stomp-client.js';
import { stompPeerProfile, type StompPeerProfile } from './stomp-peer.js';
import { ConnectionLease, connectionName, ownConnector, SharedAttempt } from '../connection-share.js';
import type { MakeOwner } from '../connections.js';

export interface StompLeaseEvents {
  /** The connection was lost; every subscription and transaction on it is gone. At most once, never after release(). */
  lost(error: TransientError): void;
}

export interface StompLease {
  readonly session: StompSession;
  readonly profile: StompPeerProfile;
  /** A name for the connection in status and logs (STOMP has no broker-side name): `broker-bridge activemq consume #…`. */
  readonly connectionName: string;
  /** Other endpoints may be on the connection: what an endpoint holds there must be given back by itself (UNSUBSCRIBE). */
  readonly shared: boolean;
  /** Lets go (at most once); the last lease closes the connection (DISCONNECT). */
  release(): Promise<void>;
}

export interface StompConnector {
  acquire(role: ConnectionRole, events: StompLeaseEvents): Promise<StompLease>;
}

interface Live {
  session: StompSession;
  profile: StompPeerProfile;
  name: string;
  /** Date.now() when it opened. */
  openedAt: number;
  leases: Set<Lease>;
  shared: boolean;
  open: boolean;
}

export class SharedStompConnection {
  private live?: Live;
  private readonly attempt = new SharedAttempt<Live>();
  /** The last connection showed a peer that takes no second endpoint: callers connect each on their own. */
  private exclusivePeer = false;
  /** Open connections, shared or each one endpoint's. */
  private readonly all = new Set<Live>();

  constructor(
    private readonly conn: StompConnectionConfig,
    private readonly role: ConnectionRole,
    private readonly label: string,
    private readonly log: Logger,
    private readonly hooks: { changed(): void; idle(): void } = { changed: () => undefined, idle: () => undefined },
    private readonly connectOne: typeof connectStomp = connectStomp,
  ) {}

  get idle(): boolean {
    return this.all.size === 0 && !this.attempt.running;
  }

  /** The open connections, for status and metrics. */
  report(): OpenConnection[] {
    return [...this.all].map((l) => ({ name: l.name, connection: this.conn.name, protocol: 'stomp', role: this.role, broker: l.session.peer, endpoints: l.leases.size, since: new Date(l.openedAt).toISOString() }));
  }

  async acquire(events: StompLeaseEvents): Promise<StompLease> {
    if (this.exclusivePeer) return this.take(await this.connect(), events);
    const live = await this.connected();
    // A peer that takes one endpoint per connection: the attempt this caller waited on went to the first one (or is
    // gone already), so a connection of its own.
    if (!live.shared && (live.leases.size > 0 || !live.open)) return this.take(await this.connect(), events);
    return this.take(live, events);
  }

  private take(live: Live, events: StompLeaseEvents): StompLease {
    if (!live.open) throw new TransientError(`the STOMP connection ${live.name} was closed before it could be used`);
    if (!live.shared && live.leases.size > 0) throw new TypeError(`${live.name} is one endpoint's own`);
    const lease = new Lease(this, live, events);
    live.leases.add(lease);
    return lease;
  }

  private connected(): Promise<Live> {
    if (this.live?.open) return Promise.resolve(this.live);
    return this.attempt.join(
      () => this.connect(),
      () => {
        if (this.idle) this.hooks.idle();
      },
    );
  }

  private async connect(): Promise<Live> {
    const session = await this.connectOne(this.conn, this.log);
    const profile = stompPeerProfile(session.server);
    const name = connectionName(this.conn.name, this.label);
    const live: Live = { session, profile, name, openedAt: Date.now(), leases: new Set(), shared: profile.sharedConnection, open: true };
    this.all.add(live);
    this.exclusivePeer = !live.shared;
    if (live.shared) this.live = live;
    session.onLost((error) => this.onLost(live, error));
    this.log.info({ connection: name, role: this.role, peer: session.peer, server: session.server, shared: live.shared }, `connection open: ${name}`);
    this.hooks.changed();
    return live;
  }

  private onLost(live: Live, error: TransientError): void {
    if (!live.open) return;
    this.forget(live);
    const leases = [...live.leases];
    live.leases.clear();
    if (live.shared) this.log.warn({ connection: live.name, bridges: leases.length, err: error }, `connection lost: ${error.message}`);
    for (const lease of leases) lease.lost(error);
  }

  /** @internal A lease let go; the last one closes the connection. */
  async release(live: Live, lease: Lease): Promise<void> {
    if (!live.leases.delete(lease) || live.leases.size > 0 || !live.open) return;
    this.forget(live);
    if (live.shared) this.log.info({ connection: live.name }, `connection closed: no bridge uses ${live.name} now`);
    await live.session.disconnect();
  }

  private forget(live: Live): void {
    live.open = false;
    this.all.delete(live);
    if (this.live === live) this.live = undefined;
    this.hooks.changed();
    if (this.idle) this.hooks.idle();
  }
}

class Lease extends ConnectionLease<Live> implements StompLease {
  constructor(
    private readonly owner: SharedStompConnection,
    live: Live,
    events: StompLeaseEvents,
  ) {
    super(live, (error) => events.lost(error));
  }

  get session(): StompSession {
    return this.live.session;
  }

  get profile(): StompPeerProfile {
    return this.live.profile;
  }

  get shared(): boolean {
    return this.live.shared;
  }

  // Asynchronous, unlike AMQP's: the last lease's DISCONNECT waits for the broker's receipt, which a caller may await.
  async release(): Promise<void> {
    if (this.end()) await this.owner.release(this.live, this);
  }
}

/** A connector of one endpoint's own: a connection per role, made for it and closed with it. */
export function ownStompConnector(conn: StompConnectionConfig, log: Logger): StompConnector {
  return ownConnector((role) => new SharedStompConnection(conn, role, role, log));
}

/** How the process's connections (../connections.ts) make one of STOMP's: a session shared where the peer allows it. */
export function sharedStomp(conn: StompConnectionConfig): MakeOwner<StompLeaseEvents, StompLease> {
  return (role, label, log, hooks) => new SharedStompConnection(conn, role, label, log, hooks);
}
