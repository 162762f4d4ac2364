/**
 * One bridge session: a source, a target (and a dead-letter destination) connected together until something breaks
 * or the bridge is stopped. The supervisor (./supervisor.ts) builds a new session after every loss.
 *
 * Per message: the bridge's filter (a message it does not select goes no further: skipped or dead-lettered, never near
 * the cache) → resolve the duplicate ID (header, stable identity or stamp) → reserve it for the target address →
 * send → wait for the target's confirmation → commit the ID → ack the source. Many messages are in flight at once
 * (up to the source prefetch); they are sent in source order by one loop, and settle as confirmations arrive.
 *
 * Failure handling:
 * - the duplicate-ID cache unreachable: every cache call is retried with backoff while the session lives; messages are
 *   held (nothing is forwarded unchecked, nothing is acked), and the flow resumes by itself.
 * - a message the target refuses: retried up to max-delivery-attempts, then moved to the dead-letter destination with
 *   the reason, and only then acked; with no dead-letter destination the bridge stops instead of dropping.
 * - a lost connection: the session ends; nothing unconfirmed is acked, so the broker redelivers it. Reservations of
 *   messages whose send outcome is unknown are released as "uncertain", so their resend is flagged a possible duplicate.
 *
 * This file is the session's life (open, pause, drain, end) and its intake; the stages a message goes through are in
 * ./session/, one module each, all working on the shared ./session/context.ts:
 *   job.ts          a message in flight and the stage it is at
 *   filter.ts       the bridge's filter and filter-miss (skip, dead-letter), decided first in prepare()
 *   resolve-id.ts   its duplicate ID (header, stable identity, stamp) and reservation
 *   send-loop.ts    the ordered send loop and batching
 *   park.ts         busy IDs set aside and retried
 *   send.ts         writing to the target, confirmations and refusals
 *   isolate.ts      ambiguous refusals resent one at a time
 *   dead-letter.ts  refused too often: the dead-letter destination
 *   settle.ts       commit the ID, ack the source
 *   cache-retry.ts  the cache failing closed
 *   stamps.ts       stamp leases renewed, stamp records forgotten
 *   teardown.ts     the end: connections closed, reservations given back
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { BridgeError } from '../shared/errors.js';
import type { SourceDelivery } from './message.js';
import type { SourceEndpoint } from './ports.js';
import type { SessionDeps } from './session/deps.js';
import type { Prepared } from './session/job.js';
import { SessionContext } from './session/context.js';
import { Job } from './session/job.js';
import { prepare } from './session/resolve-id.js';
import { sendLoop } from './session/send-loop.js';
import { forgetAckedStamps, renewStamps } from './session/stamps.js';
import { SessionStopped, teardown, type SessionEnd } from './session/teardown.js';

export { DEAD_LETTER_HEADERS } from './session/dead-letter.js';
export type { SessionDeps, SessionObserver } from './session/deps.js';
export type { SessionEnd } from './session/teardown.js';

/** Also bounds how long the stamp of an acked message lingers (rule 3 of stamp-claim-1.lua): kept short. */
const ACK_BARRIER_INTERVAL_MS = 50;
/** How long a drain waits for the broker to confirm the acks written before it closes. */
const ACK_BARRIER_TIMEOUT_MS = 2000;

export class BridgeSession {
  private readonly ctx: SessionContext;
  private seq = 0;
  private paused = false;
  /** False while a session opened paused has not opened its source yet (see open()). */
  private sourceOpen = false;
  private barrierTimer?: NodeJS.Timeout;
  private renewTimer?: NodeJS.Timeout;
  private readonly prepareJob = (job: Job): Promise<Prepared> => prepare(this.ctx, job);
  private resolveEnded!: (end: SessionEnd) => void;
  /** Resolves once, when the session has ended and its connections are closed. */
  readonly finished: Promise<SessionEnd>;

  constructor(private readonly deps: SessionDeps) {
    this.finished = new Promise((resolve) => (this.resolveEnded = resolve));
    this.ctx = new SessionContext(deps, (error) => this.ended(error));
  }

  /**
   * Opens target, dead-letter and source (in that order, so nothing is consumed before it can go somewhere).
   * `paused`: the source is not opened (nothing is consumed) until resume().
   */
  async open(options: { paused?: boolean } = {}): Promise<void> {
    const { source, target, deadLetter } = this.deps;
    const ctx = this.ctx;
    try {
      await target.open({ onLost: (e) => ctx.fail(e), onBlocked: (b, reason) => this.setBlocked(b, reason) });
      if (deadLetter) await deadLetter.open({ onLost: (e) => ctx.fail(e) });
      if (options.paused) {
        this.paused = true;
      } else {
        await this.openSource();
      }
    } catch (err) {
      await Promise.allSettled([source.close(), target.close(), deadLetter?.close()]);
      throw err;
    }
    void sendLoop(ctx);
    this.barrierTimer = setInterval(() => void forgetAckedStamps(ctx), ACK_BARRIER_INTERVAL_MS);
    this.barrierTimer.unref();
    if (ctx.dedupe) {
      this.renewTimer = setInterval(() => void renewStamps(ctx), Math.max(50, Math.floor(this.deps.cache.lease / 3)));
      this.renewTimer.unref();
    }
  }

