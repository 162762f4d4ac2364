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
 *   settle.ts       commit the ID, ack the source (commit-group.ts: the IDs confirmed together, one commit call)
 *   byte-bound.ts   the bytes in flight against max-in-flight-bytes
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
/** How long a drain waits for a source call under way (a pause, the byte bound) before it stops consuming. */
const SOURCE_CALL_TIMEOUT_MS = 2000;

export class BridgeSession {
  private readonly ctx: SessionContext;
  private seq = 0;
  private paused = false;
  /** False while a session opened paused has not opened its source yet (see open()). */
  private sourceOpen = false;
  /** The source's consumer is on: opened, or resumed, and not stopped since. */
  private consuming = false;
  /** Source calls (stop, resume) run one at a time, in order: the operator's pause and the byte bound both make them. */
  private sourceCalls: Promise<void> = Promise.resolve();
  /** The delivery window the source has (the one wanted is ctx.bytes.window), and the setWindow call under way. */
  private appliedWindow: number;
  private windowCall?: Promise<void>;
  private barrierTimer?: NodeJS.Timeout;
  private renewTimer?: NodeJS.Timeout;
  private readonly prepareJob = (job: Job): Promise<Prepared> => prepare(this.ctx, job);
  private resolveEnded!: (end: SessionEnd) => void;
  /** Resolves once, when the session has ended and its connections are closed. */
  readonly finished: Promise<SessionEnd>;

  constructor(private readonly deps: SessionDeps) {
    this.finished = new Promise((resolve) => (this.resolveEnded = resolve));
    this.ctx = new SessionContext(
      deps,
      (error) => this.ended(error),
      (over) => this.byteBoundChanged(over),
      () => this.windowChanged(),
    );
    this.appliedWindow = this.ctx.bytes.window;
  }

  /**
   * Opens target, dead-letter and source (in that order, so nothing is consumed before it can go somewhere).
   * `paused`: the source is not opened (nothing is consumed) until resume().
   */
  async open(options: { paused?: boolean } = {}): Promise<void> {
    const { source, target, deadLetter } = this.deps;
    const ctx = this.ctx;
    try {
      await target.open({ onLost: (e) => ctx.fail(e), onBlocked: (b, reason) => this.setBlocked(b, reason), onDuplicate: (id) => this.droppedAtTarget(id) });
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
    this.consuming = true;
  }

  /** Messages received and not settled (acked) yet. */
  get inFlight(): number {
    return this.ctx.unsettled.size;
  }

  /** The bytes of their bodies (counted against max-in-flight-bytes). */
  get inFlightBytes(): number {
    return this.ctx.bytes.bytes;
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
    if (this.sourceOpen) await this.syncConsumer();
  }

  /**
   * Consumes again after pause(). Resolves to false when the source cannot resume on its connection
   * (no resumeConsuming): the caller must then start a new session. Rejects when the source cannot be opened.
   * While the bytes in flight are over max-in-flight-bytes the pause ends but the consumer stays stopped: the byte
   * bound starts it once they fall below it.
   */
  async resume(): Promise<boolean> {
    if (!this.paused || this.ctx.failure) return true;
    const source = this.deps.source;
    if (!this.sourceOpen) {
      await this.openSource();
    } else if (source.resumeConsuming) {
      this.paused = false;
      try {
        await this.syncConsumer();
      } catch (err) {
        this.paused = true;
        throw err;
      }
    } else {
      return false;
    }
    this.paused = false;
    this.deps.observer?.conditionChanged();
    return true;
  }

  /**
   * Brings the source's consumer in line with what holds it: it is on unless an operator paused the session or the
   * byte bound holds (./session/byte-bound.ts), and it is left alone once the session drains or ended. One source
   * call at a time, each deciding when its turn comes, so that a stop and a resume never overlap (AMQP: two resumes
   * under way would make two consumers). Rejects with what the source call rejected with.
   */
  private syncConsumer(): Promise<void> {
    const run = this.sourceCalls.then(() => this.applyConsumer());
    this.sourceCalls = run.catch(() => undefined);
    return run;
  }

  private async applyConsumer(): Promise<void> {
    const ctx = this.ctx;
    if (!this.sourceOpen || ctx.failure || ctx.draining) return;
    const source = this.deps.source;
    const wanted = !this.paused && !ctx.bytes.over;
    if (wanted === this.consuming) return;
    if (!wanted) {
      this.consuming = false;
      await source.stopConsuming();
    } else if (source.resumeConsuming) {
      await source.resumeConsuming();
      this.consuming = true;
    }
  }

  /**
   * The bytes in flight exceeded max-in-flight-bytes (`over`), or fell below its resume mark: stop or start the
   * consumer. Never resumes a source an operator paused (applyConsumer asks for both). Only sources that can resume
   * get here (see ./session/context.ts). A source call that fails ends the session: its connection is gone.
   */
  private byteBoundChanged(over: boolean): void {
    const ctx = this.ctx;
    if (ctx.failure || ctx.draining) return;
    ctx.log.debug(
      { inFlight: ctx.unsettled.size, inFlightBytes: ctx.bytes.bytes, maxInFlightBytes: ctx.bytes.max },
      over ? 'max-in-flight-bytes exceeded: consuming stopped' : 'in-flight bytes below the resume mark: consuming again',
    );
    void this.syncConsumer().catch((err: unknown) => ctx.fail(err));
  }

  /**
   * The byte bound sized a new delivery window (./session/byte-bound.ts: ctx.bytes.window). One setWindow call at a
   * time, the latest window wins: a call under way is followed by one for the window wanted when it returns, if that
   * differs.
   */
  private windowChanged(): void {
    if (!this.windowCall) this.windowCall = this.applyWindow().finally(() => (this.windowCall = undefined));
  }

  private async applyWindow(): Promise<void> {
    const ctx = this.ctx;
    const source = this.deps.source;
    while (source.setWindow && this.appliedWindow !== ctx.bytes.window && !ctx.failure && !ctx.draining) {
      const messages = ctx.bytes.window;
      try {
        await source.setWindow(messages);
      } catch (err) {
        ctx.fail(err);
        return;
      }
      ctx.log.debug({ window: messages, inFlightBytes: ctx.bytes.bytes }, 'delivery window resized for max-in-flight-bytes');
      this.appliedWindow = messages;
    }
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
      // After the source call under way, if any: a resume of the byte bound's must not outlive this stop.
      const stopped = this.sourceCalls.then(() => {
        this.consuming = false;
        return this.deps.source.stopConsuming();
      });
      this.sourceCalls = stopped.catch(() => undefined);
      await within(stopped.catch(() => undefined), SOURCE_CALL_TIMEOUT_MS);
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
    ctx.bytes.received(delivery.message.body.length);
    ctx.pending.push(job);
    ctx.work.wake();
  }

  /** The target held the message of a confirmed send already (TargetHandlers.onDuplicate): counted, and logged like a cache drop. */
  private droppedAtTarget(duplicateId: string): void {
    this.deps.metrics.duplicates.inc({ bridge: this.ctx.cfg.name, where: 'target' });
    this.ctx.log.info({ duplicateId }, 'duplicate dropped by the target: it already held a message with this ID');
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

/** Waits for `promise`, at most `ms` (a source call may hang on a dead connection; a drain must not). */
async function within(promise: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([promise, new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)))]);
  clearTimeout(timer);
}
