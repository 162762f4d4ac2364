/**
 * `broker-bridge move`: runs one bridge of a configuration with the same promise as `run` (the same supervisor, session
 * and cache), and ends by itself:
 * - `--until-empty`: once the source is empty and nothing is in flight. Where the broker tells the depth (AMQP: a passive
 *   declare; JetStream: the consumer's `num_pending`), it is asked as soon as the last message in flight is settled,
 *   not at the next tick (./move-empty.ts says how one look is made exact); STOMP (no queue depth): no delivery for
 *   `--idle` ms;
 * - `--count N`: once N messages are settled (forwarded, dropped as duplicates, dead-lettered, or not selected by the
 *   bridge's filter and skipped or dead-lettered by filter-miss). Deliveries beyond N are not taken: they stay
 *   unacknowledged and go back to the source when the move ends. What a broker-side selector keeps in the queue (an
 *   ActiveMQ Classic STOMP source with a filter) is never delivered, so never counted.
 * Then it drains and closes. Exit status: 0 done; 3 done, but messages were dead-lettered after refusals (not by
 * filter-miss: that is routing, counted as `filtered`); 1 a permanent error (the
 * configuration, a refused login); 130 interrupted by SIGINT/SIGTERM (drained: nothing lost, the rest stays in the
 * source).
 *
 * Killed outright (SIGKILL) and run again, a move finishes the job as a restarted `run` would: unacked messages come
 * back, IDs already forwarded are dropped, copies whose fate was unknown are flagged.
 */
import type { BridgeConfig, Config } from '../config/types.js';
import type { Logger } from '../shared/log.js';
import type { SourceDelivery } from '../core/message.js';
import type { SourceEndpoint, SourceHandlers } from '../core/ports.js';
import { randomBytes } from 'node:crypto';
import { createIdCache, refuseBesideOldBuilds } from '../cache/create-id-cache.js';
import { createEndpoints } from '../endpoints/create-endpoints.js';
import { describeBridge } from '../endpoints/protocols.js';
import { Connections } from '../endpoints/connections.js';
import { Metrics, type BridgeCounters } from '../core/metrics.js';
import { BridgeSupervisor, type BridgeEndpoints } from '../core/supervisor.js';
import { decorateSource } from '../core/decorate-source.js';
import type { End } from '../core/end.js';
import { Signal } from '../shared/signal.js';
import { sourceEmpty } from './move-empty.js';

export const EXIT_MOVE_DEAD_LETTERED = 3;
export const EXIT_MOVE_INTERRUPTED = 130;

export type MoveUntil = { kind: 'empty'; idleMs: number } | { kind: 'count'; count: number };

export interface MoveSummary {
  bridge: string;
  forwarded: number;
  duplicatesDropped: number;
  deadLettered: number;
  /** Not selected by the bridge's filter: skipped or dead-lettered by filter-miss (not in deadLettered). */
  filtered: number;
  /** Forwarded with the possible-duplicate flag. */
  flagged: number;
  seconds: number;
  /** Settled messages per second. */
  rate: number;
  result: 'done' | 'dead-lettered' | 'interrupted' | 'failed';
  error?: string;
}

/** What the move watches while it runs, for its end condition and its progress bar. */
export interface MoveProgress {
  /** Settled so far (forwarded + duplicates dropped + dead-lettered + filtered). */
  settled: number;
  /** Messages in the source when the move started (AMQP), or the count asked for; undefined when unknown. */
  total: number | undefined;
}

export interface MoveOptions {
  until: MoveUntil;
  log: Logger;
  /** Called every PROGRESS_EVERY_MS while the move runs. */
  onProgress?: (p: MoveProgress) => void;
  /** Resolves to stop the move early (SIGINT/SIGTERM): it drains and ends as interrupted. */
  interrupted?: Promise<void>;
}

const PROGRESS_EVERY_MS = 250;

/** What the move counts over all its sessions. */
interface MoveCounts {
  acked: number;
  /** Deliveries admitted so far: the empty check compares it before and after asking the broker. */
  delivered: number;
  lastDeliveryAt: number;
  /** --count: no more deliveries are taken once acked + in flight reach it. */
  limit: number | undefined;
  /** Set (and the signal woken) when the end may have come: nothing left in flight, or the count reached. */
  maybeDone: boolean;
  readonly wake: Signal;
}

