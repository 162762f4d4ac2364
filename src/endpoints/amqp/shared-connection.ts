/**
 * One AMQP connection that the endpoints of many bridges share, each on channels of its own (the plan:
 * src/config/connection-plan.ts). It is made on demand: the first endpoint that needs it connects, and every endpoint
 * that asks while that attempt runs shares it. It never reconnects by itself — the supervisors' reconnect is the one
 * reconnect layer (src/core/supervisor/reconnect.ts) — so after a loss the next endpoint that asks makes a new
 * connection, once for everyone. It closes when the last endpoint on it let go (every bridge on it removed by a
 * reload, or between two sessions), and is made again when one asks.
 *
 * What reaches whom:
 * - the connection is lost (closed by the broker, reset, missed heartbeats) → every lease on it, once each (`lost`);
 * - `connection.blocked` / `unblocked` → every lease on it (`blocked`); a lease taken while it is blocked reads
 *   `blocked` when it starts;
 * - a channel's error closes that channel only: it is the endpoint's own (amqp-endpoint.ts) and no other lease hears of
 *   it.
 */
import type { Channel, ChannelModel, ConfirmChannel } from 'amqplib';
import type { AmqpConnectionConfig } from '../../config/protocols/amqp-schema.js';
import type { ConnectionRole } from '../../config/connection-plan.js';
import type { OpenConnection } from '../../core/metrics.js';
import { describeBroker } from '../../config/protocols/amqp-address.js';
import { TransientError } from '../../shared/errors.js';
import type { Logger } from '../../shared/log.js';
import { closeModel, connectAmqp, lostError, replyText, type AmqpSession } from './connect.js';
import { ConnectionLease, connectionName, ownConnector, SharedAttempt } from '../connection-share.js';
import type { MakeOwner } from '../connections.js';

/** What a lease hears of its connection. Called from amqplib's events: they must not throw (tellLost guards the core). */
export interface AmqpLeaseEvents {
  /** The connection was lost; every channel on it is gone. At most once per lease, never after release(). */
  lost(error: TransientError): void;
  /** The broker blocked (true) or unblocked (false) publishing on the connection (`connection.blocked`). */
  blocked?(blocked: boolean, reason?: string): void;
}

/** An endpoint's hold on a shared connection: its channels go on it, and release() lets go (at most once). */
export interface AmqpLease {
  readonly session: AmqpSession;
  /** The connection's `connection_name`, as the broker shows it. */
  readonly connectionName: string;
  /** The broker has the connection blocked now (`connection.blocked`). */
  readonly blocked: boolean;
  /** A channel of the lease's own. Rejects with TransientError when the connection is gone or has no channel left. */
  createChannel(): Promise<Channel>;
  createConfirmChannel(): Promise<ConfirmChannel>;
  /**
   * Messages ready in `queue` (a passive declare), on one channel per connection kept for these reads, apart from
   * every consuming channel: a failed read closes that channel only (the next read opens another).
   */
  queueDepth(queue: string): Promise<number>;
  /** Lets go of the connection; the last lease to go closes it. Channels of the lease's own are the endpoint's to close. */
  release(): void;
}

/** How an endpoint gets its connection: a lease for its role. */
export interface AmqpConnector {
  acquire(role: ConnectionRole, events: AmqpLeaseEvents): Promise<AmqpLease>;
}

/** An open shared connection, for status and metrics. */
export interface AmqpConnectionState {
  name: string;
  broker: string;
  /** Leases held: endpoints of bridges on it. */
  leases: number;
  channels: number;
  channelMax: number;
  blocked: boolean;
  /** When it opened (ISO 8601). */
  since: string;
}

interface Live {
  session: AmqpSession;
  name: string;
  /** Date.now() when it opened. */
  openedAt: number;
  leases: Set<Lease>;
  /** False once lost, or closed because no lease was left. */
  open: boolean;
  /** Closed by us (no lease left): its 'close' is no loss. */
  closing: boolean;
  lostReason?: TransientError;
  blocked: boolean;
  /** Channels opened on it and not closed yet (the probe channel included). */
  channels: number;
  probe?: Promise<Channel>;
}

export class SharedAmqpConnection {
  private live?: Live;
  private readonly attempt = new SharedAttempt<Live>();

