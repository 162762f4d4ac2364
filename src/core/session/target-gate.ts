/**
 * The target gate: everything between "a job is ready to send" and "its outcome is known" (docs/design.md §7.2). It
 * owns the sends in flight, flow control, and the one attempt() that every send goes through — pipelined, a batch, a
 * message sent again alone, a probe of a full target — so that every path marks, counts and classifies a send the same
 * way, and the one refusal dispatch (refused()) that does what ./refusal-policy.ts says after every failed send. What
 * else holds new sends back is a part of its own, each a concept:
 *
 * - ./isolation.ts: messages sent again alone after a refusal, nothing else in flight (a suspect, one refused for
 *   itself, a batch member refused with its transaction);
 * - ./full-target.ts: messages the target refused as full, held and probed for room, and the send window after;
 * - ./liveness-guard.ts: this process's liveness in the shared cache (docs/design.md §10.3).
 *
 * The send loop (./send-loop.ts) asks one question, `await gate.open()`, then hands a message (or a batch) to send()
 * or sendBatch(). Sends are pipelined: many are in flight, and each outcome is handled when it comes:
 * - confirmed: the job is confirmed, its ID committed and the source acked (./settle.ts);
 * - refused: the refusal policy says what it means — `wait-for-room` (held, ./full-target.ts), `isolate` (flagged, it
 *   may have been delivered, and sent again alone), `resend` (the attempt counted, sent again alone), `dead-letter`
 *   (counted, ./dead-letter.ts) or `end-session` (the broker redelivers what was not settled).
 */
import type { SessionContext } from './context.js';
import type { Forwarding } from './job.js';
import type { AloneOutcome, GateSender } from './gate-sender.js';
import { CONFIRMED, failedMember, type BatchMemberResult } from '../batch-result.js';
import { MessageRejectedError, TransientError } from '../../shared/errors.js';
import { withPossibleDuplicateFlag } from '../duplicate-id.js';
import { Signal } from '../../shared/signal.js';
import { deadLetter } from './dead-letter.js';
import { refusalAction } from './refusal-policy.js';
import { commitAndAck, confirm } from './settle.js';
import { FullTarget } from './full-target.js';
import { Isolation } from './isolation.js';
import { LivenessGuard } from './liveness-guard.js';

/** A send that failed: its result, as a batch member's would be (../batch-result.ts). */
type Failed = Exclude<BatchMemberResult, { outcome: 'confirmed' }>;

/**
 * What is left to do after a refusal, which depends on how the message was sent: send it again alone, hold it (the
 * target is full), wait for its dead-lettering, or nothing (the session ends).
 */
type AfterRefusal =
  | { readonly next: 'again' }
  | { readonly next: 'full'; readonly error: MessageRejectedError }
  | { readonly next: 'dead-lettering'; readonly done: Promise<void> }
  | { readonly next: 'ended' };

const AGAIN: AfterRefusal = Object.freeze({ next: 'again' });
const ENDED: AfterRefusal = Object.freeze({ next: 'ended' });
const SETTLED_ALONE: AloneOutcome = Object.freeze({ kind: 'settled' });
const ENDED_ALONE: AloneOutcome = Object.freeze({ kind: 'ended' });

export class TargetGate {
  /** Sends written and not settled yet (a batch counts once). */
  private inFlight = 0;
  /** The target's broker blocks publishing (flow control, AMQP connection.blocked). */
  private blocked = false;
  /** The gate may have opened: the target unblocked, an isolation ended, the target took the held messages. */
  private readonly opened = new Signal();
  /** Nothing is in flight any more. */
  private readonly idle = new Signal();
  private readonly liveness: LivenessGuard;
  private readonly full: FullTarget;
  private readonly isolation: Isolation;

  constructor(private readonly ctx: SessionContext) {
    const sender: GateSender = {
      untilIdle: () => this.untilIdle(),
      sendAlone: (sending) => this.sendAlone(sending),
      wakeOpened: () => this.opened.wake(),
    };
    this.liveness = new LivenessGuard(ctx);
    this.full = new FullTarget(ctx, sender);
    this.isolation = new Isolation(ctx, sender, (sending, err) => this.full.hold(sending, err));
  }

  /**
   * Resolves once new sends may go out: not blocked, nothing being sent alone, not full, the window not full, and this
   * process live (what a lapse may have taken checked); or once the session ended.
   */
  async open(): Promise<void> {
    for (;;) {
      if (this.ctx.ended) return;
      if (this.blocked || this.isolation.active || this.full.since !== undefined || this.inFlight >= this.full.limit) {
        await this.opened.wait();
      } else if (!this.liveness.clear) {
        await this.liveness.restore(this.opened);
      } else {
        return;
      }
    }
  }

  /** Sending through the window a full refusal opened (not yet back to unbounded): one message per send, no batches. */
  get windowed(): boolean {
    return this.full.windowed;
  }

