/**
 * Acks of one AMQP channel, folded: deliveries settled in delivery order go out as one `basic.ack` with `multiple`,
 * instead of one frame each. The session settles almost always in order, so a busy bridge sends one ack per turn of
 * the event loop instead of hundreds, and the broker parses and handles that much less.
 *
 * A `multiple` ack covers every unacked tag up to the one it names, so it is only ever sent for a run at the head of
 * the outstanding deliveries that is settled throughout. A delivery settled while an earlier one is still open (a
 * dropped duplicate, a message waiting for a busy ID) is acked on its own, as before, so that a slow message never
 * holds back the acks (and the prefetch window) of the ones behind it. A `multiple` ack names a tag not acked yet:
 * RabbitMQ closes the channel when the tag it names is unknown.
 */
import { Deque } from '../../shared/deque.js';

export interface OutstandingDelivery<M> {
  readonly message: M;
  settled: boolean;
  acked: boolean;
}

export class AckCoalescer<M> {
  private readonly outstanding = new Deque<OutstandingDelivery<M>>();
  /** Settled since the last flush. */
  private settledNow: OutstandingDelivery<M>[] = [];
  private scheduled = false;

  /** `sendAck(message, multiple)` writes the frame; it is called in delivery order of the acks it covers. */
  constructor(private readonly sendAck: (message: M, multiple: boolean) => void) {}

  /** Registers a delivery, in the order the channel delivered it. */
  delivered(message: M): OutstandingDelivery<M> {
    const entry: OutstandingDelivery<M> = { message, settled: false, acked: false };
    this.outstanding.push(entry);
    return entry;
  }

  /** Marks a delivery settled; its ack goes out before the current callback's turn of the event loop ends. */
  settle(entry: OutstandingDelivery<M>): void {
    if (entry.settled) return;
    entry.settled = true;
    this.settledNow.push(entry);
    if (!this.scheduled) {
      this.scheduled = true;
      process.nextTick(() => this.flush());
    }
  }

  /** Sends every ack settled so far (also called directly before an ack barrier). */
  flush(): void {
    this.scheduled = false;
    let last: OutstandingDelivery<M> | undefined;
    for (let head = this.outstanding.peek(); head?.settled; head = this.outstanding.peek()) {
      this.outstanding.shift();
      if (!head.acked) last = head;
      head.acked = true;
    }
    if (last) this.sendAck(last.message, true);
    const settled = this.settledNow;
    this.settledNow = [];
    for (const entry of settled) {
      if (entry.acked) continue;
      entry.acked = true;
      this.sendAck(entry.message, false);
    }
  }
}