/**
 * The source of one session: the bridge's own source (delivery window, byte bound, pause and all: decorateSource passes
 * every other member through), counting what it admits and acks for the whole move. It refuses (leaves unacked, and
 * stops the consumer) deliveries past a `--count`, so that no more than N are ever taken.
 */
class CountedSource {
  /** Admitted in this session and not acked yet. */
  inFlight = 0;
  private stopped = false;
  readonly endpoint: SourceEndpoint;

  constructor(
    private readonly inner: SourceEndpoint,
    private readonly counts: MoveCounts,
  ) {
    this.endpoint = decorateSource(inner, {
      open: (handlers) => this.open(handlers),
      ack: (delivery) => this.ack(delivery),
      // A delivery handed back to the broker (an unreadable one) has left the move as well.
      ...(inner.reject ? { reject: (delivery: SourceDelivery) => this.reject(delivery) } : {}),
    });
  }

  private open(handlers: SourceHandlers): Promise<void> {
    this.counts.lastDeliveryAt = Date.now();
    return this.inner.open({
      onLost: (e) => handlers.onLost(e),
      onDelivery: (d) => {
        this.counts.lastDeliveryAt = Date.now();
        const limit = this.counts.limit;
        if (limit !== undefined && this.counts.acked + this.inFlight >= limit) {
          // Past the count: left unacknowledged, it goes back to the queue when the move closes.
          this.stop();
          return;
        }
        this.inFlight += 1;
        this.counts.delivered += 1;
        // The Nth taken: stop the consumer now, before the acks of those in flight make the broker push more.
        if (limit !== undefined && this.counts.acked + this.inFlight >= limit) this.stop();
        handlers.onDelivery(d);
      },
    });
  }

  private stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    void this.inner.stopConsuming().catch(() => undefined);
  }

  private ack(delivery: SourceDelivery): void {
    this.inFlight -= 1;
    this.counts.acked += 1;
    this.inner.ack(delivery);
    this.settled();
  }

  private reject(delivery: SourceDelivery): void {
    this.inFlight -= 1;
    this.inner.reject?.(delivery);
    this.settled();
  }

  /** Wakes the move's end check when the end may have come, instead of leaving it to the next tick. */
  private settled(): void {
    const c = this.counts;
    if (this.inFlight === 0 || (c.limit !== undefined && c.acked >= c.limit)) {
      c.maybeDone = true;
      c.wake.wake();
    }
  }
}

