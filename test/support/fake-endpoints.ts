/**
 * In-memory source and target endpoints for the unit tests of the session and the supervisor (pure logic: ordering,
 * acks, retries, states). They prove nothing about delivery: that is test/support/endpoint-contract.ts against real
 * brokers.
 */
import type { BridgeMessage, SourceDelivery, Unreadable } from '../../src/core/message.js';
import type { SourceEndpoint, SourceHandlers, TargetEndpoint, TargetHandlers } from '../../src/core/ports.js';
import { CONFIRMED, failedMember } from '../../src/core/batch-result.js';

export class FakeSource implements SourceEndpoint {
  readonly description = 'fake source';
  readonly address = 'fake://source';
  handlers?: SourceHandlers;
  /** The `seq` of every ack, in order (acks after close are dropped, as a real broker would never see them). */
  acked: number[] = [];
  consuming = false;
  opened = false;
  closed = false;
  /** What depth() answers: messages waiting in the "queue". */
  waiting = 0;
  /** ackBarrier() fails (the connection went after the acks: whether they arrived is unknown). */
  barrierFails = false;
  private seq = 0;
  resumeConsuming?: () => Promise<void>;

  /** `resumable`: the endpoint can consume again after stopConsuming() (what pause/resume needs). */
  constructor(options: { resumable?: boolean } = {}) {
    if (options.resumable) this.resumeConsuming = () => Promise.resolve(void (this.consuming = true));
  }
  async open(h: SourceHandlers) {
    this.handlers = h;
    this.opened = true;
    this.consuming = true;
  }
  /** The `seq` of every delivery handed back through reject(), in order. */
  rejected: number[] = [];
  deliver(message: BridgeMessage, redelivered = false, stableId?: string, unreadable?: Unreadable): void {
    this.seq += 1;
    this.handlers!.onDelivery({ message, redelivered, stableId, seq: this.seq, ...(unreadable ? { unreadable } : {}) });
  }
  ack(d: SourceDelivery) {
    if (!this.closed) this.acked.push(d.seq);
  }
  reject(d: SourceDelivery) {
    if (!this.closed) this.rejected.push(d.seq);
  }
  async ackBarrier() {
    if (this.barrierFails) throw new Error('fake source: the ack barrier failed');
  }
  async stopConsuming() {
    this.consuming = false;
  }
  depth(): Promise<number> {
    return Promise.resolve(this.waiting);
  }
  async close() {
    this.closed = true;
  }
}

/** What the fake target does with a send: confirm it, hold it (no answer until released), or refuse it. */
export type Outcome = 'confirm' | 'hold' | Error;

export class FakeTarget implements TargetEndpoint {
  readonly description = 'fake target';
  constructor(readonly address = 'fake://target') {}
  handlers?: TargetHandlers;
  sent: BridgeMessage[] = [];
  batches: number[] = [];
  held: (() => void)[] = [];
  heldReject: ((e: Error) => void)[] = [];
  outcome: (m: BridgeMessage) => Outcome = () => 'confirm';
  closed = false;
  /** Offers sendBatch (as the AMQP and STOMP targets do; used with max-batch-size > 1). */
  batching = false;
  async open(h: TargetHandlers) {
    this.handlers = h;
  }
  send(m: BridgeMessage): Promise<void> {
    this.sent.push(m);
    const o = this.outcome(m);
    if (o === 'confirm') return Promise.resolve();
    if (o === 'hold') {
      return new Promise((resolve, reject) => {
        this.held.push(resolve);
        this.heldReject.push(reject);
      });
    }
    return Promise.reject(o);
  }
  get sendBatch() {
    if (!this.batching) return undefined;
    return (ms: BridgeMessage[]) => {
      this.batches.push(ms.length);
      // Per member, as the AMQP target: each member's outcome is its own send's.
      return Promise.allSettled(ms.map((m) => this.send(m))).then((rs) => rs.map((r) => (r.status === 'fulfilled' ? CONFIRMED : failedMember(r.reason))));
    };
  }
  async close() {
    this.closed = true;
  }
}
