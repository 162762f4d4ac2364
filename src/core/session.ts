/**
 * One bridge session: a source, a target (and a dead-letter destination) connected together until something breaks
 * or the bridge is stopped. The supervisor (./supervisor.ts) builds a new session after every loss.
 *
 * Per message: resolve the duplicate ID (header, stable identity or stamp) → reserve it for the target address →
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
 */
import type { BridgeConfig } from '../config/types.js';
import type { IdCache, ReserveResult } from './id-cache.js';
import type { Logger } from '../shared/log.js';
import type { BridgeMessage, SourceDelivery } from './message.js';
import type { SourceEndpoint, TargetEndpoint } from './ports.js';
import type { Metrics } from './metrics.js';
import { BridgeError, FatalBridgeError, MessageRejectedError, TransientError, isTransient } from '../shared/errors.js';
import { POSSIBLE_DUPLICATE_HEADER, fingerprint, newStampedId, readDuplicateId, withDuplicateId } from './duplicate-id.js';
import { Deque } from '../shared/deque.js';
import { StampClaims } from './stamp-claim.js';

/** Headers added to a dead-lettered message, saying why it is there. */
export const DEAD_LETTER_HEADERS = {
  reason: 'x-bridge-dead-letter-reason',
  detail: 'x-bridge-dead-letter-detail',
  bridge: 'x-bridge-name',
  target: 'x-bridge-original-target',
  attempts: 'x-bridge-delivery-attempts',
  time: 'x-bridge-dead-lettered-at',
} as const;

export type SessionEnd = { kind: 'stopped' } | { kind: 'failed'; error: BridgeError };

/**
 * What the supervisor hears from a session, synchronously and without awaiting: it keeps the bridge's status (state,
 * forwarded per second, last forward time) and the stall watchdog from these. Calls must not throw.
 */
export interface SessionObserver {
  /** A message was confirmed by the target and acked at the source. */
  forwarded(): void;
  /** A message was settled in any way (forwarded, dropped as a duplicate, dead-lettered): the bridge moves. */
  progressed(): void;
  /** blocked, cache-down or paused changed: read them again from the session. */
  conditionChanged(): void;
}

export interface SessionDeps {
  bridge: BridgeConfig;
  source: SourceEndpoint;
  target: TargetEndpoint;
  deadLetter?: TargetEndpoint;
  cache: IdCache;
  log: Logger;
  metrics: Metrics;
  /** Unique per process and session; prefixes every owner token. */
  tokenPrefix: string;
  observer?: SessionObserver;
}

/**
 * `busy`: another owner holds a reservation of this ID (a copy in flight). `claim-busy`: this is a redelivery whose
 * stamp may still be held by an earlier holder (usually a crashed process, until its lease runs out), so its ID is not
 * known yet (see ./stamp-claim.ts).
 */
type Prepared = 'forward' | 'duplicate' | 'busy' | 'claim-busy';

interface Job {
  delivery: SourceDelivery;
  /** performance.now() at delivery, for the forward-latency histogram. */
  receivedAt: number;
  token: string;
  id?: string;
  /** Set when the ID came from a stamp record (no header, no stable identity): the record is forgotten after the ack. */
  stampFingerprint?: string;
  /** A redelivery's claim: the cache's clock at its first busy answer (0 before), see ./stamp-claim.ts. */
  claimSince: number;
  /** A redelivery whose stamp says a handled copy of it may exist (./stamp-claim.ts): its copy carries the flag. */
  flagged: boolean;
  /** When its stamp's lease was last set (recorded, claimed or renewed), local clock: renewals skip young leases. */
  stampLeasedAt: number;
  reserved: boolean;
  outgoing?: BridgeMessage;
  attempts: number;
  /** The message was written to the target at least once: a lost confirmation means the outcome is unknown. */
  sent: boolean;
  confirmed: boolean;
  settled: boolean;
  prepared: Promise<Prepared>;
}

