/**
 * What the AMQP 1.0 source and target share: one connection and one session per endpoint object, opened once, reported
 * lost once (rhea does not reconnect: ./amqp10-connect.ts), closed once; the same lifecycle as every other endpoint
 * (../endpoint-lifecycle.ts). The subclasses add their links.
 *
 * A loss is the connection going (socket closed, the broker's close, idle timeout) or the endpoint's session or one
 * of its links ended by the broker: RabbitMQ's plugin ends a session for a refused attach and for a frame it does not
 * take, and a session of ours ended means its unsettled deliveries are gone from under us.
 */
import type { Connection, EventContext, Session } from 'rhea';
import type { Amqp10ConnectionConfig } from '../../config/protocols/amqp10-schema.js';
import { TransientError, isProgrammerError, type BridgeError } from '../../shared/errors.js';
import type { Logger } from '../../shared/log.js';
import { connectionName } from '../connection-share.js';
import { tellLost } from '../endpoint-handlers.js';
import { EndpointLifecycle } from '../endpoint-lifecycle.js';
import { amqp10Failure, conditionOf, connectAmqp10, describeError } from './amqp10-connect.js';
import { firstEvent } from './amqp10-events.js';

/** How long close() waits for the broker's answer to our close before the socket goes. */
const CLOSE_WAIT_MS = 2000;

export abstract class Amqp10Endpoint {
  protected connection: Connection | undefined;
  protected session: Session | undefined;
  /** `host:port` of the peer, once connected. */
  protected peer = '';
  protected readonly life: EndpointLifecycle;
  private onLost: ((error: TransientError) => void) | undefined;
  private readonly containerId: string;
  protected readonly log: Logger;

  protected constructor(
    protected readonly conn: Amqp10ConnectionConfig,
    readonly description: string,
    readonly address: string,
    role: 'source' | 'target',
    log: Logger,
  ) {
    this.containerId = connectionName(conn.name, role);
    this.life = new EndpointLifecycle(description);
    this.log = log.child({ endpoint: description });
  }

  /** The container id this endpoint's connection opened with (as the broker lists it); undefined before open() resolved. */
  get connectionName(): string | undefined {
    return this.life.open ? this.containerId : undefined;
  }

  protected get closed(): boolean {
    return this.life.over;
  }

  /** `connection (host:port)`, for sentences. */
  protected get where(): string {
    return `${this.conn.name} (${this.peer})`;
  }

  protected markOpened(): void {
    this.life.opened();
  }

  /** The session is lost: once, told to the core only once open; the connection goes (the broker takes back what is unsettled). */
  protected lose(error: TransientError): void {
    const was = this.life.lose();
    if (was === undefined) return;
    this.lost(error);
    if (was === 'open') tellLost(this.onLost, error, this.log);
    this.dropConnection();
  }

  /** What a subclass settles when the session is lost (fails sends waiting, forgets deliveries), before onLost. */
  protected abstract lost(error: TransientError): void;

  /**
   * Connects (once per object) and begins the endpoint's session. `onLost` fires at most once, for a loss that close()
   * did not cause. Rejects with TransientError or ConfigError.
   */
  protected async connect(onLost: (error: TransientError) => void): Promise<Session> {
    this.life.begin();
    this.onLost = onLost;
    const { connection, peer } = await connectAmqp10(this.conn, this.containerId, this.log);
    this.connection = connection;
    this.peer = peer;
    this.watchConnection(connection);
    if (this.closed) {
      this.dropConnection();
      throw this.life.closedWhileOpening();
    }
    const session = connection.create_session();
    this.session = session;
    const began = firstEvent([{ emitter: session, events: ['session_open', 'session_error', 'session_close'] }], this.conn.connectTimeout);
    session.begin();
    const outcome = await began;
    if (outcome.event !== 'session_open') {
      const error = this.stepFailure('begin a session', outcome.event === 'timeout' ? undefined : session.error);
      this.abandon();
      throw error;
    }
    // A session the broker ends from now on is a loss (a refused attach ends it on RabbitMQ's plugin).
    session.on('session_error', (ctx: EventContext) => this.lose(this.brokerEnded('session', ctx.session?.error)));
    session.on('session_close', (ctx: EventContext) => {
      if (!this.closed) this.lose(this.brokerEnded('session', ctx.session?.error));
    });
    if (this.closed) {
      this.dropConnection();
      throw this.life.closedWhileOpening();
    }
    return session;
  }

