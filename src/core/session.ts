/**
 * One bridge session: a source, a target (and a dead-letter destination) connected together until something breaks
 * or the bridge is stopped. The supervisor (./supervisor.ts) builds a new session after every loss.
 *
 * Per message (docs/design.md §1): the bridge's filter (a message it does not select goes no further: skipped or
 * dead-lettered, never near the cache) → its target address → its duplicate ID (header, stable identity or stamp) →
 * reserve it for the target address → send → wait for the target's confirmation → commit the ID → ack the source.
 * Many messages are in flight at once (up to the source prefetch); they are sent in source order by one loop, and
 * settle as confirmations arrive.
 *
 * Failure handling (docs/design.md §6):
 * - the duplicate-ID cache unreachable: every cache call is retried with backoff while the session lives; messages are
 *   held (nothing is forwarded unchecked, nothing is acked), and the flow resumes by itself.
 * - a message the target refuses: the target gate does what the refusal policy says (wait for room, isolate, send
 *   again, dead-letter after max-delivery-attempts); with no dead-letter destination the bridge stops instead of
 *   dropping.
 * - a lost connection: the session ends; nothing unconfirmed is acked, so the broker redelivers it. Reservations of
 *   messages whose send outcome is unknown are released as "uncertain", so their resend is flagged a possible duplicate.
 *
 * This file is the session's life (open, pause, drain, end) and its intake; the stages a message goes through are in
 * ./session/, one module each (docs/design.md §7 says who owns what, and maps the modules):
 *   context.ts        what the stages share: dependencies, the messages unsettled, the send loop's queue, the acked
 *                     stamps, the end — each collection private behind the methods named for what they do
 *   job.ts            a message in flight, its stage, the one table of the moves between stages, its stamp and route
 *   prepare.ts        its filter, target address, duplicate ID and reservation (with filter.ts, loop-guard.ts and
 *                     route.ts; the stamps of ./stamp-claim.ts), started in a turn of the process's (./prepare-turns.ts)
 *   send-loop.ts      the ordered send loop and batching
 *   park.ts           busy IDs set aside and prepared again
 *   target-gate.ts    sending: sends in flight, flow control, the one attempt() and the one refusal dispatch (the
 *                     policy is refusal-policy.ts); its parts isolation.ts (sent again alone), full-target.ts (held,
 *                     probed, the send window) and liveness-guard.ts (a lapse of this process's liveness)
 *   dead-letter.ts    the dead-letter destination
 *   unreadable.ts     a message the source could not read whole, settled alone
 *   settle.ts         commit the ID, ack the source, count the outcome (commit-group.ts: the IDs confirmed together)
 *   byte-bound.ts     the bytes in flight against max-in-flight-bytes
 *   cache-retry.ts    the cache failing closed
 *   stamps.ts         stamp leases renewed, stamp records forgotten
 *   teardown.ts       the end: connections closed, reservations given back
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { BridgeError } from '../shared/errors.js';
import type { SourceDelivery } from './message.js';
import type { DropReason, SourceEndpoint } from './ports.js';
import type { SessionDeps } from './session/deps.js';
import type { End } from './end.js';
import type { Prepared } from './session/job.js';
import { SessionContext } from './session/context.js';
import { Job } from './session/job.js';
import { prepare } from './session/prepare.js';
import { sendLoop } from './session/send-loop.js';
import { forgetAckedStamps, renewStamps } from './session/stamps.js';
import { TargetGate } from './session/target-gate.js';
import { teardown } from './session/teardown.js';
import { heldBy, oldestOf, type Held } from './session/held.js';
import type { Tally } from './metrics.js';
import { processTurns, type PrepareShare } from './prepare-turns.js';

export { DEAD_LETTER_HEADERS } from './session/dead-letter.js';
export type { SessionDeps, SessionObserver } from './session/deps.js';

/** Also bounds how long the stamp of an acked message lingers (rule 3 of stamp-claim-1.lua): kept short. */
const ACK_BARRIER_INTERVAL_MS = 50;
/** How long a drain waits for the broker to confirm the acks written before it closes. */
const ACK_BARRIER_TIMEOUT_MS = 2000;
/** How long a drain waits for a source call under way (a pause, the byte bound) before it stops consuming. */
const SOURCE_CALL_TIMEOUT_MS = 2000;

