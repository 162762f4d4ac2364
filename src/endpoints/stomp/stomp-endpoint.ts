/**
 * What the STOMP source and target share: one session per endpoint object, opened once, reported lost once, closed
 * with a DISCONNECT. The subclasses add what they do with the session (SUBSCRIBE and ACK, or SEND and COMMIT).
 */
import type { StompConnectionConfig } from '../../config/types.js';
import { TransientError, asError } from '../../shared/errors.js';
import type { Logger } from '../../shared/log.js';
import { stompAddress, stompDestination } from '../../config/stomp-address.js';
import { connectStomp, type StompSession } from './stomp-client.js';
import { profileFields, stompPeerProfile, type StompPeerProfile } from './stomp-peer.js';
import { openedTwice, tellLost } from '../endpoint-handlers.js';

export abstract class StompEndpoint {
  readonly description: string;
  readonly address: string;
  protected readonly destination: string;
  protected session: StompSession | undefined;
  /** What the connected server is (by its CONNECTED `server` header); set by connect(). */
  protected profile: StompPeerProfile = stompPeerProfile(undefined);
  /** Set by close() and by a loss: nothing more is done on the session. */
  protected closed = false;
  private openCalled = false;

  protected constructor(
    protected readonly conn: StompConnectionConfig,
    queue: string,
    role: 'source' | 'target',
    protected readonly log: Logger,
  ) {
    this.destination = stompDestination(queue);
    this.description = `stomp ${conn.name} ${role} '${this.destination}'`;
    this.address = stompAddress(conn, this.destination);
  }

  /**
   * Connects (once per object). `onLost` fires at most once, for a loss that close() did not cause. Rejects with
   * TransientError when close() came while connecting.
   */
  protected async connect(onLost: (error: TransientError) => void): Promise<StompSession> {
    if (this.openCalled || this.closed) throw openedTwice(this.description);
    this.openCalled = true;
    const session = await connectStomp(this.conn, this.log);
    this.session = session;
    this.profile = stompPeerProfile(session.server);
    if (this.closed) {
      session.destroy();
      throw new TransientError(`${this.description} was closed while opening`);
    }
    session.onLost((error) => {
      if (this.closed) return;
      this.closed = true;
      tellLost(onLost, error, this.log);
    });
    return session;
  }

  /** Log fields of the open connection: where, which STOMP version, which server and what the bridge relies on there. */
  protected connectionFields(session: StompSession): Record<string, unknown> {
    return { peer: session.peer, version: session.version, server: session.server, ...profileFields(this.profile) };
  }

  /**
   * `promise` (a request waiting for its RECEIPT), bounded: past `timeoutMs` the connection is treated as broken (a
   * peer that never answers must not hold the bridge: DESIGN §10), which rejects every request still waiting with that
   * error, this one included. `outcomeUnknown`: what the broker may have done with the request is not known then.
   */
  protected receiptWithin<T>(session: StompSession, promise: Promise<T>, what: string, timeoutMs: number, outcomeUnknown = false): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        session.fail(new TransientError(`${this.description} (${session.peer}): no RECEIPT for a ${what} within ${timeoutMs} ms; treating the connection as broken`, { outcomeUnknown }));
      }, timeoutMs);
      promise.then(
        (v) => {
          clearTimeout(timer);
          resolve(v);
        },
        (e: unknown) => {
          clearTimeout(timer);
          reject(asError(e));
        },
      );
    });
  }

  /** DISCONNECT (bounded wait) and close. Never throws. */
  async close(): Promise<void> {
    if (this.closed && !this.session?.isOpen) return;
    this.closed = true;
    await this.session?.disconnect();
  }
}