  private async openSource(): Promise<void> {
    await this.deps.source.open({ onDelivery: (d) => this.accept(d), onLost: (e) => this.ctx.fail(e) });
    this.sourceOpen = true;
  }

  /** Messages received and not settled (acked) yet. */
  get inFlight(): number {
    return this.ctx.unsettled.size;
  }

  /** What holds the session right now, for the supervisor's state. */
  get conditions(): { paused: boolean; blocked: boolean; cacheDown: boolean; targetFullSince: number | undefined } {
    return { paused: this.paused, blocked: this.ctx.blocked, cacheDown: this.ctx.cacheRetry.down, targetFullSince: this.ctx.targetFullSince };
  }

  /** The source endpoint, for its queue depth (see SourceEndpoint.depth). */
  get source(): SourceEndpoint {
    return this.deps.source;
  }

  /** Stops consuming and keeps the connections; messages already delivered go on and settle as usual. */
  async pause(): Promise<void> {
    if (this.paused || this.ctx.failure) return;
    this.paused = true;
    this.deps.observer?.conditionChanged();
    if (this.sourceOpen) await this.deps.source.stopConsuming();
  }

  /**
   * Consumes again after pause(). Resolves to false when the source cannot resume on its connection
   * (no resumeConsuming): the caller must then start a new session. Rejects when the source cannot be opened.
   */
  async resume(): Promise<boolean> {
    if (!this.paused || this.ctx.failure) return true;
    const source = this.deps.source;
    if (!this.sourceOpen) {
      await this.openSource();
    } else if (source.resumeConsuming) {
      await source.resumeConsuming();
    } else {
      return false;
    }
    this.paused = false;
    this.deps.observer?.conditionChanged();
    return true;
  }

  /** Ends the session at once with `error` (the stall watchdog): nothing unconfirmed is acked, the broker redelivers it. */
  end(error: BridgeError): void {
    this.ctx.fail(error);
  }

  /** Stops consuming, lets in-flight messages finish within `timeoutMs`, then closes. Unfinished ones stay unacked. */
  async drain(timeoutMs: number): Promise<SessionEnd> {
    const ctx = this.ctx;
    if (!ctx.failure) {
      ctx.draining = true;
      await this.deps.source.stopConsuming().catch(() => undefined);
      const deadline = Date.now() + timeoutMs;
      while (ctx.unsettled.size > 0 && !ctx.failure && Date.now() < deadline) {
        await ctx.allSettled.wait(Math.min(100, Math.max(1, deadline - Date.now())));
      }
      if (ctx.unsettled.size > 0 && !ctx.failure) {
        ctx.log.warn({ unfinished: ctx.unsettled.size }, 'drain timeout reached: unfinished messages stay unacked and will be redelivered');
      }
      // The acks just written may still wait in the client's buffers (amqplib queues each channel's frames apart from
      // the connection's close): a barrier makes sure the broker has them, or drained messages would come back and be
      // dropped as duplicates. Bounded: a lost connection must not hold the drain.
      if (this.sourceOpen) await Promise.race([this.deps.source.ackBarrier().catch(() => undefined), sleep(ACK_BARRIER_TIMEOUT_MS)]);
      await forgetAckedStamps(ctx);
      ctx.fail(new SessionStopped('stopped'));
    }
    return this.finished;
  }

  private accept(delivery: SourceDelivery): void {
    const ctx = this.ctx;
    // After a failure or during a drain the message is left unacked: the broker redelivers it.
    if (ctx.failure || ctx.draining) return;
    this.seq += 1;
    const job = new Job(delivery, performance.now(), `${this.deps.tokenPrefix}.${this.seq}`, this.prepareJob);
    ctx.unsettled.add(job);
    ctx.pending.push(job);
    ctx.work.wake();
  }

  private setBlocked(blocked: boolean, reason?: string): void {
    const ctx = this.ctx;
    if (blocked === ctx.blocked) return;
    ctx.blocked = blocked;
    if (blocked) {
      ctx.log.warn({ reason }, 'target broker blocked publishing (flow control): holding messages');
    } else {
      ctx.log.info('target broker unblocked publishing: resuming');
      ctx.sendable.wake();
    }
    this.deps.observer?.conditionChanged();
  }

  /** The context's failure is set and its loops are woken: stop the timers and close. */
  private ended(error: BridgeError): void {
    if (this.barrierTimer) clearInterval(this.barrierTimer);
    if (this.renewTimer) clearInterval(this.renewTimer);
    void teardown(this.ctx, error, this.resolveEnded);
  }
}
