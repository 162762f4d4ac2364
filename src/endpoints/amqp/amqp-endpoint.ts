/**
 * What the AMQP source and target share: one session per endpoint object, opened once, reported lost once, closed once;
 * the same contract as StompEndpoint (../stomp/stomp-endpoint.ts). The session is the endpoint's channels on a
 * connection it holds a lease on (./shared-connection.ts): the process's connection for its role, shared with the
 * endpoints of other bridges, or one of its own. The subclasses add their channels: a consuming one, or a confirm
 * channel and its publishes.
 *
 * Its channels are its own, the connection is not: a loss that is the endpoint's alone (a channel error, a cancelled
 * consumer, a confirm timeout) closes its channels — the broker requeues what they had unacked — and lets go of the
 * connection, which goes on for the other bridges on it; a lost connection reaches every endpoint on it.
 */
import type { Channel } from 'amqplib';
import type { AmqpConnectionConfig } from '../../config/protocols/amqp-schema.js';
import type { ConnectionRole } from '../../config/connection-plan.js';
import { ConfigError, isProgrammerError, TransientError, type BridgeError } from '../../shared/errors.js';
import type { Logger } from '../../shared/log.js';
import { tellLost } from '../endpoint-handlers.js';
import { EndpointLifecycle, type LifecycleStage } from '../endpoint-lifecycle.js';
import { lostError, replyText, type AmqpSession } from './connect.js';
import { ownAmqpConnector, type AmqpConnector, type AmqpLease } from './shared-connection.js';

/** How long closing a channel waits for the broker's close-ok (a blocked or stalled connection never answers). */
const CHANNEL_CLOSE_TIMEOUT_MS = 2000;

export abstract class AmqpEndpoint<H extends { onLost(error: TransientError): void }> {
  protected readonly log: Logger;
  /** Opened once, lost at most once, closed once (../endpoint-lifecycle.ts). */
  protected readonly life: EndpointLifecycle;
  protected lease?: AmqpLease;
  protected handlers?: H;
  /** Why the session was lost; what every later call fails with. */
  protected lostReason?: TransientError;

  /** What open() failed to do after connecting, for its error: e.g. `start consuming`. */
  protected abstract readonly setUpWhat: string;
  /** The warning logged once when an open session is lost. */
  protected abstract readonly lossMessage: string;

  protected constructor(
    protected readonly conn: AmqpConnectionConfig,
    readonly description: string,
    readonly address: string,
    private readonly role: ConnectionRole,
    log: Logger,
    /** Where the connection comes from; default: one of this endpoint's own. */
    connector?: AmqpConnector,
  ) {
    this.log = log.child({ endpoint: description });
    this.life = new EndpointLifecycle(description);
    this.connector = connector ?? ownAmqpConnector(conn, this.log);
  }

  private readonly connector: AmqpConnector;

  /** Where the session is in its lifecycle (read by the subclasses). */
  protected get state(): LifecycleStage {
    return this.life.stage;
  }

  /** The `connection_name` of the connection the session is on (find it in `rabbitmqctl list_connections`). */
  get connectionName(): string | undefined {
    return this.lease?.connectionName;
  }

  /** Channels and whatever else the session needs once connected. A throw fails open() and closes its channels. */
  protected abstract setUp(lease: AmqpLease): Promise<void>;
  /** The session is open (called once). */
  protected abstract opened(): void;
  /** The session was lost (opening or open): settle what waits on it. */
  protected abstract settleOnLoss(error: TransientError): void;
  /** close() was called: settle what waits on the session, before its channels close. */
  protected abstract settleOnClose(): void;
  /** The channels of the session, to close when it ends. */
  protected abstract channels(): (Channel | undefined)[];
  /** `connection.blocked` (true) or `unblocked` (false) on the connection; a target pauses on it. */
  protected onBlocked(_blocked: boolean, _reason?: string): void {
    // A source publishes nothing: the consuming connection is never blocked for it.
  }