class SessionStopped extends BridgeError {
  readonly kind = 'fatal' as const;
  readonly retriable = false;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const CACHE_RETRY_MIN_MS = 100;
const CACHE_RETRY_MAX_MS = 2000;
const BUSY_RETRY_MS = 25;
const BUSY_RETRY_MAX_MS = 250;
const BUSY_FAST_RETRY_FOR_MS = 2000;
/** Also bounds how long the stamp of an acked message lingers (rule 3 of stamp-claim-1.lua): kept short. */
const ACK_BARRIER_INTERVAL_MS = 50;
/** How long a session may spend, after it ended, giving its reservations back. Redis may be down: bounded. */
const ABANDON_TIMEOUT_MS = 3000;
/** How long a drain waits for the broker to confirm the acks written before it closes. */
const ACK_BARRIER_TIMEOUT_MS = 2000;

export class BridgeSession {
  private readonly cfg: BridgeConfig;
  private readonly log: Logger;
  private readonly pending = new Deque<Job>();
  /** Jobs that were busy and are now resolved; the loop takes them before the next pending one. */
  private readonly retried: Job[] = [];
  private readonly unsettled = new Set<Job>();
  private seq = 0;
  private failure?: BridgeError;
  private draining = false;
  private blocked = false;
  private cacheDown = false;
  private paused = false;
  /** False while a session opened paused has not opened its source yet (see open()). */
  private sourceOpen = false;
  private wakeLoop?: () => void;
  private wakeDrain?: () => void;
  private unblock?: () => void;
  private stampsToForget: { fingerprint: string; id: string }[] = [];
  /** Sends written to the target and not settled yet (a batch counts once). */
  private sendsInFlight = 0;
  private onSendsIdle?: () => void;
  /** Messages refused ambiguously, resent one at a time while nothing else is in flight (see isolate()). */
  private readonly suspects: Job[] = [];
  private isolating = false;
  private resumeAfterIsolation?: () => void;
  private barrierTimer?: NodeJS.Timeout;
  private renewTimer?: NodeJS.Timeout;
  private readonly claims: StampClaims;
  private resolveEnded!: (end: SessionEnd) => void;
  /** Resolves once, when the session has ended and its connections are closed. */
  readonly finished: Promise<SessionEnd>;

  constructor(private readonly deps: SessionDeps) {
    this.cfg = deps.bridge;
    this.log = deps.log;
    this.finished = new Promise((resolve) => (this.resolveEnded = resolve));
    this.claims = new StampClaims({
      cache: deps.cache,
      sourceAddress: deps.source.address,
      targetAddress: deps.target.address,
      ownPrefix: `${deps.tokenPrefix}.`,
      call: (fn) => this.cacheCall(fn, 'stamp-claim'),
    });
  }

  private get dedupe(): boolean {
    return this.cfg.useDuplicateDetection;
  }

  /**
   * Opens target, dead-letter and source (in that order, so nothing is consumed before it can go somewhere).
   * `paused`: the source is not opened (nothing is consumed) until resume().
   */
  async open(options: { paused?: boolean } = {}): Promise<void> {
    const { source, target, deadLetter } = this.deps;
    try {
      await target.open({ onLost: (e) => this.fail(e), onBlocked: (b, reason) => this.setBlocked(b, reason) });
      if (deadLetter) await deadLetter.open({ onLost: (e) => this.fail(e) });
      if (options.paused) {
        this.paused = true;
      } else {
        await this.openSource();
      }
    } catch (err) {
      await Promise.allSettled([source.close(), target.close(), deadLetter?.close()]);
      throw err;
    }
    void this.forwardLoop();
    this.barrierTimer = setInterval(() => void this.forgetAckedStamps(), ACK_BARRIER_INTERVAL_MS);
    this.barrierTimer.unref();
    if (this.dedupe) {
      this.renewTimer = setInterval(() => void this.renewStamps(), Math.max(50, Math.floor(this.deps.cache.lease / 3)));
      this.renewTimer.unref();
    }
  }

  private async openSource(): Promise<void> {
    await this.deps.source.open({ onDelivery: (d) => this.accept(d), onLost: (e) => this.fail(e) });
    this.sourceOpen = true;
  }

  /** Messages received and not settled (acked) yet. */
  get inFlight(): number {
    return this.unsettled.size;
  }

  /** What holds the session right now, for the supervisor's state. */
  get conditions(): { paused: boolean; blocked: boolean; cacheDown: boolean } {
    return { paused: this.paused, blocked: this.blocked, cacheDown: this.cacheDown };
  }