export class BridgeSession {
  private readonly ctx: SessionContext;
  private readonly gate: TargetGate;
  private seq = 0;
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
  /** Its share of the process's turns to prepare jobs in (./prepare-turns.ts): a job is offered when received. */
  private readonly turns: PrepareShare<Job>;
  /** A job's first preparation settled: its turn comes back. */
  private readonly turnDone = (): void => this.turns.done();
  /** The bridge's received count (a plain number: the per-message path makes no labelled metric call for it). */
  private readonly tally: Tally;
  /** Epoch ms of the oldest message the session held when it ended (handed back unacked); undefined if none. */
  private leftOldest: number | undefined;
  private resolveEnded!: (end: End) => void;
  /** Resolves once, when the session has ended and its connections are closed. */
  readonly finished: Promise<End>;

  /** Builds the session; nothing is opened before open(). */
  constructor(private readonly deps: SessionDeps) {
    this.finished = new Promise((resolve) => (this.resolveEnded = resolve));
    this.ctx = new SessionContext(
      deps,
      (end) => this.ended(end),
      (over) => this.byteBoundChanged(over),
      () => this.windowChanged(),
    );
    this.gate = new TargetGate(this.ctx);
    this.tally = deps.metrics.tallyOf(deps.bridge.name);
    this.turns = (deps.turns ?? processTurns).join((job) => this.startPreparing(job));
    this.appliedWindow = this.ctx.bytes.window;
  }

  /** The operator's pause, as the supervisor set it. */
  private get pauseWanted(): boolean {
    return this.deps.pause?.paused === true;
  }

  /**
   * Opens target, dead-letter and source (in that order, so nothing is consumed before it can go somewhere). While the
   * operator's pause holds, the source is not opened (nothing is consumed) until followPause() finds it lifted.
   */
  async open(): Promise<void> {
    const { source, target, deadLetter } = this.deps;
    const ctx = this.ctx;
    try {
      await target.open({ onLost: (e) => ctx.fail(e), onBlocked: (b, reason) => this.setBlocked(b, reason), onDuplicate: (id) => this.droppedAtTarget(id) });
      if (deadLetter) await deadLetter.open({ onLost: (e) => ctx.fail(e) });
      if (!this.pauseWanted) await this.openSource();
    } catch (err) {
      await Promise.allSettled([source.close(), target.close(), deadLetter?.close()]);
      throw err;
    }
    void sendLoop(ctx, this.gate);
    this.barrierTimer = setInterval(() => void forgetAckedStamps(ctx), ACK_BARRIER_INTERVAL_MS);
    this.barrierTimer.unref();
    if (ctx.dedupe) {
      this.renewTimer = setInterval(() => void renewStamps(ctx), Math.max(50, Math.floor(this.deps.cache.lease / 3)));
      this.renewTimer.unref();
    }
  }

  private async openSource(): Promise<void> {
    await this.deps.source.open({ onDelivery: (d) => this.accept(d), onLost: (e) => this.ctx.fail(e), onDropped: (reason, count) => this.dropped(reason, count) });
    this.sourceOpen = true;
    this.consuming = true;
  }

  /** Messages received and not settled (acked) yet. */
  get inFlight(): number {
    return this.ctx.unsettledCount;
  }

  /** The bytes of their bodies (counted against max-in-flight-bytes). */
  get inFlightBytes(): number {
    return this.ctx.bytes.bytes;
  }

  /** What it holds now, read at a scrape (./session/held.ts); nothing once it has ended. */
  get held(): Held {
    return heldBy(this.ctx);
  }

  /** Epoch ms of the oldest message it handed back unacked at its end (the broker has it again); undefined if none. */
  get oldestLeftAt(): number | undefined {
    return this.leftOldest;
  }

