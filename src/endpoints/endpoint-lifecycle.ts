/**
 * The one lifecycle every endpoint has (src/core/ports.ts): one session per object, opened once, lost at most once,
 * closed once. Each protocol's endpoint base (amqp/amqp-endpoint.ts, stomp/stomp-endpoint.ts, mqtt/mqtt-endpoint.ts,
 * nats/nats-endpoint.ts) holds one and asks it, instead of flags of its own; what a loss or a close settles stays
 * the protocol's.
 *
 *   new ──begin()──▶ opening ──opened()──▶ open
 *                       │                    │
 *                       └──── lose() ────────┴──▶ lost ──close()──▶ closed   (close() from any stage)
 */
import { TransientError } from '../shared/errors.js';
import { openedTwice } from './endpoint-handlers.js';

export type LifecycleStage = 'new' | 'opening' | 'open' | 'lost' | 'closed';

export class EndpointLifecycle {
  private current: LifecycleStage = 'new';

  constructor(private readonly description: string) {}

  get stage(): LifecycleStage {
    return this.current;
  }

  /** Lost or closed: nothing more is done on the session. */
  get over(): boolean {
    return this.current === 'lost' || this.current === 'closed';
  }

  get opening(): boolean {
    return this.current === 'opening';
  }

  get open(): boolean {
    return this.current === 'open';
  }

  /** open() begins. A second open(), or one after close(), is a bug (an endpoint serves one session), never retried. */
  begin(): void {
    if (this.current !== 'new') throw openedTwice(this.description);
    this.current = 'opening';
  }

  /** open() is about to resolve: a loss from now on is reported to the core. False when the session is over already. */
  opened(): boolean {
    if (this.current !== 'opening') return false;
    this.current = 'open';
    return true;
  }

  /**
   * The session is lost. Returns the stage it was lost from — `open` (the core hears of it), `opening` (open() fails
   * with it) — or undefined when it was over already, or never opened: a loss is acted on once.
   */
  lose(): 'open' | 'opening' | undefined {
    const was = this.current;
    if (was !== 'open' && was !== 'opening') return undefined;
    this.current = 'lost';
    return was;
  }

  /** close(): true the first time (from any stage), false when closed already. */
  close(): boolean {
    if (this.current === 'closed') return false;
    this.current = 'closed';
    return true;
  }

  /** What open() rejects with when close() (or a loss) came while it ran: the session is over, the next one may do. */
  closedWhileOpening(): TransientError {
    return new TransientError(`${this.description} was closed while opening`);
  }
}