  constructor(
    private readonly conn: AmqpConnectionConfig,
    private readonly role: ConnectionRole,
    /** `consume`, or `consume 2/4` in a pool: how the connection names itself. */
    private readonly label: string,
    private readonly log: Logger,
    /** Told when the connection opened or went away (metrics), and when it holds nothing any more (the registry forgets it). */
    private readonly hooks: { changed(): void; idle(): void } = { changed: () => undefined, idle: () => undefined },
    /** How one connection is made (the unit tests give a fake broker's). */
    private readonly connectOne: typeof connectAmqp = connectAmqp,
  ) {}

  /** The open connection, for status; undefined while there is none. */
  get state(): AmqpConnectionState | undefined {
    const live = this.live;
    if (live === undefined || !live.open) return undefined;
    return {
      name: live.name,
      broker: describeBroker(live.session.broker),
      leases: live.leases.size,
      channels: live.channels,
      channelMax: channelMaxOf(live.session.model),
      blocked: live.blocked,
      since: new Date(live.openedAt).toISOString(),
    };
  }

  /** The open connection as GET /bridges and the bridge_connections gauge show it (none, or one). */
  report(): OpenConnection[] {
    const s = this.state;
    if (s === undefined) return [];
    return [{ name: s.name, connection: this.conn.name, protocol: 'amqp', role: this.role, broker: s.broker, endpoints: s.leases, channels: s.channels, channelMax: s.channelMax, blocked: s.blocked, since: s.since }];
  }

  /** Nothing open, nothing opening, nobody holding it: the registry may forget it. */
  get idle(): boolean {
    return this.live === undefined && !this.attempt.running;
  }

  /**
   * A lease on the connection, connecting first when there is none (concurrent callers share one attempt). Rejects
   * with what connectAmqp rejects with (TransientError, ConfigError), or TransientError when the connection was lost
   * before the lease was taken.
   */
  async acquire(events: AmqpLeaseEvents): Promise<AmqpLease> {
    const live = await this.connected();
    if (!live.open) throw live.lostReason ?? new TransientError(`the connection ${live.name} was closed before it could be used`);
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
    const name = connectionName(this.conn.name, this.label);
    const session = await this.connectOne(this.conn, { connectionName: name, log: this.log });
    const live: Live = { session, name, openedAt: Date.now(), leases: new Set(), open: true, closing: false, blocked: false, channels: 0 };
    const { model, where } = session;
    model.on('error', (err: Error) => this.log.debug({ err, connection: name }, 'AMQP connection error'));
    model.on('close', (err?: Error) => this.onClose(live, lostError(where, err)));
    model.on('blocked', (reason: string) => this.onBlocked(live, true, reason));
    model.on('unblocked', () => this.onBlocked(live, false));
    this.live = live;
    this.log.info({ connection: name, role: this.role, peer: describeBroker(session.broker), channelMax: channelMaxOf(model) }, `connection open: ${name}`);
    this.hooks.changed();
    // Every caller waiting on this attempt takes its lease in the microtasks after this one; if none does (each one's
    // open was called off meanwhile and released at once), the last release closes it.
    return live;
  }

  private onClose(live: Live, error: TransientError): void {
    if (!live.open && !live.closing) return;
    const wasOpen = live.open;
    live.open = false;
    live.lostReason = error;
    live.probe = undefined;
    if (this.live === live) this.live = undefined;
    const leases = [...live.leases];
    live.leases.clear();
    if (wasOpen && !live.closing) this.log.warn({ connection: live.name, bridges: leases.length, err: error }, `connection lost: ${error.message}`);
    // Synchronously, while amqplib closes: each endpoint settles what waits on it (see amqp-endpoint.ts channelClosed).
    for (const lease of leases) lease.lost(error);
    live.closing = false;
    this.hooks.changed();
    if (this.idle) this.hooks.idle();
  }

  private onBlocked(live: Live, blocked: boolean, reason?: string): void {
    if (!live.open || live.blocked === blocked) return;
    live.blocked = blocked;
    // Once per connection, for all its bridges (each one's session logs that it holds, src/core/session.ts).
    if (blocked) this.log.warn({ connection: live.name, reason, bridges: live.leases.size }, 'the broker blocked publishing (connection.blocked)');
    else this.log.info({ connection: live.name, bridges: live.leases.size }, 'the broker unblocked publishing');
    for (const lease of [...live.leases]) lease.blockedChanged(blocked, reason);
  }