export async function moveBridge(config: Config, given: BridgeConfig, o: MoveOptions): Promise<MoveSummary> {
  const started = Date.now();
  // With --count, no more than N deliveries need be in flight: fewer come back unacked (and redelivered) at the end.
  const bridge = o.until.kind === 'count' ? { ...given, prefetch: Math.min(given.prefetch, o.until.count) } : given;
  const metrics = new Metrics('move', { defaultMetrics: false });
  const instanceId = randomBytes(6).toString('hex');
  const cache = createIdCache(config.idCache, o.log.child({ component: 'id-cache' }), { owner: instanceId, addressIdleTimeout: bridge.addressIdleTimeout });
  // As `run` does: beside a process of the cache's old layout, this one would stop it at the first shared address.
  await refuseBesideOldBuilds(cache);
  const shared: MoveCounts = {
    acked: 0,
    delivered: 0,
    lastDeliveryAt: Date.now(),
    limit: o.until.kind === 'count' ? o.until.count : undefined,
    maybeDone: false,
    wake: new Signal(),
  };
  let current: CountedSource | undefined;
  // As `run` does: a consuming and a publishing connection, the target's and the dead-letter's channels on the latter.
  const connections = new Connections(o.log.child({ component: 'connections' }));
  const endpoints = (b: BridgeConfig, log: Logger): BridgeEndpoints => {
    const e = createEndpoints(b, log, connections);
    current = new CountedSource(e.source, shared);
    return { ...e, source: current.endpoint };
  };
  const supervisor = new BridgeSupervisor(bridge, {
    cache,
    log: o.log,
    metrics,
    instanceId,
    createEndpoints: endpoints,
    describe: describeBridge,
    restartDrainTimeout: config.shutdownTimeout,
    cacheSize: config.idCache.idCacheSize,
  });
  const counters = () => metrics.countersOf(bridge.name);
  let total: number | undefined = o.until.kind === 'count' ? o.until.count : undefined;
  let interrupted = false;
  let outcome: End | undefined;
  const running = supervisor.start().then((r) => (outcome = r));

  const settledNow = async (): Promise<number> => {
    const c = await counters();
    return settledOf(c);
  };

  const watch = { delivered: () => shared.delivered, inFlight: () => current?.inFlight ?? 0 };
  const finished = async (): Promise<boolean> => {
    if (o.until.kind === 'count') return shared.acked >= o.until.count;
    const source = current;
    if (source === undefined || !supervisor.connected || source.inFlight > 0) return false;
    const endpoint = source.endpoint;
    if (endpoint.depth === undefined) return Date.now() - shared.lastDeliveryAt >= o.until.idleMs;
    const answer = await sourceEmpty({ depth: () => endpoint.depth!(), ackBarrier: () => endpoint.ackBarrier() }, watch);
    if (total === undefined && answer.depth !== undefined) total = answer.depth + shared.acked;
    return answer.empty;
  };

  let ended = false;
  void running.then(() => {
    ended = true;
    shared.wake.wake();
  });
  void o.interrupted?.then(() => {
    interrupted = true;
    shared.wake.wake();
  });
  let progressAt = Date.now() + PROGRESS_EVERY_MS;
  while (!ended && !interrupted) {
    // Woken when the last message in flight settles (or the count is reached), else every tick.
    if (!shared.maybeDone) await shared.wake.wait(Math.max(1, progressAt - Date.now()));
    shared.maybeDone = false;
    if (ended || interrupted) break;
    if (Date.now() >= progressAt) {
      progressAt = Date.now() + PROGRESS_EVERY_MS;
      o.onProgress?.({ settled: await settledNow(), total });
    }
    if (await finished()) break;
  }
  if (outcome === undefined) outcome = await supervisor.stop(config.shutdownTimeout);
  await running;
  await cache.close().catch(() => undefined);

  const c = await counters();
  const settled = settledOf(c);
  o.onProgress?.({ settled, total });
  const seconds = Math.round((Date.now() - started) / 100) / 10;
  const summary: MoveSummary = {
    bridge: bridge.name,
    forwarded: c.forwarded,
    duplicatesDropped: c.duplicatesDropped,
    deadLettered: c.deadLettered,
    filtered: c.filtered,
    flagged: c.possibleDuplicates,
    seconds,
    rate: Math.round((settled / Math.max(0.1, seconds)) * 10) / 10,
    result: outcome.kind === 'failed' ? 'failed' : interrupted ? 'interrupted' : c.deadLettered > 0 ? 'dead-lettered' : 'done',
  };
  if (outcome.kind === 'failed') summary.error = outcome.error.message;
  return summary;
}

/** Every way a message is settled: what --count counts (the source's acks) and the progress shows. */
function settledOf(c: BridgeCounters): number {
  return c.forwarded + c.duplicatesDropped + c.deadLettered + c.filtered;
}

export function moveExitCode(summary: MoveSummary): number {
  switch (summary.result) {
    case 'done':
      return 0;
    case 'dead-lettered':
      return EXIT_MOVE_DEAD_LETTERED;
    case 'interrupted':
      return EXIT_MOVE_INTERRUPTED;
    case 'failed':
      return 1;
  }
}

/** The summary for a person: one line. */
export function formatSummary(s: MoveSummary): string {
  const what = s.result === 'failed' ? `failed: ${s.error ?? ''}` : s.result === 'interrupted' ? 'interrupted (drained; the rest stays in the source)' : 'done';
  return `move ${s.bridge}: ${what}; forwarded ${s.forwarded}, duplicates dropped ${s.duplicatesDropped}, dead-lettered ${s.deadLettered}, filtered ${s.filtered}, flagged ${s.flagged}; ${s.seconds} s, ${s.rate} msgs/s`;
}
