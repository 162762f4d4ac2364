/**
 * What the AMQP source and target share: one connection per endpoint object, opened once, reported lost once, closed
 * once; the same contract as StompEndpoint (../stomp/stomp-endpoint.ts). The subclasses add their channels: a consuming
 * one, or a confirm channel and its publishes.
 */
import type { ChannelModel } from 'amqplib';
import type { AmqpConnectionConfig } from '../../config/types.js';
import { ConfigError, isProgrammerError, TransientError, type BridgeError } from '../../shared/errors.js';
import type { Logger } from '../../shared/log.js';
import { openedTwice, tellLost } from '../endpoint-handlers.js';
import { closeModel, connectAmqp, lostError, replyText, type AmqpSession } from './connect.js';

export type AmqpEndpointState = 'new' | 'opening' | 'open' | 'lost' | 'closed';

/** Numbers the sessions of each role, for unique connection names. */
const instances = { source: 0, target: 0 };

export abstract class AmqpEndpoint<H extends { onLost(error: TransientError): void }> {
  /** The `connection_name` client property, unique per session (find it in `rabbitmqctl list_connections`). */
  readonly connectionName: string;
  protected readonly log: Logger;
  protected state: AmqpEndpointState = 'new';
  protected session?: AmqpSession;
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
    role: 'source' | 'target',
    what: string,
    log: Logger,
  ) {
    instances[role] += 1;
    this.connectionName = `broker-bridge ${conn.name} ${role} ${what} #${process.pid}.${instances[role]}`;
    this.log = log.child({ endpoint: description });
  }

  /** Channels and whatever else the session needs once connected. A throw fails open() and closes the connection. */
  protected abstract setUp(session: AmqpSession): Promise<void>;
  /** The session is open (called once). */
  protected abstract opened(): void;
  /** The session was lost (opening or open): settle what waits on it. */
  protected abstract settleOnLoss(error: TransientError): void;
  /** close() was called: settle what waits on the session, before the connection closes. */
  protected abstract settleOnClose(): void;

  /**
   * Connects (once per object) and sets up. `onLost` fires at most once, for a loss after open() resolved. Rejects
   * with TransientError when close() came while opening or the session was lost while opening.
   */
  async open(handlers: H): Promise<void> {
    if (this.state !== 'new') throw openedTwice(this.description);
    this.state = 'opening';
    this.handlers = handlers;
    const session = await connectAmqp(this.conn, { connectionName: this.connectionName, log: this.log });
    this.session = session;
    const { model, where } = session;
    model.on('error', (err: Error) => this.log.debug({ err }, 'AMQP connection error'));
    model.on('close', (err?: Error) => this.lost(lostError(where, err)));
    try {
      await this.setUp(session);
      if (!this.isOpening()) throw this.lostReason ?? new TransientError(`${this.description}: closed while opening`);
    } catch (err) {
      // Opening, lost while opening, or closed while opening: this session is over either way.
      this.state = 'closed';
      await closeModel(model);
      throw toBridgeError(err, `${this.description}: could not ${this.setUpWhat} on ${where}`);
    }
    this.state = 'open';
    this.opened();
  }

  async close(): Promise<void> {
    if (this.state === 'closed') return;
    this.state = 'closed';
    this.settleOnClose();
    const model = this.session?.model;
    if (model) await closeModel(model);
  }

  /** `rabbit (127.0.0.1:5672)`, or the connection's name before connecting. */
  protected get where(): string {
    return this.session?.where ?? this.conn.name;
  }

  /** The session's loss, or that there is no session. */
  protected notConnected(): TransientError {
    return this.lostReason ?? new TransientError(`${this.description} is not connected`);
  }

  protected lost(err: TransientError): void {
    if (this.state !== 'open' && this.state !== 'opening') return;
    const wasOpen = this.state === 'open';
    this.state = 'lost';
    this.lostReason = err;
    this.settleOnLoss(err);
    if (!wasOpen) return;
    this.log.warn({ err }, this.lossMessage);
    tellLost(this.handlers?.onLost.bind(this.handlers), err, this.log);
    // The connection may still be up (a channel error, a cancelled consumer, a confirm timeout): it is not trusted any
    // more, and closing it makes the broker requeue what was unacked now.
    const model: ChannelModel | undefined = this.session?.model;
    if (model) void closeModel(model);
  }

  /** A channel of this session closed: with an error of its own, that is the loss; without, the connection's follows. */
  protected channelClosed(error: Error | undefined): void {
    if (error) {
      this.lost(lostError(this.where, error, 'the channel on'));
      return;
    }
    // A channel closing without an error of its own means the connection is going down; its 'close' event follows
    // in the same tick with the reason, so let it speak first.
    queueMicrotask(() => this.lost(new TransientError(`the channel on ${this.where} was closed`, { outcomeUnknown: true })));
  }

  /** State is changed by events during awaits; a method call keeps TypeScript from narrowing it across them. */
  private isOpening(): boolean {
    return this.state === 'opening';
  }
}

function toBridgeError(err: unknown, context: string): BridgeError {
  if (err instanceof TransientError || err instanceof ConfigError) return err;
  if (isProgrammerError(err)) throw err;
  return new TransientError(`${context}: ${replyText(err)}`, { cause: err });
}