  /** What holds the session right now, for the supervisor's state. */
  get conditions(): { paused: boolean; blocked: boolean; cacheDown: boolean; targetFullSince: number | undefined } {
    const gate = this.gate.conditions;
    return { paused: this.pauseWanted, blocked: gate.blocked, cacheDown: this.ctx.cacheRetry.down, targetFullSince: gate.fullSince };
  }

  /** The source endpoint, for its queue depth (see SourceEndpoint.depth). */
  get source(): SourceEndpoint {
    return this.deps.source;
  }

  /**
   * Brings the consumer in line with the operator's pause (deps.pause), after the supervisor changed it: paused, the
   * consumer stops and the connections stay (messages already delivered go on and settle as usual); lifted, it
   * consumes again — a session opened paused opens its source now. Resolves to false when the source cannot consume
   * again on its connection (no resumeConsuming): the caller must then start a new session. Rejects when the source
   * cannot be opened or resumed. While the bytes in flight are over max-in-flight-bytes the consumer stays stopped
   * after a lifted pause: the byte bound starts it once they fall below it.
   */
  async followPause(): Promise<boolean> {
    if (this.ctx.ended) return true;
    this.deps.observer?.conditionChanged();
    if (!this.sourceOpen) {
      if (!this.pauseWanted) await this.openSource();
      return true;
    }
    if (!this.pauseWanted && !this.consuming && !this.deps.source.resumeConsuming) return false;
    await this.syncConsumer();
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
    if (!this.sourceOpen || ctx.ended || ctx.draining) return;
    const source = this.deps.source;
    // The byte bound stops only a source that can consume again on its connection (see ./session/context.ts).
    const wanted = !this.pauseWanted && !(ctx.bytes.over && source.resumeConsuming !== undefined);
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
    if (ctx.ended || ctx.draining) return;
    ctx.log.debug(
      { inFlight: ctx.unsettledCount, inFlightBytes: ctx.bytes.bytes, maxInFlightBytes: ctx.bytes.max },
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
    while (source.setWindow && this.appliedWindow !== ctx.bytes.window && !ctx.ended && !ctx.draining) {
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
  fail(error: BridgeError): void {
    this.ctx.fail(error);
  }

  /**
   * Stops consuming, lets in-flight messages finish within `timeoutMs` (parked ones, whose ID another owner holds, are
   * handed back at once rather than waited for), then closes: the session ends `drained` when every one settled, else
   * `stopped` with the number left unacked (handed back: the broker redelivers them) — ./end.ts. A session that had
   * already ended keeps its end.
   */
  async drain(timeoutMs: number): Promise<End> {
    const ctx = this.ctx;
    if (!ctx.ended && !ctx.draining) {
      ctx.startDraining();
      // After the source call under way, if any: a resume of the byte bound's must not outlive this stop.
      const stopped = this.sourceCalls.then(() => {
        this.consuming = false;
        return this.deps.source.stopConsuming();
      });
      this.sourceCalls = stopped.catch(() => undefined);
      await within(stopped.catch(() => undefined), SOURCE_CALL_TIMEOUT_MS);
      const inFlight = ctx.unsettledCount;
      const deadline = Date.now() + timeoutMs;
      // Parked jobs (their ID held by another owner) hold nothing and send nothing: they are handed back at once
      // rather than waited for.
      while (ctx.unsettledCount > parkedCount(ctx) && !ctx.ended && Date.now() < deadline) {
        await ctx.allSettled.wait(Math.min(100, Math.max(1, deadline - Date.now())));
      }
      const parked = parkedCount(ctx);
      if (ctx.unsettledCount > parked && !ctx.ended) {
        ctx.log.warn({ unfinished: ctx.unsettledCount - parked }, 'drain timeout reached: unfinished messages stay unacked and will be redelivered');
      } else if (!ctx.ended) {
        const finished = inFlight - parked;
        ctx.log.info({ finished }, `drained: the ${finished} message(s) in flight finished`);
      }
      if (parked > 0 && !ctx.ended) {
        ctx.log.info({ handedBack: parked }, 'drain: messages waiting for another owner to finish with their duplicate ID are handed back to the source unacked');
      }
      // The acks just written may still wait in the client's buffers (amqplib queues each channel's frames apart from
      // the connection's close): a barrier makes sure the broker has them, or drained messages would come back and be
      // dropped as duplicates. Bounded: a lost connection must not hold the drain.
      if (this.sourceOpen) await Promise.race([this.deps.source.ackBarrier().catch(() => undefined), sleep(ACK_BARRIER_TIMEOUT_MS)]);
      await forgetAckedStamps(ctx);
      const unfinished = ctx.unsettledCount;
      ctx.finish(unfinished === 0 ? { kind: 'drained' } : { kind: 'stopped', unfinished });
    }
    return this.finished;
  }

  private accept(delivery: SourceDelivery): void {
    const ctx = this.ctx;
    // After the end or during a drain the message is left unacked: the broker redelivers it.
    if (ctx.ended || ctx.draining) return;
    this.tally.received += 1;
    this.seq += 1;
    const job = new Job(delivery, performance.now(), `${this.deps.tokenPrefix}.${this.seq}`);
    ctx.admit(job);
    this.turns.offer(job);
  }

  /** A job got its turn (at once, or later when one came free): its preparation starts, and the send loop may go on. */
  private startPreparing(job: Job): void {
    job.startPreparing(this.prepareJob, this.turnDone);
    this.ctx.work.wake();
  }

  /** The source dropped messages on purpose (SourceHandlers.onDropped): counted; the source logs why. */
  private dropped(reason: DropReason, count: number): void {
    // Received and settled at once, for the invariant (docs/operations.md#counters-that-add-up).
    this.tally.received += count;
    this.deps.metrics.dropped.inc({ bridge: this.ctx.cfg.name, reason }, count);
  }

  /** The target held the message of a confirmed send already (TargetHandlers.onDuplicate): counted, and logged like a cache drop. */
  private droppedAtTarget(duplicateId: string): void {
    this.deps.metrics.duplicates.inc({ bridge: this.ctx.cfg.name, where: 'target' });
    this.ctx.log.info({ duplicateId }, 'duplicate dropped by the target: it already held a message with this ID');
  }

  private setBlocked(blocked: boolean, reason?: string): void {
    if (this.gate.setBlocked(blocked, reason)) this.deps.observer?.conditionChanged();
  }

  /** The end is set and the context's loops are woken: wake the gate's, stop the timers and close. */
  private ended(end: End): void {
    // What is unsettled now stays unacked, and nothing is settled from here on (./session/settle.ts): counted once, as
    // handed back — the broker delivers it again, and it is received again.
    const left = this.ctx.unsettledCount;
    if (left > 0) {
      this.leftOldest = oldestOf(this.ctx);
      this.deps.metrics.handedBack.inc({ bridge: this.ctx.cfg.name, reason: 'session-end' }, left);
    }
    this.gate.ended();
    // Jobs still waiting for a turn never start: unacked, the broker delivers them again.
    this.turns.close();
    if (this.barrierTimer) clearInterval(this.barrierTimer);
    if (this.renewTimer) clearInterval(this.renewTimer);
    void teardown(this.ctx, (ms) => this.gate.settleInFlight(ms))
      .catch((err: unknown) => this.ctx.log.error({ err }, 'closing the session failed'))
      .then(() => this.resolveEnded(end));
  }
}

/** Jobs set aside because another owner holds their duplicate ID or stamp (./session/park.ts). */
function parkedCount(ctx: SessionContext): number {
  let n = 0;
  for (const job of ctx.unsettledJobs()) if (job.state.stage === 'busy' || job.state.stage === 'claim-busy') n += 1;
  return n;
}

/** Waits for `promise`, at most `ms` (a source call may hang on a dead connection; a drain must not). */
async function within(promise: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([promise, new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)))]);
  clearTimeout(timer);
}