  private watchConnection(connection: Connection): void {
    const gone = (why: string, err: unknown): void => {
      if (this.closed) return;
      const reason = err === undefined ? 'the broker closed the connection' : amqp10Failure(err, this.where, this.conn).message;
      this.lose(new TransientError(`${this.description}: connection lost (${why}): ${reason}`, { cause: err }));
    };
    connection.container.on('error', (err: unknown) => gone('error', err));
    connection.on('connection_error', (ctx: EventContext) => gone('closed by the broker', ctx.connection.error));
    connection.on('connection_close', (ctx: EventContext) => gone('closed by the broker', ctx.connection.error));
    connection.on('disconnected', (ctx: EventContext) => gone('disconnected', ctx.error));
    // Link and session errors no listener took reach the connection: every one ends this endpoint's session.
    connection.on('session_error', (ctx: EventContext) => gone('session ended', ctx.session?.error));
    connection.on('receiver_error', (ctx: EventContext) => gone('link detached', ctx.receiver?.error));
    connection.on('sender_error', (ctx: EventContext) => gone('link detached', ctx.sender?.error));
  }

  /** A session or link the broker ended, as a loss. */
  protected brokerEnded(what: string, err: unknown): TransientError {
    const condition = conditionOf(err);
    return new TransientError(
      `${this.description}: the broker ended the ${what} on ${this.where}: ${err === undefined ? 'no reason given' : describeError(err)}${condition !== undefined ? ` (${condition})` : ''}`,
      { cause: err },
    );
  }

  /** A failed set-up step as an error (a programmer error passes through, never retried). */
  protected stepFailure(what: string, err: unknown): BridgeError | Error {
    if (isProgrammerError(err)) return err;
    if (err instanceof Error && 'kind' in err) return err;
    if (this.life.stage === 'lost') return new TransientError(`${this.description}: the connection was lost while opening (could not ${what} on ${this.where})`, { cause: err });
    if (err === undefined) return new TransientError(`${this.description}: could not ${what} on ${this.where}: no answer within ${this.conn.connectTimeout} ms`);
    return new TransientError(`${this.description}: could not ${what} on ${this.where}: ${describeError(err)}`, { cause: err });
  }

  /** Ends a connection whose open() failed, without reporting a loss. */
  protected abandon(): void {
    this.life.close();
    this.dropConnection();
  }

  private dropConnection(): void {
    const c = this.connection;
    if (c === undefined) return;
    try {
      if (!c.is_closed()) c.close();
    } catch (err) {
      // A close on a socket already gone: nothing more to end.
      this.log.debug({ err }, 'closing the connection failed');
    }
    const socket = (c as { socket?: { destroy?: () => void } }).socket;
    setTimeout(() => socket?.destroy?.(), CLOSE_WAIT_MS).unref();
  }

  /** What a subclass does before the connection goes on close() (release deliveries, detach links). Never throws. */
  protected abstract closing(): Promise<void>;

  /** Ends links, session and connection; whatever was not settled goes back to the broker. Never throws. */
  async close(): Promise<void> {
    const wasOpen = this.life.open;
    if (!this.life.close()) return;
    const c = this.connection;
    if (c === undefined) return;
    if (wasOpen) {
      try {
        await this.closing();
      } catch (err) {
        this.log.warn({ err }, `${this.description}: closing its links failed; the connection goes anyway`);
      }
    }
    if (!c.is_closed() && c.is_open()) {
      const answered = firstEvent([{ emitter: c, events: ['connection_close', 'disconnected'] }], CLOSE_WAIT_MS);
      c.close();
      await answered;
    }
    this.dropConnection();
  }
}