  /**
   * Takes a lease on the connection (made when none is open) and sets up. `onLost` fires at most once, for a loss after
   * open() resolved. Rejects with TransientError when close() came while opening or the session was lost while opening.
   */
  async open(handlers: H): Promise<void> {
    this.life.begin();
    this.handlers = handlers;
    const lease = await this.connector.acquire(this.role, {
      lost: (err) => this.lost(err),
      blocked: (blocked, reason) => this.onBlocked(blocked, reason),
    });
    this.lease = lease;
    try {
      if (!this.isOpening()) throw this.lostReason ?? this.life.closedWhileOpening();
      await this.setUp(lease);
      if (!this.isOpening()) throw this.lostReason ?? this.life.closedWhileOpening();
    } catch (err) {
      // Opening, lost while opening, or closed while opening: this session is over either way.
      this.life.close();
      await this.closeChannels();
      lease.release();
      throw toBridgeError(err, `${this.description}: could not ${this.setUpWhat} on ${lease.session.where}`);
    }
    this.life.opened();
    this.opened();
  }

  async close(): Promise<void> {
    if (!this.life.close()) return;
    this.settleOnClose();
    // While opening, the channels made so far: what setUp still waits on fails, and open() rejects (and lets go too).
    await this.closeChannels();
    this.lease?.release();
  }

  /** `rabbit (127.0.0.1:5672)`, or the connection's name before connecting. */
  protected get where(): string {
    return this.lease?.session.where ?? this.conn.name;
  }

  protected get session(): AmqpSession | undefined {
    return this.lease?.session;
  }

  /** The session's loss, or that there is no session. */
  protected notConnected(): TransientError {
    return this.lostReason ?? new TransientError(`${this.description} is not connected`);
  }

  protected lost(err: TransientError): void {
    const was = this.life.lose();
    if (was === undefined) return;
    const wasOpen = was === 'open';
    this.lostReason = err;
    this.settleOnLoss(err);
    if (!wasOpen) return;
    this.log.warn({ err }, this.lossMessage);
    tellLost(this.handlers?.onLost.bind(this.handlers), err, this.log);
    // The connection may still be up (a channel error, a cancelled consumer, a confirm timeout): this session's channels
    // are not trusted any more, and closing them makes the broker requeue what they had unacked now. The connection
    // goes on for the other bridges on it (a lost connection already let go of every lease).
    const lease = this.lease;
    void this.closeChannels().finally(() => lease?.release());
  }

  /** A channel of this session closed: with an error of its own, that is the loss; without, the connection's follows. */
  protected channelClosed(error: Error | undefined): void {
    if (error) {
      this.lost(lostError(this.where, error, 'the channel on'));
      return;
    }
    // A channel closing without an error of its own means the connection is going down; its 'close' event follows
    // in the same tick with the reason (./shared-connection.ts tells every lease), so let it speak first.
    queueMicrotask(() => this.lost(new TransientError(`the channel on ${this.where} was closed`, { outcomeUnknown: true })));
  }

  /** Closes the session's channels, each bounded: on a blocked or stalled connection the broker may never answer. */
  private async closeChannels(): Promise<void> {
    await Promise.all(this.channels().flatMap((ch) => (ch === undefined ? [] : [closeChannel(ch)])));
  }

  /** The stage is changed by events during awaits; a method call keeps TypeScript from narrowing it across them. */
  private isOpening(): boolean {
    return this.life.opening;
  }
}

/** channel.close, waiting at most CHANNEL_CLOSE_TIMEOUT_MS; never throws (a channel already closed is fine). */
async function closeChannel(ch: Channel): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      ch.close(),
      new Promise<void>((resolve) => {
        timer = setTimeout(resolve, CHANNEL_CLOSE_TIMEOUT_MS);
      }),
    ]);
  } catch {
    // Closed already (by the broker, or with the connection).
  } finally {
    clearTimeout(timer);
  }
}

function toBridgeError(err: unknown, context: string): BridgeError {
  if (err instanceof TransientError || err instanceof ConfigError) return err;
  if (isProgrammerError(err)) throw err;
  return new TransientError(`${context}: ${replyText(err)}`, { cause: err });
}
