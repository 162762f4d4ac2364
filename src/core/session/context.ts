/**
 * What the stages of one session share (docs/design.md §7.1): its dependencies, the messages it holds and their
 * queue to the send loop, the stamp records of acked messages, the signals its loops wait on, and its end. Each stage
 * is a module of functions over this context (see ../session.ts for the map). The collections are private: they
 * change only through the methods named for what happens to a message (admit, next/take, requeue, settle, the acked
 * stamps taken or kept), so that each has this one owner. What holds sends back belongs to the target gate
 * (./target-gate.ts), and the commit groups to ./settle.ts (./commit-group.ts), not here.
 */
import type { BridgeConfig } from '../../config/types.js';
import type { Logger } from '../../shared/log.js';
import type { SessionDeps } from './deps.js';
import type { AckedStamp, Job } from './job.js';
import { CommitGroups } from './commit-group.js';
import type { AddressTemplate, TemplateRules } from '../../routing/address-template.js';
import type { End } from '../end.js';
import { BridgeError, FatalBridgeError } from '../../shared/errors.js';
import { Deque } from '../../shared/deque.js';
import { Signal } from '../../shared/signal.js';
import { StampClaims } from '../stamp-claim.js';
import { ByteBound } from './byte-bound.js';
import { CacheRetry } from './cache-retry.js';
import { targetTemplate, templateRules } from '../../config/target-address.js';
import { AddressTable } from '../address-table.js';

export class SessionContext {
  readonly cfg: BridgeConfig;
  readonly log: Logger;
  /** use-duplicate-detection: resolve, reserve and commit IDs (else pass messages through as they are). */
  readonly dedupe: boolean;
  /** Every cache call of the session goes through this: retried while the cache is unreachable. */
  readonly cacheRetry: CacheRetry;
  readonly claims: StampClaims;
  /** The target's address template (./route.ts); undefined for a fixed target. */
  readonly template: AddressTemplate | undefined;
  /** What a value of the template may hold on this target (../../config/target-address.ts templateRules). */
  readonly templateRules: TemplateRules;
  /** The resolved addresses of a templated target in use, bounded by max-addresses (./route.ts); undefined if fixed. */
  readonly addresses: AddressTable | undefined;

  /** Messages received and not settled (acked) yet: admit() adds, settle() removes. */
  private readonly unsettled = new Set<Job>();
  /** The bytes of their bodies, against max-in-flight-bytes (./byte-bound.ts). */
  readonly bytes: ByteBound;
  /** bridge_replication_latency_seconds of this bridge, its label set bound once (./settle.ts confirm). */
  readonly observeReplication: (seconds: number) => void;

  /** The send loop's work: jobs in source order; admit() adds, take() removes. */
  private readonly pending = new Deque<Job>();
  /** Jobs coming back to the send loop (parked ones resolved, held ones the target has room for): taken first. */
  private readonly retried: Job[] = [];

  /** Confirmed jobs whose IDs wait to be committed, one group per address: ./settle.ts alone joins and takes them. */
  readonly commits = new CommitGroups();
  /** Stamp records of acked messages (settle() adds), forgotten at the next ack barrier (./stamps.ts) or at the end. */
  private readonly ackedStamps: AckedStamp[] = [];

  // What the session's loops wait on (each loops `while (…) await signal.wait()`); the end wakes them all.
  /** The send loop, idle: a delivery arrived, or a job came back. */
  readonly work = new Signal();
  /** A drain: nothing is unsettled any more. */
  readonly allSettled = new Signal();

  private ending: End | undefined = undefined;
  private drainingNow = false;

  constructor(
    readonly deps: SessionDeps,
    /** Called once, right after the end is set: wakes what waits elsewhere, stops the timers, tears the session down. */
    private readonly onEnded: (end: End) => void,
    /** Called when the bytes in flight exceed max-in-flight-bytes (true) and when they fall back below it (false). */
    onByteBound: (over: boolean) => void = () => undefined,
    /** Called with a new delivery window (messages), for a source that has setWindow. */
    onWindow: (messages: number) => void = () => undefined,
  ) {
    this.cfg = deps.bridge;
    // Only a source that can consume again on its connection is stopped at the bound; one that can size its delivery
    // window (AMQP, an exclusive consumer included, which must not stop: a standby would take the queue) is bounded by
    // the window; any other by its prefetch alone (STOMP: see ../ports.ts resumeConsuming). Its bytes are still counted.
    const source = deps.source;
    this.bytes = new ByteBound(
      source.resumeConsuming || source.setWindow ? deps.bridge.maxInFlightBytes : Number.POSITIVE_INFINITY,
      deps.bridge.prefetch,
      source.resumeConsuming ? onByteBound : () => undefined,
      source.setWindow ? onWindow : undefined,
    );
    this.log = deps.log;
    this.observeReplication = deps.metrics.replicationLatency.bind({ bridge: deps.bridge.name });
    this.dedupe = deps.bridge.useDuplicateDetection;
    this.template = targetTemplate(deps.bridge.target);
    this.templateRules = templateRules(deps.bridge);
    this.addresses = this.template === undefined ? undefined : new AddressTable(deps.bridge.maxAddresses, deps.bridge.addressIdleTimeout);
    this.cacheRetry = new CacheRetry({
      bridge: deps.bridge.name,
      log: deps.log,
      metrics: deps.metrics,
      observer: deps.observer,
      ended: () => this.ended,
    });
    this.claims = new StampClaims({
      cache: deps.cache,
      sourceAddress: deps.source.address,
      targetAddress: deps.target.address,
      ownPrefix: `${deps.tokenPrefix}.`,
      call: (fn) => this.cacheRetry.call(fn, 'stamp-claim'),
    });
  }