  /** The source endpoint, for its queue depth (see SourceEndpoint.depth). */
  get source(): SourceEndpoint {
    return this.deps.source;
  }

  /** Stops consuming and keeps the connections; messages already delivered go on and settle as usual. */
  async pause(): Promise<void> {
    if (this.paused || this.failure) return;
    this.paused = true;
    this.deps.observer?.conditionChanged();
    if (this.sourceOpen) await this.deps.source.stopConsuming();
  }

  /**
   * Consumes again after pause(). Resolves to false when the source cannot resume on its connection
   * (no resumeConsuming): the caller must then start a new session. Rejects when the source cannot be opened.
   */
  async resume(): Promise<boolean> {
    if (!this.paused || this.failure) return true;
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
    this.fail(error);
  }

  /** Stops consuming, lets in-flight messages finish within `timeoutMs`, then closes. Unfinished ones stay unacked. */
  async drain(timeoutMs: number): Promise<SessionEnd> {
    if (!this.failure) {
      this.draining = true;
      await this.deps.source.stopConsuming().catch(() => undefined);
      const deadline = Date.now() + timeoutMs;
      while (this.unsettled.size > 0 && !this.failure && Date.now() < deadline) {
        await new Promise<void>((r) => {
          this.wakeDrain = r;
          setTimeout(r, Math.min(100, Math.max(1, deadline - Date.now())));
        });
      }
      if (this.unsettled.size > 0 && !this.failure) {
        this.log.warn({ unfinished: this.unsettled.size }, 'drain timeout reached: unfinished messages stay unacked and will be redelivered');
      }
      // The acks just written may still wait in the client's buffers (amqplib queues each channel's frames apart from
      // the connection's close): a barrier makes sure the broker has them, or drained messages would come back and be
      // dropped as duplicates. Bounded: a lost connection must not hold the drain.
      if (this.sourceOpen) await Promise.race([this.deps.source.ackBarrier().catch(() => undefined), sleep(ACK_BARRIER_TIMEOUT_MS)]);
      await this.forgetAckedStamps();
      this.fail(new SessionStopped('stopped'));
    }
    return this.finished;
  }

  // ---- intake ------------------------------------------------------------------------------------------------

  private accept(delivery: SourceDelivery): void {
    // After a failure or during a drain the message is left unacked: the broker redelivers it.
    if (this.failure || this.draining) return;
    this.seq += 1;
    const job: Job = {
      delivery,
      receivedAt: performance.now(),
      token: `${this.deps.tokenPrefix}.${this.seq}`,
      reserved: false,
      claimSince: 0,
      flagged: false,
      stampLeasedAt: 0,
      attempts: 0,
      sent: false,
      confirmed: false,
      settled: false,
      prepared: Promise.resolve('busy'),
    };
    job.prepared = this.prepare(job);
    // The loop awaits `prepared` in order; an early rejection must not surface as unhandled in between.
    job.prepared.catch(() => undefined);
    this.unsettled.add(job);
    this.pending.push(job);
    this.wakeLoop?.();
  }

