/**
 * A receiver's link credit, set to a value (rhea only adds credit), and the broker's answer to each flow we write.
 *
 * rhea has no call that lowers credit or writes a flow without adding any, yet both are what stopConsuming, setWindow
 * and the ack barrier need; this reaches into the receiver's `credit` and `issue_flow` (rhea 3.x, lib/link.js), which
 * rhea writes into the next flow frame. RabbitMQ's plugin answers every link flow from a receiver with a flow of its
 * own once it has applied the credit (its basic.credit call on the session's channel, after every disposition before
 * it: checked against 3.10.8, and read in rabbit_amqp1_0_outgoing_link:flow/3). rhea writes one frame for any number
 * of requests made before it writes, so requests made meanwhile share one answer.
 */
import type { Receiver } from 'rhea';

interface ReceiverInternals {
  credit: number;
  issue_flow: boolean;
}

interface Waiter {
  resolve: () => void;
  reject: (err: Error) => void;
}

export class CreditFlow {
  /** Flows written (or about to be) and not answered yet, oldest first; each holds the requests it answers. */
  private readonly groups: Waiter[][] = [];

  constructor(private readonly receiver: Receiver) {}

  get credit(): number {
    return (this.receiver as unknown as ReceiverInternals).credit;
  }

  /** Writes a flow with `credit` (the current credit restated when undefined); resolves on the broker's answer. */
  write(credit?: number): Promise<void> {
    const r = this.receiver as unknown as ReceiverInternals;
    const shared = r.issue_flow && this.groups.length > 0;
    if (credit !== undefined) r.credit = Math.max(0, credit);
    r.issue_flow = true;
    (this.receiver.connection as unknown as { _register(): void })._register();
    return new Promise<void>((resolve, reject) => {
      const waiter = { resolve, reject };
      const last = this.groups.at(-1);
      if (shared && last !== undefined) last.push(waiter);
      else this.groups.push([waiter]);
    });
  }

  /** The broker's flow came: it answers the oldest flow written. */
  answered(): void {
    for (const w of this.groups.shift() ?? []) w.resolve();
  }

  /** The link or connection is gone: nothing will answer. */
  fail(error: Error): void {
    for (const group of this.groups.splice(0)) for (const w of group) w.reject(error);
  }
}
