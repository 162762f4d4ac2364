/**
 * What the process's shared connections of every protocol (amqp/shared-connection.ts, stomp/shared-session.ts) have in
 * common: one connect attempt that every caller asking meanwhile joins, the names they give their connections, an
 * endpoint's lease on one, and the connector of an endpoint that has connections of its own.
 */
import type { ConnectionRole } from '../config/connection-plan.js';
import type { TransientError } from '../shared/errors.js';

/** One connect attempt at a time, shared by every caller that asks while it runs. */
export class SharedAttempt<T> {
  private pending?: Promise<T>;

  get running(): boolean {
    return this.pending !== undefined;
  }

  /** The attempt under way, or a new one made by `make`; `settled` runs once it ended, either way. */
  join(make: () => Promise<T>, settled: () => void): Promise<T> {
    if (this.pending === undefined) {
      const attempt = make();
      this.pending = attempt;
      const done = (): void => {
        if (this.pending === attempt) this.pending = undefined;
        settled();
      };
      attempt.then(done, done);
    }
    return this.pending;
  }
}

/** Process-wide counter for the names' suffix, so that no name is given twice in one process. */
let connectionsMade = 0;

/** `broker-bridge rabbit consume #1234.7`: how a connection names itself (AMQP: its `connection_name`). */
export function connectionName(connection: string, label: string): string {
  return `broker-bridge ${connection} ${label} #${process.pid}.${++connectionsMade}`;
}

/**
 * A connector of one endpoint's own: a connection per role, made for it and closed with it (what every endpoint had
 * before connections were shared; tests and one-off tools build endpoints this way).
 */
export function ownConnector<E, L>(make: (role: ConnectionRole) => { acquire(events: E): Promise<L> }): { acquire(role: ConnectionRole, events: E): Promise<L> } {
  const made = new Map<ConnectionRole, { acquire(events: E): Promise<L> }>();
  return {
    acquire(role, events) {
      let c = made.get(role);
      if (c === undefined) {
        c = make(role);
        made.set(role, c);
      }
      return c.acquire(events);
    },
  };
}

/**
 * An endpoint's hold on a shared connection, the part every protocol's lease has: it ends once, by the endpoint letting
 * go or by the connection's loss, and a loss is heard at most once and never after the endpoint let go. A protocol's
 * lease adds what an endpoint does on the connection, and how letting go reaches its owner.
 */
export abstract class ConnectionLease<L extends { readonly name: string }> {
  private done = false;

  protected constructor(
    protected readonly live: L,
    private readonly onLost: (error: TransientError) => void,
  ) {}

  /** The connection's name (AMQP: its `connection_name`, as the broker shows it). */
  get connectionName(): string {
    return this.live.name;
  }

  /** The lease has ended (let go, or its connection lost). */
  protected get ended(): boolean {
    return this.done;
  }

  /** Ends the lease; true the first time only, when the caller is the one to tell the owner. */
  protected end(): boolean {
    if (this.done) return false;
    this.done = true;
    return true;
  }

  /** @internal The owner lost the connection: the endpoint hears of it, unless it let go already. */
  lost(error: TransientError): void {
    if (this.end()) this.onLost(error);
  }
}