  /** Resolves the duplicate ID and reserves it. Never forwards anything. */
  private async prepare(job: Job): Promise<Prepared> {
    const msg = job.delivery.message;
    if (!this.dedupe) {
      job.outgoing = msg;
      return 'forward';
    }
    const { cache, source, target } = this.deps;
    if (job.id === undefined) {
      const id = readDuplicateId(msg, this.cfg.duplicateIdHeader) ?? job.delivery.stableId;
      if (id !== undefined) {
        job.id = id;
      } else {
        const fp = fingerprint(msg);
        if (job.delivery.redelivered) {
          const claim = await this.claims.claim(fp, job.token, job.claimSince);
          if (claim.status === 'busy') {
            job.claimSince = claim.since;
            return 'claim-busy';
          }
          // A new stamp for a redelivery whose stamp records may have been lost: its first delivery may have been
          // forwarded under an ID no record remembers now.
          job.flagged = claim.possibleDuplicate || (claim.status === 'none' && !cache.vouchesFor(source.address));
          if (claim.status === 'claimed') {
            job.id = claim.id;
            job.stampFingerprint = fp;
            job.stampLeasedAt = Date.now();
            if (this.failure) {
              void cache.releaseStamp(source.address, fp, claim.id, job.token).catch(() => undefined);
              throw this.failure;
            }
            // The fingerprint's only stamp, of a message forwarded and committed: this is that message again.
            if (claim.done) return 'duplicate';
          }
        }
        if (job.id === undefined) {
          const stamped = newStampedId();
          const leasedAt = Date.now();
          await this.cacheCall(() => cache.recordStamp(source.address, fp, stamped, job.token, job.flagged), 'stamp-record');
          job.id = stamped;
          job.stampFingerprint = fp;
          job.stampLeasedAt = leasedAt;
          if (this.failure) {
            void cache.releaseStamp(source.address, fp, stamped, job.token).catch(() => undefined);
            throw this.failure;
          }
        }
      }
    }
    const id = job.id;
    const result: ReserveResult = await this.cacheCall(() => cache.reserve(target.address, id, job.token), 'reserve');
    if (this.failure) {
      // The session ended while the reservation was on its way: teardown has already given back what it knew of.
      if (result.status === 'reserved') void cache.release(target.address, id, job.token, false).catch(() => undefined);
      if (job.stampFingerprint !== undefined) void cache.releaseStamp(source.address, job.stampFingerprint, id, job.token).catch(() => undefined);
      throw this.failure;
    }
    if (result.status === 'busy') return 'busy';
    if (result.status === 'duplicate') return 'duplicate';
    job.reserved = true;
    // A redelivery the cache lets through while it cannot vouch for the address: the copy forwarded before a loss is
    // forgotten, so this one may be a second.
    const possibleDuplicate =
      result.possibleDuplicate || job.flagged || (job.delivery.redelivered && !cache.vouchesFor(target.address));
    job.outgoing = withDuplicateId(msg, this.cfg.duplicateIdHeader, id, possibleDuplicate);
    if (possibleDuplicate) this.deps.metrics.possibleDuplicates.inc({ bridge: this.cfg.name });
    return 'forward';
  }

  // ---- the ordered send loop -----------------------------------------------------------------------------------

  private async forwardLoop(): Promise<void> {
    const batchSize = this.cfg.maxBatchSize;
    let batch: Job[] = [];
    let batchStarted = 0;
    try {
      while (!this.failure) {
        const job = this.retried[0] ?? this.pending.peek();
        if (!job) {
          if (batch.length > 0) {
            const waited = Date.now() - batchStarted;
            // A full prefetch window brings no new deliveries: waiting would only add latency.
            if (waited >= this.cfg.maxBatchTime || this.unsettled.size >= this.cfg.prefetch || this.draining) {
              await this.untilSendable();
              if (this.failure) break;
              this.sendBatch(batch);
              batch = [];
              continue;
            }
            await this.waitForWork(this.cfg.maxBatchTime - waited);
          } else {
            await this.waitForWork();
          }
          continue;
        }
        const prepared = await job.prepared;
        if (this.failure) break;
        this.takeNext(job);
        if (prepared === 'busy' || prepared === 'claim-busy') {
          // Another owner holds this ID right now (a copy in flight here or in a replica), or a stamp this redelivery
          // may stand for (see ./stamp-claim.ts). Waiting in line could deadlock two replicas whose later messages
          // hold what the other waits for, so set it aside and go on.
          this.park(job, Date.now());
          continue;
        }
        if (prepared === 'duplicate') {
          this.dropDuplicate(job);
          continue;
        }
        await this.untilSendable();
        if (this.failure) break;
        if (batchSize > 1) {
          if (batch.length === 0) batchStarted = Date.now();
          batch.push(job);
          if (batch.length >= batchSize) {
            this.sendBatch(batch);
            batch = [];
          }
        } else {
          this.sendOne(job);
        }
      }
    } catch (err) {
      this.fail(err);
    }
  }

  /** Waits while the target blocks publishing (flow control) or suspects are being resent one at a time. */
  private async untilSendable(): Promise<void> {
    while (!this.failure && (this.blocked || this.isolating)) {
      await new Promise<void>((resolve) => {
        if (this.blocked) this.unblock = resolve;
        else this.resumeAfterIsolation = resolve;
      });
    }
  }

