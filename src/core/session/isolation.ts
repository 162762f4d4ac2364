/**
 * The target gate's isolation (docs/design.md §7.2): a message sent again after a refusal — a suspect (refused as one
 * of several, the target not saying which), one refused for itself, a batch member whose transaction was refused for
 * another — goes out alone, with nothing else in flight, and the gate stays closed to new sends meanwhile: only the
 * sends in flight when it was refused may overtake it, no later message (docs/delivery.md, "Order"). Alone on the
 * target, a refusal names its message: the culprit is dead-lettered, the innocent go through.
 */
import type { SessionContext } from './context.js';
import type { Forwarding } from './job.js';
import type { MessageRejectedError } from '../../shared/errors.js';
import type { GateSender } from './gate-sender.js';

export class Isolation {
  /** Refused (ambiguously, for themselves, or with their transaction): sent again one at a time, in this order. */
  private readonly queue: Forwarding[] = [];
  private running = false;

  constructor(
    private readonly ctx: SessionContext,
    private readonly gate: GateSender,
    /** A message sent alone that the target refused as full: held (./full-target.ts). */
    private readonly hold: (sending: Forwarding, err: MessageRejectedError) => void,
  ) {}

  /** Messages are being sent alone: the gate takes no new sends. */
  get active(): boolean {
    return this.running;
  }

  /** Queues a message to be sent again alone, and starts sending the queue (once) if it is not running. */
  add(sending: Forwarding): void {
    this.queue.push(sending);
    void this.run().catch((e: unknown) => this.ctx.fail(e));
  }

  /** Sends the queued messages one at a time, each once nothing else is in flight; runs once at a time. */
  private async run(): Promise<void> {
    if (this.running) return;
    this.running = true;
    try {
      while (this.queue.length > 0 && !this.ctx.ended) {
        await this.gate.untilIdle();
        const next = this.queue.shift();
        if (next === undefined) continue;
        const outcome = await this.gate.sendAlone(next);
        if (outcome.kind === 'full') this.hold(next, outcome.error);
      }
    } finally {
      this.running = false;
      this.gate.wakeOpened();
    }
  }
}
