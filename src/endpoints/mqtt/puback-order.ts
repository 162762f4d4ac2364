/**
 * The PUBACKs of one source session, in the order the PUBLISHes came. MQTT wants them so (MQTT 3.1.1 and 5, section
 * 4.6: "MUST send PUBACK packets in the order in which the corresponding PUBLISH packets were received"), while the
 * session settles messages in any order (a duplicate settles at once, a parked one later). So an ack marks its entry,
 * and the PUBACKs of the acked entries at the head are written; an entry not acked yet holds back every PUBACK after
 * it (they come back with it, as redeliveries, if the session ends first).
 *
 * The PUBACKs that become due while one callback runs (a commit group's acks: up to hundreds) are written together,
 * once it has returned (process.nextTick, as ../../shared/coalesce-writes.ts gathers a tick's writes): one buffer and
 * one socket write instead of a packet object, an encoding and a write each. No latency is added: they go before the
 * event loop moves on, and written() — the ack barrier's first step — resolves only once they have gone.
 *
 * How much is in flight is the broker's to bound: the receive maximum the source announced (MQTT 5) or the broker's
 * own in-flight limit (3.1.1: Mosquitto's max_inflight_messages, RabbitMQ's mqtt.prefetch).
 */
import { Deque } from '../../shared/deque.js';

/** One received QoS 1 PUBLISH whose PUBACK is owed. */
export interface PubackEntry {
  readonly messageId: number;
  /** Arrival order within the session. */
  readonly seq: number;
  acked: boolean;
}

export class PubackOrder {
  private readonly owed = new Deque<PubackEntry>();
  private seq = 0;
  /** The seq of the last PUBACK written, and of the last entry acked (written or held back). */
  private writtenSeq = 0;
  private ackedSeq = 0;
  /** PUBACKs due and not written yet (written at the end of the tick), and the seq of the last of them. */
  private due: number[] = [];
  private dueSeq = 0;
  private waiters: { seq: number; resolve: () => void; reject: (err: Error) => void }[] = [];
  private failure?: Error;

  /** `write` sends the PUBACKs of these packet identifiers, in this order (a no-op once the connection is gone). */
  constructor(private readonly write: (messageIds: readonly number[]) => void) {}

  /** A QoS 1 PUBLISH arrived: its PUBACK is owed from now on, after those of every earlier one. */
  receive(messageId: number): PubackEntry {
    const entry: PubackEntry = { messageId, seq: ++this.seq, acked: false };
    this.owed.push(entry);
    return entry;
  }

  /** The message of `entry` is settled: its PUBACK goes out as soon as every earlier one has. */
  ack(entry: PubackEntry): void {
    if (entry.acked) return;
    entry.acked = true;
    if (entry.seq > this.ackedSeq) this.ackedSeq = entry.seq;
    let head = this.owed.peek();
    if (head === undefined || !head.acked) return;
    if (this.due.length === 0) process.nextTick(this.flush);
    while (head !== undefined && head.acked) {
      this.owed.shift();
      this.due.push(head.messageId);
      this.dueSeq = head.seq;
      head = this.owed.peek();
    }
  }

  /** Writes the PUBACKs due now (at the end of the tick, or at once before a close). */
  readonly flush = (): void => {
    if (this.due.length === 0) return;
    const ids = this.due;
    this.due = [];
    if (this.failure !== undefined) return;
    this.write(ids);
    this.writtenSeq = this.dueSeq;
    // Waiters are in seq order (each waits for the last ack before it asked).
    while (this.waiters.length > 0 && this.waiters[0]!.seq <= this.writtenSeq) this.waiters.shift()!.resolve();
  };

  /**
   * Resolves once the PUBACK of every entry acked so far is written; rejects when the session ended first (those
   * messages come back as redeliveries).
   */
  written(): Promise<void> {
    if (this.failure !== undefined) return Promise.reject(this.failure);
    const seq = this.ackedSeq;
    if (seq <= this.writtenSeq) return Promise.resolve();
    return new Promise((resolve, reject) => this.waiters.push({ seq, resolve, reject }));
  }

  /** The session ended: nothing owed will be written. */
  fail(err: Error): void {
    this.failure ??= err;
    for (const w of this.waiters.splice(0)) w.reject(err);
  }
}