  private takeNext(job: Job): void {
    if (this.retried[0] === job) this.retried.shift();
    else this.pending.shift();
  }

  /**
   * Retries a busy job's reservation until it resolves, then hands it back to the loop. Retries are quick at first:
   * the holder usually commits within milliseconds, and the ID must be seen as recorded before the circular cache
   * (moving on with the stream) evicts it. A holder still there after a while is most likely a crashed owner whose
   * lease must run out; then retry slowly.
   */
  private park(job: Job, since: number): void {
    const delay = Date.now() - since < BUSY_FAST_RETRY_FOR_MS ? BUSY_RETRY_MS : BUSY_RETRY_MAX_MS;
    setTimeout(() => {
      if (this.failure) return;
      job.prepared = this.prepare(job);
      job.prepared.then(
        (result) => {
          if (this.failure) return;
          if (result === 'busy' || result === 'claim-busy') {
            this.park(job, since);
          } else {
            this.retried.push(job);
            this.wakeLoop?.();
          }
        },
        (err: unknown) => this.fail(err),
      );
    }, delay);
  }

  private waitForWork(timeoutMs?: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const timer = timeoutMs !== undefined ? setTimeout(resolve, Math.max(1, timeoutMs)) : undefined;
      this.wakeLoop = () => {
        if (timer) clearTimeout(timer);
        this.wakeLoop = undefined;
        resolve();
      };
    });
  }

  private setBlocked(blocked: boolean, reason?: string): void {
    if (blocked === this.blocked) return;
    this.blocked = blocked;
    if (blocked) {
      this.log.warn({ reason }, 'target broker blocked publishing (flow control): holding messages');
    } else {
      this.log.info('target broker unblocked publishing: resuming');
      this.unblock?.();
    }
    this.deps.observer?.conditionChanged();
  }

  private sendOne(job: Job): void {
    const message = job.outgoing as BridgeMessage;
    job.sent = true;
    this.sendStarted();
    this.deps.target.send(message).then(
      () => {
        this.sendSettled();
        this.onConfirmed([job]);
      },
      (err: unknown) => {
        this.sendSettled();
        if (err instanceof TransientError && !err.outcomeUnknown) job.sent = false;
        this.onSendFailed(job, err);
      },
    );
  }

  private sendStarted(): void {
    this.sendsInFlight += 1;
  }

  private sendSettled(): void {
    this.sendsInFlight -= 1;
    if (this.sendsInFlight === 0) this.onSendsIdle?.();
  }

  private sendBatch(jobs: Job[]): void {
    const target = this.deps.target;
    if (!target.sendBatch || jobs.length === 1) {
      for (const job of jobs) this.sendOne(job);
      return;
    }
    for (const job of jobs) job.sent = true;
    this.sendStarted();
    target.sendBatch(jobs.map((j) => j.outgoing as BridgeMessage)).then(
      () => {
        this.sendSettled();
        this.onConfirmed(jobs);
      },
      (err: unknown) => {
        this.sendSettled();
        // The target knows nothing of the batch was committed: its resend need not be flagged.
        if (err instanceof TransientError && !err.outcomeUnknown) for (const job of jobs) job.sent = false;
        if (this.failure) return;
        if (err instanceof MessageRejectedError) {
          // The transaction as a whole was refused; we cannot tell which message caused it. Nothing of it was
          // delivered, so send them one by one: the culprit is counted and dead-lettered, the rest go through.
          this.log.warn({ err, size: jobs.length }, 'target refused a batch: sending its messages one by one');
          for (const job of jobs) this.sendOne(job);
        } else {
          this.fail(err);
        }
      },
    );
  }

  // ---- settling ----------------------------------------------------------------------------------------------

  private onConfirmed(jobs: Job[]): void {
    const now = performance.now();
    for (const job of jobs) {
      job.confirmed = true;
      this.observeLatency(job, now);
    }
    if (this.failure) return;
    for (const job of jobs) {
      void this.commitAndAck(job).catch((err: unknown) => this.fail(err));
    }
  }

  private observeLatency(job: Job, now: number): void {
    this.deps.metrics.forwardLatency.observe({ bridge: this.cfg.name }, (now - job.receivedAt) / 1000);
  }

  private async commitAndAck(job: Job): Promise<void> {
    if (this.dedupe && job.reserved && job.id !== undefined) {
      const id = job.id;
      await this.cacheCall(() => this.deps.cache.commit(this.deps.target.address, id, job.token), 'commit');
    }
    this.deps.metrics.forwarded.inc({ bridge: this.cfg.name });
    this.deps.observer?.forwarded();
    this.settle(job);
  }

  private dropDuplicate(job: Job): void {
    this.deps.metrics.duplicates.inc({ bridge: this.cfg.name });
    this.log.info({ duplicateId: job.id, redelivered: job.delivery.redelivered }, 'duplicate dropped: its ID is already recorded for the target address');
    this.settle(job);
  }

  /** Acks the source; the job is done. */
  private settle(job: Job): void {
    if (job.settled || this.failure) return;
    job.settled = true;
    this.deps.source.ack(job.delivery);
    this.unsettled.delete(job);
    this.deps.observer?.progressed();
    if (job.stampFingerprint !== undefined && job.id !== undefined) {
      this.stampsToForget.push({ fingerprint: job.stampFingerprint, id: job.id });
    }
    if (this.unsettled.size === 0) this.wakeDrain?.();
  }

  private onSendFailed(job: Job, err: unknown): void {
    if (this.failure) return;
    if (!(err instanceof MessageRejectedError)) {
      this.fail(err);
      return;
    }
    if (err.ambiguous) {
      // Not proven guilty: no attempt is counted. It may have reached the target, so its resend is flagged.
      job.outgoing = withPossibleDuplicateFlag(job.outgoing as BridgeMessage);
      this.suspects.push(job);
      void this.isolate().catch((e: unknown) => this.fail(e));
      return;
    }
    job.attempts += 1;
    this.deps.metrics.rejections.inc({ bridge: this.cfg.name, reason: err.reason });
    if (job.attempts < this.cfg.maxDeliveryAttempts) {
      this.log.warn({ duplicateId: job.id, attempt: job.attempts, reason: err.reason, err }, 'target refused a message: sending it again');
      if (this.isolating) this.suspects.push(job);
      else this.sendOne(job);
      return;
    }
    void this.deadLetterJob(job, err).catch((e: unknown) => this.fail(e));
  }

  /**
   * Resends ambiguously refused messages one at a time, with nothing else in flight on the target, so that a refusal
   * now names its message: the culprit is counted and dead-lettered, the innocent go through. The send loop waits
   * meanwhile (order is kept for everything but these messages).
   */
  private async isolate(): Promise<void> {
    if (this.isolating) return;
    this.isolating = true;
    this.log.warn({ suspects: this.suspects.length }, 'target refused one of several messages without saying which: resending them one at a time');
    try {
      while (this.suspects.length > 0 && !this.failure) {
        while (this.sendsInFlight > 0 && !this.failure) await new Promise<void>((r) => (this.onSendsIdle = r));
        const job = this.suspects.shift() as Job;
        await this.sendAlone(job);
      }
    } finally {
      this.isolating = false;
      this.resumeAfterIsolation?.();
    }
  }

  private async sendAlone(job: Job): Promise<void> {
    for (;;) {
      if (this.failure) return;
      this.sendStarted();
      try {
        await this.deps.target.send(job.outgoing as BridgeMessage);
      } catch (err) {
        this.sendSettled();
        if (!(err instanceof MessageRejectedError)) throw err;
        job.attempts += 1;
        this.deps.metrics.rejections.inc({ bridge: this.cfg.name, reason: err.reason });
        if (job.attempts < this.cfg.maxDeliveryAttempts) {
          this.log.warn({ duplicateId: job.id, attempt: job.attempts, reason: err.reason, err }, 'target refused a message: sending it again');
          continue;
        }
        await this.deadLetterJob(job, err);
        return;
      }
      this.sendSettled();
      job.confirmed = true;
      this.observeLatency(job, performance.now());
      await this.commitAndAck(job);
      return;
    }
  }

  private async deadLetterJob(job: Job, err: MessageRejectedError): Promise<void> {
    const { deadLetter, target } = this.deps;
    const what = `bridge '${this.cfg.name}': the target ${target.description} refused a message${job.id ? ` (duplicate ID ${job.id})` : ''} ${job.attempts} times (${err.reason}: ${err.message})`;
    if (!deadLetter) {
      throw new FatalBridgeError(`${what}, and no dead-letter destination is configured: stopping the bridge instead of dropping the message`);
    }
    const original = job.outgoing ?? job.delivery.message;
    const message: BridgeMessage = {
      ...original,
      headers: {
        ...original.headers,
        [DEAD_LETTER_HEADERS.reason]: err.reason,
        [DEAD_LETTER_HEADERS.detail]: err.message,
        [DEAD_LETTER_HEADERS.bridge]: this.cfg.name,
        [DEAD_LETTER_HEADERS.target]: target.description,
        [DEAD_LETTER_HEADERS.attempts]: job.attempts,
        [DEAD_LETTER_HEADERS.time]: new Date().toISOString(),
      },
    };
    try {
      await deadLetter.send(message);
    } catch (dlErr) {
      if (dlErr instanceof MessageRejectedError) {
        throw new FatalBridgeError(`${what}, and the dead-letter destination ${deadLetter.description} refused it too (${dlErr.message}): stopping the bridge instead of dropping the message`, { cause: dlErr });
      }
      throw dlErr;
    }
    // The ID never reached the target: give it back so that a later, fixed re-send of it can go through.
    if (this.dedupe && job.reserved && job.id !== undefined) {
      const id = job.id;
      await this.cacheCall(() => this.deps.cache.release(target.address, id, job.token, false), 'release');
      job.reserved = false;
    }
    // Handled, though its ID is not recorded at the target: a redelivery that takes this stamp must be dropped.
    if (job.stampFingerprint !== undefined && job.id !== undefined) {
      const fp = job.stampFingerprint;
      const id = job.id;
      await this.cacheCall(() => this.deps.cache.markStampDone(this.deps.source.address, fp, id, job.token), 'stamp-done');
    }
    this.deps.metrics.deadLettered.inc({ bridge: this.cfg.name, reason: err.reason });
    this.log.warn({ duplicateId: job.id, reason: err.reason, deadLetter: deadLetter.description }, 'message moved to the dead-letter destination');
    this.settle(job);
  }

  // ---- the cache, failing closed -----------------------------------------------------------------------------

  /** Runs a cache call, retrying while the cache is unreachable and the session lives. Logs once per state change. */
  private async cacheCall<T>(call: () => Promise<T>, op: string): Promise<T> {
    let delay = CACHE_RETRY_MIN_MS;
    const bridge = this.cfg.name;
    for (;;) {
      if (this.failure) throw this.failure;
      const started = performance.now();
      try {
        const result = await call();
        this.deps.metrics.cacheLatency.observe({ bridge, op, outcome: 'ok' }, (performance.now() - started) / 1000);
        if (this.cacheDown) {
          this.cacheDown = false;
          this.log.info('duplicate-ID cache reachable again: resuming');
          this.deps.observer?.conditionChanged();
        }
        return result;
      } catch (err) {
        this.deps.metrics.cacheLatency.observe({ bridge, op, outcome: 'error' }, (performance.now() - started) / 1000);
        if (!isTransient(err)) throw err;
        if (!this.cacheDown) {
          this.cacheDown = true;
          this.log.warn({ err }, 'duplicate-ID cache unreachable: holding messages (nothing is forwarded unchecked) until it is back');
          this.deps.observer?.conditionChanged();
        }
        await sleep(delay);
        delay = Math.min(delay * 2, CACHE_RETRY_MAX_MS);
      }
    }
  }

  /**
   * Stamp records are forgotten only once the acks of their messages provably reached the broker; forgetting earlier
   * would let a redelivery (of an ack lost in a crash) get a new ID.
   */
  private async forgetAckedStamps(): Promise<void> {
    if (this.stampsToForget.length === 0) return;
    const batch = this.stampsToForget;
    this.stampsToForget = [];
    try {
      await this.deps.source.ackBarrier();
      const { cache, source } = this.deps;
      await Promise.all(batch.map((s) => cache.forgetStamp(source.address, s.fingerprint, s.id)));
    } catch (err) {
      // Left behind, the records expire by their TTL; a redelivery of one of these messages is a duplicate anyway.
      this.log.debug({ err, count: batch.length }, 'could not forget stamp records');
    }
  }

  /**
   * Keeps the stamps of unsettled messages leased, so that a redelivery elsewhere never takes the stamp of a message
   * this session still works on (see ./stamp-claim.ts). A stamp taken over anyway (the cache was unreachable for most
   * of a lease) is a stamp two messages may now share: the session ends, and the broker redelivers what it held.
   */
  private async renewStamps(): Promise<void> {
    const started = Date.now();
    // Only leases at least a third old: a younger one still has two thirds left when the next round comes.
    const due = started - Math.floor(this.deps.cache.lease / 3);
    const byFingerprint = new Map<string, Job[]>();
    for (const job of this.unsettled) {
      if (job.stampFingerprint === undefined || job.id === undefined || job.settled || job.stampLeasedAt > due) continue;
      const list = byFingerprint.get(job.stampFingerprint);
      if (list) list.push(job);
      else byFingerprint.set(job.stampFingerprint, [job]);
    }
    const { cache, source } = this.deps;
    for (const [fp, jobs] of byFingerprint) {
      if (this.failure) return;
      let lost: string[];
      try {
        lost = await cache.renewStamps(source.address, fp, jobs.map((j) => ({ id: j.id as string, token: j.token })));
      } catch (err) {
        // Unreachable: claims elsewhere wait for the cache as well; the next round tries again.
        this.log.debug({ err }, 'could not renew stamp leases');
        return;
      }
      const gone = new Set(lost);
      for (const j of jobs) if (!gone.has(j.id as string)) j.stampLeasedAt = started;
      const taken = jobs.filter((j) => !j.settled && gone.has(j.id as string));
      if (taken.length > 0) {
        this.fail(
          new TransientError(
            `bridge '${this.cfg.name}': ${taken.length} stamp(s) of messages in flight were taken over after their lease ran out (the duplicate-ID cache was unreachable too long); reconnecting so that the broker redelivers them`,
          ),
        );
        return;
      }
    }
  }

  // ---- the end -----------------------------------------------------------------------------------------------

  private fail(err: unknown): void {
    if (this.failure) return;
    const error =
      err instanceof BridgeError
        ? err
        : new FatalBridgeError(`bridge '${this.cfg.name}' hit an unexpected error: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
    this.failure = error;
    this.wakeLoop?.();
    this.unblock?.();
    this.resumeAfterIsolation?.();
    this.onSendsIdle?.();
    this.wakeDrain?.();
    if (this.barrierTimer) clearInterval(this.barrierTimer);
    if (this.renewTimer) clearInterval(this.renewTimer);
    void this.teardown(error);
  }

  private async teardown(error: BridgeError): Promise<void> {
    const { source, target, deadLetter } = this.deps;
    // Source first: from here on nothing more is acked, and the broker takes back every unacked message.
    await source.close();
    await Promise.allSettled([target.close(), deadLetter?.close()]);
    const abandoned = [...this.unsettled];
    if (abandoned.length > 0 && this.dedupe) {
      await Promise.race([
        Promise.allSettled(abandoned.map((job) => this.abandon(job))),
        sleep(ABANDON_TIMEOUT_MS),
      ]);
    }
    this.resolveEnded(error instanceof SessionStopped ? { kind: 'stopped' } : { kind: 'failed', error });
  }

  /** Gives back what an unfinished message held, so that its redelivery need not wait for a lease to expire. */
  private async abandon(job: Job): Promise<void> {
    const { cache, source, target } = this.deps;
    if (job.reserved && job.id !== undefined) {
      if (job.confirmed) await cache.commit(target.address, job.id, job.token);
      else await cache.release(target.address, job.id, job.token, job.sent);
    }
    if (job.stampFingerprint !== undefined && job.id !== undefined && !job.settled) {
      await cache.releaseStamp(source.address, job.stampFingerprint, job.id, job.token);
    }
  }
}

function withPossibleDuplicateFlag(message: BridgeMessage): BridgeMessage {
  return { ...message, headers: { ...message.headers, [POSSIBLE_DUPLICATE_HEADER]: true } };
}