  /** What holds the gate, for the supervisor's state and status. */
  get conditions(): { blocked: boolean; fullSince: number | undefined } {
    return { blocked: this.blocked, fullSince: this.full.since };
  }

  /** Flow control from the target's broker. Returns whether it changed. */
  setBlocked(blocked: boolean, reason?: string): boolean {
    if (blocked === this.blocked) return false;
    this.blocked = blocked;
    if (blocked) {
      this.ctx.log.warn({ reason }, 'target broker blocked publishing (flow control): holding messages');
    } else {
      this.ctx.log.info('target broker unblocked publishing: resuming');
      this.opened.wake();
    }
    return true;
  }

  /** The session ended: every wait of the gate returns. */
  ended(): void {
    this.opened.wake();
    this.idle.wake();
    this.full.ended();
  }

  /**
   * After the end, before the target is closed: waits (at most `ms`) for the sends still in flight to be answered. A
   * session that ended on the source's side (its connection lost) has a healthy target whose confirmations are on
   * their way; closing it first would turn each into an unknown outcome, its redelivery forwarded again, flagged. A
   * confirmed one is committed instead (./teardown.ts), and its redelivery dropped as a duplicate.
   */
  async settleInFlight(ms: number): Promise<void> {
    const deadline = Date.now() + ms;
    while (this.inFlight > 0) {
      const left = deadline - Date.now();
      if (left <= 0) return;
      await this.idle.wait(left);
    }
  }

  /** Sends one message, pipelined: its outcome is handled when the target answers. */
  send(sending: Forwarding): void {
    const batch = [sending];
    void this.attempt(batch).then((results) => this.answered(batch, results));
  }

  /**
   * Sends messages together when the target can (one transaction, one flush), else one by one. Each member is then
   * handled as a single send with its outcome would be (answered()).
   */
  sendBatch(batch: Forwarding[]): void {
    if (!this.ctx.deps.target.sendBatch || batch.length === 1) {
      for (const sending of batch) this.send(sending);
      return;
    }
    void this.attempt(batch).then((results) => this.answered(batch, results));
  }

  /**
   * The one way messages are written to the target — one (TargetEndpoint.send) or a batch (sendBatch): each marked
   * sent (flagged if liveness lapsed since its reservation), the send counted in flight (a batch once), and its outcome
   * classified, one result per message (../batch-result.ts). Never rejects. The send stays counted in flight until the
   * caller calls landed() in the same tick as it handles the results, so that what its end wakes (the send loop, an
   * isolation or a probe waiting for the target to be idle) finds a refused message already held or queued.
   */
  private async attempt(batch: readonly Forwarding[]): Promise<readonly BatchMemberResult[]> {
    for (const sending of batch) {
      sending.sent = true;
      this.liveness.flagIfLapsed(sending);
    }
    this.inFlight += 1;
    const results = batch.length === 1 ? [await this.write(batch[0]!)] : await this.writeBatch(batch);
    // Known not to have reached the target: its reservation can be given back as certain.
    batch.forEach((sending, i) => {
      if (results[i]!.outcome === 'not-sent') sending.sent = false;
    });
    return results;
  }

  /** An attempt's answer is being handled: it is no longer in flight. */
  private landed(): void {
    this.inFlight -= 1;
    if (this.inFlight === 0) this.idle.wake();
    if (this.inFlight === this.full.limit - 1) this.opened.wake();
  }

  private async write(sending: Forwarding): Promise<BatchMemberResult> {
    try {
      await this.ctx.deps.target.send(sending.outgoing, sending.job.route?.route);
      return CONFIRMED;
    } catch (err) {
      return failedMember(err);
    }
  }

  /**
   * A batch, one result per member. A rejection (against the port's contract: sendBatch never rejects) or a wrong
   * number of results tells nothing of any member: each is `unknown`, and the session ends.
   */
  private async writeBatch(batch: readonly Forwarding[]): Promise<readonly BatchMemberResult[]> {
    const target = this.ctx.deps.target;
    let results: readonly BatchMemberResult[];
    try {
      results = await target.sendBatch!(
        batch.map((s) => s.outgoing),
        batch.map((s) => s.job.route?.route),
      );
    } catch (err) {
      const error = err instanceof TransientError ? err : new TransientError(`the target's batch send failed: ${String(err)}`, { cause: err, outcomeUnknown: true });
      return batch.map(() => ({ outcome: 'unknown', error }));
    }
    if (results.length === batch.length) return results;
    const error = new TransientError(`the target answered a batch of ${batch.length} with ${results.length} results`, { outcomeUnknown: true });
    return batch.map(() => ({ outcome: 'unknown', error }));
  }

  /**
   * A pipelined send (or batch) answered: the confirmed first, so that their IDs are committed and their deliveries
   * acked whatever happened to the others; then each failed one as the refusal policy says.
   */
  private answered(batch: readonly Forwarding[], results: readonly BatchMemberResult[]): void {
    this.landed();
    const now = performance.now();
    batch.forEach((sending, i) => {
      if (results[i]!.outcome === 'confirmed') void this.confirmed(sending, now);
    });
    batch.forEach((sending, i) => {
      const result = results[i]!;
      if (result.outcome !== 'confirmed') this.failed(sending, result);
    });
  }

