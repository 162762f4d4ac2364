/**
 * What the stages of one session share: its dependencies, the messages it holds, the conditions that hold the send
 * loop, the signals its loops wait on, and its end. Each stage is a module of functions over this context
 * (see ../session.ts for the map).
 */
import type { BridgeConfig } from '../../config/types.js';
import type { Logger } from '../../shared/log.js';
import type { SessionDeps } from './deps.js';
import type { Forwarding, Job, StampHold } from './job.js';
import { BridgeError, FatalBridgeError } from '../../shared/errors.js';
import { Deque } from '../../shared/deque.js';
import { Signal } from '../../shared/signal.js';
import { StampClaims } from '../stamp-claim.js';
import { ByteBound } from './byte-bound.js';
import { CacheRetry } from './cache-retry.js';
import type { CommitGroup } from './commit-group.js';
import { targetTemplate } from '../../config/target-address.js';
import type { AddressTemplate } from '../../routing/address-template.js';
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
  /** The resolved addresses of a templated target in use, bounded by max-addresses (./route.ts); undefined if fixed. */
  readonly addresses: AddressTable | undefined;

  /** Set once, by fail(): from then on nothing is acked, every loop stops and teardown runs. */
  failure: BridgeError | undefined = undefined;
  /** Messages received and not settled (acked) yet. */
  readonly unsettled = new Set<Job>();
  /** The bytes of their bodies, against max-in-flight-bytes (./byte-bound.ts). */
  readonly bytes: ByteBound;

  // The send loop (./send-loop.ts): jobs in source order, and what holds it.
  readonly pending = new Deque<Job>();
  /** Jobs that were busy and are now resolved; the loop takes them before the next pending one. */
  readonly retried: Job[] = [];
  /** Stopping: no more intake, and a partial batch goes out at once. */
  draining = false;
  /** The target blocks publishing (flow control). */
  blocked = false;

  // Sending (./send.ts, ./isolate.ts).
  /** Sends written to the target and not settled yet (a batch counts once). */
  sendsInFlight = 0;
  /** Messages refused ambiguously, resent one at a time while nothing else is in flight (see ./isolate.ts). */
  readonly suspects: Forwarding[] = [];
  isolating = false;
  /** Messages the target refused as full, sent again one at a time after a pause (see ./target-full.ts). */
  readonly held: Forwarding[] = [];
  /** When the target last started refusing as full (Date.now()); undefined while it takes messages. */
  targetFullSince: number | undefined = undefined;
  /** When the target last took everything held (Date.now()); 0 = never full. */
  targetFullEndedAt = 0;
  waitingForRoom = false;

  /** The broker's selector passed a message the bridge's filter does not select: warned once (./filter.ts). */
  filterDisagreed = false;

  /** Confirmed jobs whose IDs wait to be committed, one group per address (./settle.ts). */
  readonly commitGroups = new Map<string, CommitGroup>();

  /** Stamp records of acked messages, forgotten at the next ack barrier (./stamps.ts). */
  stampsToForget: StampHold[] = [];

  // What the session's loops wait on (each loops `while (…) await signal.wait()`); fail() wakes them all.
  /** The send loop, idle: a delivery arrived, or a parked job is ready again. */
  readonly work = new Signal();
  /** The send loop, held: the target unblocked, or isolation ended. */
  readonly sendable = new Signal();
  /** Isolation: no send is in flight any more. */
  readonly sendsIdle = new Signal();
  /** A drain: nothing is unsettled any more. */
  readonly allSettled = new Signal();
  /** A full target's pause (only ever ended early by fail()). */
  readonly roomPause = new Signal();

  constructor(
    readonly deps: SessionDeps,
    /** Called once, right after the failure is set: stops the session's timers and tears it down. */
    private readonly onFailed: (error: BridgeError) => void,
    /** Called when the bytes in flight exceed max-in-flight-bytes (true) and when they fall back below it (false). */
    onByteBound: (over: boolean) => void = () => undefined,
    /** Called with a new delivery window (messages), for a source that has setWindow. */
    onWindow: (messages: number) => void = () => undefined,
  ) {
    this.cfg = deps.bridge;
    // Only a source that can consume again on its connection is stopped at the bound; any other is bounded by its
    // prefetch alone (STOMP: see ../ports.ts resumeConsuming). Its bytes are still counted.
    const source = deps.source;
    this.bytes = new ByteBound(
      source.resumeConsuming ? deps.bridge.maxInFlightBytes : Number.POSITIVE_INFINITY,
      deps.bridge.prefetch,
      onByteBound,
      source.setWindow && source.resumeConsuming ? onWindow : undefined,
    );
    this.log = deps.log;
    this.dedupe = deps.bridge.useDuplicateDetection;
    this.template = targetTemplate(deps.bridge.target);
    this.addresses = this.template === undefined ? undefined : new AddressTable(deps.bridge.maxAddresses, deps.bridge.addressIdleTimeout);
    this.cacheRetry = new CacheRetry({
      bridge: deps.bridge.name,
      log: deps.log,
      metrics: deps.metrics,
      observer: deps.observer,
      failure: () => this.failure,
    });
    this.claims = new StampClaims({
      cache: deps.cache,
      sourceAddress: deps.source.address,
      targetAddress: deps.target.address,
      ownPrefix: `${deps.tokenPrefix}.`,
      call: (fn) => this.cacheRetry.call(fn, 'stamp-claim'),
    });
  }

  sendStarted(): void {
    this.sendsInFlight += 1;
  }

  sendSettled(): void {
    this.sendsInFlight -= 1;
    if (this.sendsInFlight === 0) this.sendsIdle.wake();
  }

  /** Ends the session (once): nothing unconfirmed is acked, and the broker redelivers it. */
  fail(err: unknown): void {
    if (this.failure) return;
    const error =
      err instanceof BridgeError
        ? err
        : new FatalBridgeError(`bridge '${this.cfg.name}' hit an unexpected error: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
    this.failure = error;
    this.work.wake();
    this.sendable.wake();
    this.sendsIdle.wake();
    this.allSettled.wake();
    this.roomPause.wake();
    this.onFailed(error);
  }
}
