/**
 * What the STOMP source and target share: one session per endpoint object, opened once, reported lost once, closed
 * once. The session is the endpoint's part of a connection it holds a lease on (./shared-session.ts): the process's
 * connection for its role where the peer takes many endpoints on one, else one of its own. The subclasses add what they
 * do there (SUBSCRIBE and ACK, or SEND and COMMIT).
 */
import type { StompConnectionConfig } from '../../config/protocols/stomp-schema.js';
import type { ConnectionRole } from '../../config/connection-plan.js';
import { TransientError } from '../../shared/errors.js';
import type { Logger } from '../../shared/log.js';
import { stompAddress, stompDestination } from '../../config/protocols/stomp-address.js';
import type { StompSession } from './stomp-client.js';
import { profileFields, stompPeerProfile, type StompPeerProfile } from './stomp-peer.js';
import { tellLost } from '../endpoint-handlers.js';
import { EndpointLifecycle } from '../endpoint-lifecycle.js';
import { confirmWithin } from '../confirm-timeout.js';
import { ownStompConnector, type StompConnector, type StompLease } from './shared-session.js';

export abstract class StompEndpoint {
  readonly description: string;
  readonly address: string;
  protected readonly destination: string;
  protected lease: StompLease | undefined;
  /** What the connected server is (by its CONNECTED `server` header); set by connect(). */
  protected profile: StompPeerProfile = stompPeerProfile(undefined);
  /** Opened once, lost at most once, closed once (../endpoint-lifecycle.ts). */
  protected readonly life: EndpointLifecycle;
  private readonly connector: StompConnector;

  protected constructor(
    protected readonly conn: StompConnectionConfig,
    queue: string,
    private readonly role: 'source' | 'target',
    protected readonly log: Logger,
    /** Where the connection comes from; default: one of this endpoint's own. */
    connector?: StompConnector,
  ) {
    this.destination = stompDestination(queue);
    this.description = `stomp ${conn.name} ${role} '${this.destination}'`;
    this.address = stompAddress(conn, this.destination);
    this.life = new EndpointLifecycle(this.description);
    this.connector = connector ?? ownStompConnector(conn, log);
  }

  /** Closed, or lost: nothing more is done on the session. */
  protected get closed(): boolean {
    return this.life.over;
  }

  /** The name of the connection the session is on (shared with other bridges' endpoints where the peer allows it). */
  get connectionName(): string | undefined {
    return this.lease?.connectionName;
  }

  protected get session(): StompSession | undefined {
    return this.lease?.session;
  }

  /**
   * Takes a lease on a connection (once per object). `onLost` fires at most once, for a loss that close() did not cause.
   * Rejects with TransientError when close() came while connecting.
   */
  protected async connect(onLost: (error: TransientError) => void): Promise<StompSession> {
    this.life.begin();
    const role: ConnectionRole = this.role === 'source' ? 'consume' : 'publish';
    const lease = await this.connector.acquire(role, {
      // Told while opening too: the subclass's open() is waiting on the connection (SUBSCRIBE, a RECEIPT).
      lost: (error) => {
        if (this.life.lose() !== undefined) tellLost(onLost, error, this.log);
      },
    });
    this.lease = lease;
    this.profile = lease.profile;
    if (this.life.over) {
      await lease.release();
      throw this.life.closedWhileOpening();
    }
    return lease.session;
  }

  /** Log fields of the open connection: where, which STOMP version, which server and what the bridge relies on there. */
  protected connectionFields(session: StompSession): Record<string, unknown> {
    return { peer: session.peer, version: session.version, server: session.server, connection: this.lease?.connectionName, ...profileFields(this.profile) };
  }

  /**
   * `promise` (a request waiting for its RECEIPT), bounded: past `timeoutMs` the connection is treated as broken (a
   * peer that never answers must not hold the bridge: docs/design.md §10.2), which rejects every request still waiting
   * with that error, this one included. `outcomeUnknown`: what the broker may have done with the request is not known
   * then.
   */
  protected receiptWithin<T>(session: StompSession, promise: Promise<T>, what: string, timeoutMs: number, outcomeUnknown = false): Promise<T> {
    const timedOut = (): void =>
      session.fail(new TransientError(`${this.description} (${session.peer}): no RECEIPT for a ${what} within ${timeoutMs} ms; treating the connection as broken`, { outcomeUnknown }));
    return confirmWithin(promise, timeoutMs, timedOut);
  }

  /** What the endpoint holds on a shared connection that it must give back itself before letting go (a subscription). */
  protected giveBack(): Promise<void> {
    return Promise.resolve();
  }

  /** Ends the session: its part of a shared connection goes, a connection of its own closes (DISCONNECT). Never throws. */
  async close(): Promise<void> {
    const lease = this.lease;
    const wasOver = this.life.over;
    this.life.close();
    if (lease === undefined) return;
    if (!wasOver && lease.shared && lease.session.isOpen) await this.giveBack().catch((err: unknown) => this.log.debug({ err }, `${this.description}: giving back on close failed`));
    await lease.release();
  }

  /** Lets go of the connection when open() fails after connect(); the session is over. */
  protected async abandon(): Promise<void> {
    this.life.close();
    await this.lease?.release();
  }
}
