/**
 * A target's confirmation comes within its bound (`confirm-timeout`) or not at all: past the bound, the target treats
 * its connection as broken, which fails every request in flight as outcome unknown. Two shapes of one rule:
 * - confirmWithin, for the targets whose confirmation answers one request (a STOMP RECEIPT, an MQTT PUBACK);
 * - ConfirmDeadline, for pipelined confirms (AMQP publisher confirms, JetStream PubAcks): one sweep per target looks at
 *   the oldest send still waiting, instead of a timer per message on the per-message path.
 */
import { asError } from '../shared/errors.js';

/** Settles as `promise` does (a rejection passed through `mapError`), clearing the timer either way. */
export function confirmWithin<T>(promise: Promise<T>, ms: number, onTimeout: () => void, mapError: (err: Error) => Error = (e) => e): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(onTimeout, ms);
    promise.then(
      (v) => {
        clearTimeout(timer);
        resolve(v);
      },
      (e: unknown) => {
        clearTimeout(timer);
        reject(mapError(asError(e)));
      },
    );
  });
}

/**
 * How often a ConfirmDeadline looks: a fifth of the bound, between 10 ms and 1 s (a deadline is seen at most that much
 * late; at 1,000 bridges with the default bound, one look per target a second).
 */
export function sweepPeriod(ms: number): number {
  return Math.max(10, Math.min(1000, Math.floor(ms / 5)));
}

/** The sweep over a target's oldest unconfirmed send; started once open, stopped when the session ends. */
export class ConfirmDeadline {
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly ms: number,
    /** performance.now() when the oldest send still waiting went out; undefined when none waits or none counts now (a blocked connection). */
    private readonly oldestSentAt: () => number | undefined,
    /** The bound passed: treat the connection as broken (called once; the sweep stops first). */
    private readonly onTimeout: () => void,
  ) {}

  start(): void {
    if (this.timer !== undefined) return;
    this.timer = setInterval(() => this.look(), sweepPeriod(this.ms));
    this.timer.unref();
  }

  stop(): void {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
  }

  private look(): void {
    const sentAt = this.oldestSentAt();
    if (sentAt === undefined || performance.now() - sentAt <= this.ms) return;
    this.stop();
    this.onTimeout();
  }
}