  /** The session has ended (drained, stopped or failed): nothing more is acked, every loop stops. */
  get ended(): boolean {
    return this.ending !== undefined;
  }

  /** How it ended; undefined while it runs. */
  get end(): End | undefined {
    return this.ending;
  }

  /** A drain has begun: no more intake, and a partial batch goes out at once. */
  get draining(): boolean {
    return this.drainingNow;
  }

  startDraining(): void {
    this.drainingNow = true;
  }

  /** Messages received and not settled yet. */
  get unsettledCount(): number {
    return this.unsettled.size;
  }

  /** The jobs received and not settled yet, to read (held.ts, stamps.ts, teardown.ts, the drain's count of parked ones). */
  unsettledJobs(): IterableIterator<Job> {
    return this.unsettled.values();
  }

  /** A delivery taken in (../session.ts accept): unsettled from now on, its bytes counted, queued for the send loop. */
  admit(job: Job): void {
    this.unsettled.add(job);
    this.bytes.received(job.delivery.message.body.length);
    this.pending.push(job);
    this.work.wake();
  }

  /** The job the send loop takes next (./send-loop.ts): one handed back first, else the next delivery. */
  next(): Job | undefined {
    return this.retried[0] ?? this.pending.peek();
  }

  /**
   * The send loop takes `job`, which next() returns now: off its queue. Any other job is a bug in the loop, and it
   * throws: taking the wrong head would act on one job twice and leave another unsent and unacked.
   */
  take(job: Job): void {
    if (this.retried[0] === job) this.retried.shift();
    else if (this.retried.length === 0 && this.pending.peek() === job) this.pending.shift();
    else throw new IllegalTake();
  }

  /**
   * The job was acked (or handed back) at the source (./settle.ts, the one caller): no longer unsettled, its bytes
   * released, its stamp record (if any) kept until an ack barrier proves the ack arrived; a drain waiting for the last
   * one is woken.
   */
  settle(job: Job): void {
    this.unsettled.delete(job);
    this.bytes.settled(job.delivery.message.body.length);
    const stamp = job.stamp;
    if (stamp !== undefined) this.ackedStamps.push({ fingerprint: stamp.fingerprint, id: stamp.id, token: job.token });
    if (this.unsettled.size === 0) this.allSettled.wake();
  }

  /** Takes every acked stamp record kept so far (./stamps.ts for an ack barrier, ./teardown.ts at the end). */
  takeAckedStamps(): AckedStamp[] {
    return this.ackedStamps.splice(0);
  }

  /** Puts back acked stamp records whose barrier failed (in any order; no spread, a list can be long). */
  keepAckedStamps(stamps: readonly AckedStamp[]): void {
    for (const s of stamps) this.ackedStamps.push(s);
  }

  /** True when acked stamp records wait for a barrier. */
  get hasAckedStamps(): boolean {
    return this.ackedStamps.length > 0;
  }

  /**
   * Hands jobs back to the send loop, ahead of new deliveries and in source order among those handed back: jobs come
   * back from several places (held, parked) in the order their outcomes arrived, not the order they were received.
   */
  requeue(jobs: readonly Job[]): void {
    if (jobs.length === 0) return;
    this.retried.push(...jobs);
    this.retried.sort(bySourceOrder);
    this.work.wake();
  }

  /** Ends the session with a failure (once): nothing unconfirmed is acked, and the broker redelivers it. */
  fail(err: unknown): void {
    if (this.ending) return;
    const error =
      err instanceof BridgeError
        ? err
        : new FatalBridgeError(`bridge '${this.cfg.name}' hit an unexpected error: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
    this.finish({ kind: 'failed', error });
  }

  /** Ends the session (once) as `end` says. */
  finish(end: End): void {
    if (this.ending) return;
    this.ending = end;
    this.work.wake();
    this.allSettled.wake();
    this.onEnded(end);
  }
}

function bySourceOrder(a: Job, b: Job): number {
  return a.delivery.seq - b.delivery.seq;
}

/** SessionContext.take of a job that is not next(): a bug in the send loop (./send-loop.ts), never retried. */
export class IllegalTake extends Error {
  constructor() {
    super('the send loop took a job that is not the next one (see SessionContext.take in src/core/session/context.ts)');
    this.name = 'IllegalTake';
  }
}