  /** The target confirmed it: its ID is committed and its delivery acked (a commit that fails ends the session). */
  private confirmed(sending: Forwarding, now: number): Promise<void> {
    if (this.full.confirmed()) this.opened.wake();
    confirm(this.ctx, sending, now);
    return this.ctx.ended ? Promise.resolve() : commitAndAck(this.ctx, sending.job, sending.id);
  }

  /** A pipelined send (or batch member) failed: what the refusal policy says, then what is left for a pipelined send. */
  private failed(sending: Forwarding, result: Failed): void {
    const ctx = this.ctx;
    if (ctx.ended) return;
    const after = this.refused(sending, result, false);
    switch (after.next) {
      case 'again':
        this.again(sending);
        return;
      case 'full':
        this.full.hold(sending, after.error);
        return;
      case 'dead-lettering':
        void after.done.catch((e: unknown) => ctx.fail(e));
        return;
      case 'ended':
        return;
    }
  }

  /**
   * Sends one message with nothing else in flight, until it is settled (confirmed and acked, or refused as often as
   * max-delivery-attempts allows and dead-lettered) or the target refuses it as full. Alone on the target, a refusal
   * names this message, whatever the broker says about the others. Rejects when the session must end.
   */
  private async sendAlone(sending: Forwarding): Promise<AloneOutcome> {
    const batch = [sending];
    for (;;) {
      if (this.ctx.ended) return ENDED_ALONE;
      const result = (await this.attempt(batch))[0]!;
      this.landed();
      if (result.outcome === 'confirmed') {
        await this.confirmed(sending, performance.now());
        return SETTLED_ALONE;
      }
      const after = this.refused(sending, result, true);
      switch (after.next) {
        case 'again':
          continue;
        case 'full':
          return { kind: 'full', error: after.error };
        case 'dead-lettering':
          await after.done;
          return SETTLED_ALONE;
        case 'ended':
          return ENDED_ALONE;
      }
    }
  }

  /**
   * The one refusal dispatch: after a failed send of `sending`, does what ./refusal-policy.ts says — counts the
   * attempt, flags the copy, logs, starts its dead-lettering, ends the session — and says what is left to do, which
   * depends on how it was sent. `alone`: nothing else was in flight, so a refusal is its own; there the session's end
   * is thrown (the caller's loop unwinds and fails the session), pipelined it is failed here.
   */
  private refused(sending: Forwarding, result: Failed, alone: boolean): AfterRefusal {
    const ctx = this.ctx;
    // Known not sent, through no fault of its own (a batch member whose transaction was refused for another): again,
    // unflagged and uncounted. A single send always fails with an error (../batch-result.ts failedMember).
    if (result.outcome === 'not-sent' && result.error === undefined) return AGAIN;
    const err = result.error ?? new TransientError('the target did not take the message', { outcomeUnknown: true });
    switch (refusalAction(err, sending.attempts, ctx.cfg.maxDeliveryAttempts, alone)) {
      case 'end-session':
        if (alone) throw err;
        ctx.fail(err);
        return ENDED;
      case 'wait-for-room':
        return { next: 'full', error: err as MessageRejectedError };
      case 'isolate':
        // Never when alone. Not proven guilty: no attempt is counted. It may have reached the target: its resend is flagged.
        sending.outgoing = withPossibleDuplicateFlag(sending.outgoing);
        if (!this.isolation.active) ctx.log.warn('target refused one of several messages without saying which: resending them one at a time');
        return AGAIN;
      case 'resend':
        this.countRefusal(sending, err as MessageRejectedError, true);
        return AGAIN;
      case 'dead-letter':
        this.countRefusal(sending, err as MessageRejectedError, false);
        return { next: 'dead-lettering', done: deadLetter(ctx, sending, err as MessageRejectedError) };
    }
  }

  /** Sends a pipelined message again, alone (or, while the target is full, with the held ones). */
  private again(sending: Forwarding): void {
    if (this.full.since !== undefined) this.full.keep(sending);
    else this.isolation.add(sending);
  }

  /** Counts a refusal of the message against max-delivery-attempts; `resending`: it goes out again (logged). */
  private countRefusal(sending: Forwarding, err: MessageRejectedError, resending: boolean): void {
    const ctx = this.ctx;
    sending.attempts += 1;
    ctx.deps.metrics.rejections.inc({ bridge: ctx.cfg.name, reason: err.reason });
    if (resending) {
      ctx.log.warn({ duplicateId: sending.id, attempt: sending.attempts, reason: err.reason, err }, 'target refused a message: sending it again');
    }
  }

  private async untilIdle(): Promise<void> {
    while (this.inFlight > 0 && !this.ctx.ended) await this.idle.wait();
  }
}