  /** @internal A lease let go. The last one closes the connection: nobody needs it now, and the next acquire makes one. */
  release(live: Live, lease: Lease): void {
    if (!live.leases.delete(lease)) return;
    if (live.leases.size > 0 || !live.open || this.live !== live) return;
    live.open = false;
    live.closing = true;
    this.live = undefined;
    this.log.info({ connection: live.name }, `connection closed: no bridge uses ${live.name} now`);
    void closeModel(live.session.model);
    this.hooks.changed();
    if (this.idle) this.hooks.idle();
  }

  /** @internal A channel of the connection, counted while open; a full connection says what to do. */
  async channel<C extends Channel>(live: Live, make: (model: ChannelModel) => Promise<C>): Promise<C> {
    if (!live.open) throw live.lostReason ?? new TransientError(`the connection ${live.name} is closed`);
    let ch: C;
    try {
      ch = await make(live.session.model);
    } catch (err) {
      if (err instanceof Error && /No channels left/i.test(err.message)) {
        const max = channelMaxOf(live.session.model);
        throw new TransientError(
          `${live.name} has all its ${max} channels in use (the broker's channel_max): spread the bridges over more connections with pool on connection '${this.conn.name}' (broker-bridge check says how many)`,
          { cause: err },
        );
      }
      throw live.lostReason ?? new TransientError(`could not open a channel on ${live.name}: ${replyText(err)}`, { cause: err });
    }
    live.channels += 1;
    ch.once('close', () => {
      live.channels -= 1;
    });
    return ch;
  }

  /** @internal queueDepth of a lease: the connection's probe channel, opened on first use and again after it closed. */
  async queueDepth(live: Live, queue: string): Promise<number> {
    let probe = live.probe;
    if (probe === undefined) {
      const opening = this.channel(live, (m) => m.createChannel()).then((ch) => {
        ch.on('error', () => undefined);
        ch.on('close', () => {
          if (live.probe === opening) live.probe = undefined;
        });
        return ch;
      });
      live.probe = probe = opening;
      opening.catch(() => {
        if (live.probe === opening) live.probe = undefined;
      });
    }
    const ch = await probe;
    return (await ch.checkQueue(queue)).messageCount;
  }
}

class Lease extends ConnectionLease<Live> implements AmqpLease {
  constructor(
    private readonly owner: SharedAmqpConnection,
    live: Live,
    private readonly events: AmqpLeaseEvents,
  ) {
    super(live, (error) => events.lost(error));
  }

  get session(): AmqpSession {
    return this.live.session;
  }

  get blocked(): boolean {
    return this.live.blocked;
  }

  createChannel(): Promise<Channel> {
    return this.owner.channel(this.live, (m) => m.createChannel());
  }

  createConfirmChannel(): Promise<ConfirmChannel> {
    return this.owner.channel(this.live, (m) => m.createConfirmChannel());
  }

  queueDepth(queue: string): Promise<number> {
    return this.owner.queueDepth(this.live, queue);
  }

  release(): void {
    if (this.end()) this.owner.release(this.live, this);
  }

  blockedChanged(blocked: boolean, reason?: string): void {
    if (!this.ended) this.events.blocked?.(blocked, reason);
  }
}

/** channel_max as negotiated with the broker (amqplib keeps it on the connection; 0 there means no limit). */
export function channelMaxOf(model: ChannelModel): number {
  const max = (model.connection as unknown as { channelMax?: unknown }).channelMax;
  return typeof max === 'number' && max > 0 ? max : 0xffff;
}

/** A connector of one endpoint's own: a connection per role, made for it and closed with it. */
export function ownAmqpConnector(conn: AmqpConnectionConfig, log: Logger): AmqpConnector {
  return ownConnector((role) => new SharedAmqpConnection(conn, role, role, log));
}

/** How the process's connections (../connections.ts) make one of AMQP's: a connection whose channels are the endpoints. */
export function sharedAmqp(conn: AmqpConnectionConfig): MakeOwner<AmqpLeaseEvents, AmqpLease> {
  return (role, label, log, hooks) => new SharedAmqpConnection(conn, role, label, log, hooks);
}
