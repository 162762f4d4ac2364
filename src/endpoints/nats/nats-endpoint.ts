/**
 * What the NATS JetStream source and target share: one connection per endpoint object, opened once, reported lost
 * once (the client does not reconnect: ./nats-connect.ts), closed once; the same lifecycle as the AMQP and STOMP
 * endpoints. The subclasses add what they do with it (pull and ack, or publish).
 */
import type { JetStreamManager, NatsConnection } from 'nats';
import type { NatsConnectionConfig } from '../../config/protocols/nats-schema.js';
import { TransientError, isProgrammerError, type BridgeError } from '../../shared/errors.js';
import type { Logger } from '../../shared/log.js';
import { connectionName } from '../connection-share.js';
import { tellLost } from '../endpoint-handlers.js';
import { EndpointLifecycle } from '../endpoint-lifecycle.js';
import { connectNats, jetStreamMissing, natsCode, natsFailure } from './nats-connect.js';

export abstract class NatsEndpoint {
  protected nc: NatsConnection | undefined;
  /** `host:port` of the server, once connected. */
  protected peer = '';
  /** Opened once, lost at most once, closed once (../endpoint-lifecycle.ts); open once markOpened() was called. */
  protected readonly life: EndpointLifecycle;
  /** What connect() was given: told of a loss once the endpoint is open. */
  private onLost: ((error: TransientError) => void) | undefined;
  private readonly clientName: string;
  protected readonly log: Logger;

  protected constructor(
    protected readonly conn: NatsConnectionConfig,
    readonly description: string,
    readonly address: string,
    role: 'source' | 'target',
    log: Logger,
  ) {
    // Named as every connection of the process is (`nats-server`'s connz shows it; GET /bridges and the page too).
    this.clientName = connectionName(conn.name, role);
    this.life = new EndpointLifecycle(description);
    this.log = log.child({ endpoint: description });
  }

  /** The client name this endpoint's connection was opened with (SourceEndpoint.connectionName); undefined before open() resolved. */
  get connectionName(): string | undefined {
    return this.life.open ? this.clientName : undefined;
  }

  /** Closed, or lost: nothing more is done on the connection. */
  protected get closed(): boolean {
    return this.life.over;
  }

  /** open() is about to resolve: a loss from now on is reported through onLost. */
  protected markOpened(): void {
    this.life.opened();
  }

  /**
   * The session is lost (a failed pull, a PubAck overdue, the connection closed): once, and told to the core only once
   * open; the connection is closed (JetStream redelivers what was not acked after the consumer's ack wait).
   */
  protected lose(error: TransientError): void {
    const was = this.life.lose();
    if (was === undefined) return;
    if (was === 'open') tellLost(this.onLost, error, this.log);
    void this.nc?.close().catch(() => undefined);
  }

  /** `connection (host:port)`, for sentences. */
  protected get where(): string {
    return `${this.conn.name} (${this.peer})`;
  }

  /**
   * Connects (once per object) and checks that JetStream answers. `onLost` fires at most once, for a loss that close()
   * did not cause. Rejects with TransientError or ConfigError.
   */
  protected async connect(onLost: (error: TransientError) => void): Promise<{ nc: NatsConnection; jsm: JetStreamManager }> {
    this.life.begin();
    this.onLost = onLost;
    const session = await connectNats(this.conn, this.clientName, this.log);
    const nc = session.nc;
    this.nc = nc;
    this.peer = session.peer;
    void nc.closed().then((err) => {
      if (this.closed) return;
      // Lost while opening: the step under way fails, and open() rejects with it; onLost is for an open endpoint only.
      const reason = err instanceof Error ? natsFailure(err, this.where, this.conn.connectTimeout).message : 'the server closed the connection';
      this.lose(new TransientError(`${this.description}: connection lost: ${reason}`, { cause: err }));
    });
    if (this.closed) {
      await nc.close().catch(() => undefined);
      throw this.life.closedWhileOpening();
    }
    try {
      return { nc, jsm: await nc.jetstreamManager() };
    } catch (err) {
      await this.abandon();
      throw natsCode(err) === '503' ? jetStreamMissing(this.where, err) : this.classify(err, 'reach JetStream');
    }
  }

  /** An error of a set-up step as a BridgeError (a programmer error passes through, never retried). */
  protected classify(err: unknown, what: string): BridgeError | Error {
    if (isProgrammerError(err) || err instanceof TransientError) return err;
    if (err instanceof Error && 'kind' in err) return err;
    return new TransientError(`${this.description}: could not ${what} on ${this.where}: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
  }

  /** Closes a connection whose open() failed, without reporting a loss. */
  protected async abandon(): Promise<void> {
    this.life.close();
    await this.nc?.close().catch(() => undefined);
  }

  /** Closes the connection (whatever was not acked is redelivered after the consumer's ack wait). Never throws. */
  async close(): Promise<void> {
    if (this.closed && (this.nc === undefined || this.nc.isClosed())) return;
    this.life.close();
    await this.nc?.close().catch(() => undefined);
  }
}
