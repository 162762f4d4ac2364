/**
 * `broker-bridge replay`: sends a bridge's dead letters to its target again through the same supervisor, session and
 * cache as `run` (docs/design.md §9.4: `move` is `run` with an end condition; replay is built the same way, its source
 * being the bridge's dead-letter queue). What it sends, and what it cannot, is ./replay-selection.ts; how to use it is
 * docs/operations.md ("Replaying dead letters").
 *
 * One pass over the dead-letter queue: every delivery is looked at once. A selected one goes into the session
 * (at --rate, up to --count) as its replay copy, keeping its duplicate ID, so that the target's cache drops one that had
 * already arrived; one refused again goes back to the dead-letter queue by the session's own dead-letter path, with its
 * attempts counted. The others — not selected, not replayable (too-large), past --count, or refused again in this
 * pass — are held unacknowledged and go back to the queue when the pass ends (so their order among themselves may
 * change). The pass ends once the queue has nothing ready twice in a row (AMQP passive declare) with nothing delivered
 * in between and nothing in the session, or, where the depth cannot be asked (STOMP), after --idle ms without a
 * delivery. With --dry-run everything is held: nothing is sent, nothing acknowledged.
 *
 * Killed outright (SIGKILL): whatever was not acknowledged comes back to the dead-letter queue; a replayed copy whose
 * ID was committed at the target is dropped by the cache when replayed again; one whose send's outcome was unknown is
 * flagged, as in `run`.
 */
import { randomBytes } from 'node:crypto';
import type { BridgeConfig, Config } from '../config/types.js';
import type { Logger } from '../shared/log.js';
import type { SourceDelivery } from '../core/message.js';
import type { SourceEndpoint, SourceHandlers } from '../core/ports.js';
import type { End } from '../core/end.js';
import type { Selector } from '../routing/selector.js';
import { createIdCache, refuseBesideOldBuilds } from '../cache/create-id-cache.js';
import { createEndpoints } from '../endpoints/create-endpoints.js';
import { describeBridge } from '../endpoints/protocols.js';
import { Connections } from '../endpoints/connections.js';
import { Metrics } from '../core/metrics.js';
import { BridgeSupervisor, type BridgeEndpoints } from '../core/supervisor.js';
import { cacheAddress } from '../config/target-address.js';
import { POSSIBLE_DUPLICATE_HEADER } from '../core/duplicate-id.js';
import { openReplayOrigin, type ReplayOrigin } from './replay-origin.js';
import { REPLAYED_AT_HEADER, deadLetteredAt, reasonOf, replayCopy, verdict, type ReplaySelection } from './replay-selection.js';

export const EXIT_REPLAY_REFUSED_AGAIN = 3;
export const EXIT_REPLAY_INTERRUPTED = 130;
/** The most dead letters one pass holds unacknowledged at once (AMQP's largest prefetch). */
const HOLD_MAX = 65_535;
const TICK_MS = 250;

export interface ReplayOptions {
  selection: ReplaySelection;
  /** Replay at most this many. */
  count?: number;
  /** Messages per second handed to the session. */
  rate?: number;
  dryRun: boolean;
  /** Where the queue depth cannot be asked: the pass ends after this long without a delivery, ms. */
  idleMs: number;
  log: Logger;
  onProgress?: (p: ReplayProgress) => void;
  /** Resolves to stop early (SIGINT/SIGTERM): it drains and ends as interrupted. */
  interrupted?: Promise<void>;
}

export interface ReplayProgress {
  /** Dead letters looked at so far. */
  seen: number;
  /** Handed to the session and settled there. */
  settled: number;
  handed: number;
}

export interface ReplaySummary {
  bridge: string;
  dryRun: boolean;
  /** Selected (with --dry-run: would be replayed), by dead-letter reason. */
  byReason: Record<string, number>;
  /** Sent to the target and confirmed. */
  replayed: number;
  /** Dropped by the target's cache: they had arrived before (not sent). */
  droppedAsDelivered: number;
  /** Handed on with the possible-duplicate flag (the cache could not vouch, or the refusal was ambiguous). */
  flagged: number;
  /** Refused by the target again: back in the dead-letter destination, their attempts counted. */
  refusedAgain: number;
  /** Selected but not replayable (too-large: the body was not carried), left where they are. */
  skipped: number;
  /** Not selected, past --count, or not replayable: left in the dead-letter destination. */
  left: number;
  /** Why some were skipped, once per reason. */
  skippedWhy: string[];
  seconds: number;
  result: 'done' | 'refused-again' | 'interrupted' | 'failed';
  error?: string;
}

/** What the pass counts over all its sessions. */
interface Pass {
  readonly runStamp: string;
  seen: number;
  handed: number;
  replayCount: number;
  flagged: number;
  skipped: number;
  left: number;
  lastDeliveryAt: number;
  readonly byReason: Record<string, number>;
  readonly skippedWhy: Set<string>;
  /** Handed to the current session and not acked yet. */
  inSession: number;
}

/**
 * The dead-letter queue as the session's source: every delivery judged once; selected ones handed on as replay copies
 * (paced by --rate), the rest held unacknowledged until close. No setWindow: the held ones must not shrink the window.
 */
class ReplaySource {
  readonly endpoint: SourceEndpoint;
  private nextAt = 0;
  /** The delivery each replay copy was made from. */
  private readonly originals = new WeakMap<SourceDelivery, SourceDelivery>();
  private readonly timers = new Set<NodeJS.Timeout>();

  constructor(
    private readonly inner: SourceEndpoint,
    private readonly pass: Pass,
    private readonly o: ReplayOptions,
    private readonly idHeader: string,
    private readonly flagOf: (d: SourceDelivery) => boolean,
    private readonly ownHeaders: readonly string[],
    private readonly bridgeFilter: Selector | undefined,
  ) {
    const src = inner;
    const originals = this.originals;
    const timers = this.timers;
    this.endpoint = {
      description: src.description,
      address: src.address,
      open: (h) => this.open(h),
      ack: (d) => {
        this.pass.inSession -= 1;
        // The source knows its deliveries by identity: ack the one it handed out, not the replay copy.
        src.ack(originals.get(d) ?? d);
      },
      ackBarrier: () => src.ackBarrier(),
      stopConsuming: () => src.stopConsuming(),
      ...(src.resumeConsuming ? { resumeConsuming: () => src.resumeConsuming!() } : {}),
      ...(src.depth ? { depth: () => src.depth!() } : {}),
      get connectionName() {
        return src.connectionName;
      },
      close: () => {
        for (const t of timers) clearTimeout(t);
        timers.clear();
        return src.close();
      },
    };
  }

  private open(handlers: SourceHandlers): Promise<void> {
    this.pass.lastDeliveryAt = Date.now();
    return this.inner.open({
      onLost: (e) => handlers.onLost(e),
      onDelivery: (d) => this.judge(d, handlers),
    });
  }

  private judge(d: SourceDelivery, handlers: SourceHandlers): void {
    const pass = this.pass;
    pass.lastDeliveryAt = Date.now();
    const m = d.message;
    // Refused again in this pass (its copy carried this pass's stamp into the dead-letter queue): left for the next.
    if (m.headers[REPLAYED_AT_HEADER] === pass.runStamp) {
      pass.left += 1;
      return;
    }
    pass.seen += 1;
    const v = verdict(m, this.o.selection, this.idHeader, this.bridgeFilter);
    if (v.kind === 'leave') {
      pass.left += 1;
      return;
    }
    if (v.kind === 'skip') {
      pass.skipped += 1;
      pass.skippedWhy.add(v.why);
      return;
    }
    if (this.o.count !== undefined && pass.replayCount >= this.o.count) {
      pass.left += 1;
      return;
    }
    pass.replayCount += 1;
    const reason = reasonOf(m) || '(none)';
    pass.byReason[reason] = (pass.byReason[reason] ?? 0) + 1;
    if (this.o.dryRun) return;
    // Without a duplicate ID its copy is stamped by fingerprint, and x-bridge-replayed-at differs per pass: a redelivery
    // (an earlier pass was killed, or was a dry run) may have been forwarded by that pass under another stamp.
    const flag = this.flagOf(d) || (d.redelivered && m.headers[this.idHeader] === undefined);
    if (flag || m.headers[POSSIBLE_DUPLICATE_HEADER] !== undefined) pass.flagged += 1;
    // Handed on as a redelivery: a dead letter may have reached the target before (an ambiguous refusal), so the session
    // flags it where the cache cannot vouch for the address (a loss, or a first contact), as for any redelivery.
    const copy: SourceDelivery = { ...d, redelivered: true, message: replayCopy(m, Date.parse(pass.runStamp), flag, this.ownHeaders) };
    this.originals.set(copy, d);
    const hand = () => {
      pass.handed += 1;
      pass.inSession += 1;
      handlers.onDelivery(copy);
    };
    if (this.o.rate === undefined) return hand();
    const now = Date.now();
    this.nextAt = Math.max(now, this.nextAt + 1000 / this.o.rate);
    const wait = this.nextAt - now;
    if (wait <= 0) return hand();
    const t = setTimeout(() => {
      this.timers.delete(t);
      hand();
    }, wait);
    this.timers.add(t);
  }
}

export async function replayBridge(config: Config, given: BridgeConfig, o: ReplayOptions): Promise<ReplaySummary> {
  const started = Date.now();
  const runStamp = new Date(started).toISOString();
  const origin = await openReplayOrigin(given, runStamp, HOLD_MAX, o.log);
  try {
    return await runPass(config, given, origin, runStamp, o);
  } finally {
    await origin.close();
  }
}

async function runPass(config: Config, given: BridgeConfig, origin: ReplayOrigin, runStamp: string, o: ReplayOptions): Promise<ReplaySummary> {
  const started = Date.parse(runStamp);
  // Every dead letter may be held until the pass ends: the window is the largest prefetch, never shrunk by bytes. The
  // bridge's filter is judged by the pass itself (verdict): in the session a miss could acknowledge a dead letter away.
  const { filter: bridgeFilter, ...unfiltered } = given;
  const bridge: BridgeConfig = { ...unfiltered, source: origin.source, prefetch: HOLD_MAX, maxInFlightBytes: Number.MAX_SAFE_INTEGER };
  const metrics = new Metrics('replay', { defaultMetrics: false });
  const instanceId = randomBytes(6).toString('hex');
  const cache = createIdCache(config.idCache, o.log.child({ component: 'id-cache' }), { owner: instanceId, addressIdleTimeout: bridge.addressIdleTimeout });
  // As `run` does: beside a process of the cache's old layout, this one would stop it at the first shared address.
  await refuseBesideOldBuilds(cache);
  const pass: Pass = {
    runStamp,
    seen: 0,
    handed: 0,
    replayCount: 0,
    flagged: 0,
    skipped: 0,
    left: 0,
    lastDeliveryAt: Date.now(),
    byReason: {},
    skippedWhy: new Set(),
    inSession: 0,
  };
  const flagOf = await cacheVouching(config, bridge, cache);
  let current: ReplaySource | undefined;
  const connections = new Connections(o.log.child({ component: 'connections' }));
  const endpoints = (b: BridgeConfig, log: Logger): BridgeEndpoints => {
    const e = origin.adapt(createEndpoints(b, log, connections), log);
    current = new ReplaySource(e.source, pass, o, b.duplicateIdHeader, flagOf, origin.ownHeaders, bridgeFilter);
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
  let outcome: End | undefined;
  let interrupted = false;
  const running = supervisor.start().then((r) => (outcome = r));
  const settled = async (): Promise<number> => {
    const c = await metrics.countersOf(bridge.name);
    return c.forwarded + c.duplicatesDropped + c.deadLettered + c.filtered;
  };

  let emptySeen = 0;
  const finished = async (): Promise<boolean> => {
    const src = current;
    if (src === undefined || !supervisor.connected || pass.inSession > 0 || (!o.dryRun && pass.handed < pass.replayCount)) {
      emptySeen = 0;
      return false;
    }
    const endpoint = src.endpoint;
    if (endpoint.depth === undefined) return Date.now() - pass.lastDeliveryAt >= o.idleMs;
    const before = pass.lastDeliveryAt;
    let depth: number;
    try {
      depth = await endpoint.depth();
    } catch {
      emptySeen = 0;
      return false;
    }
    emptySeen = depth === 0 && pass.inSession === 0 && pass.lastDeliveryAt === before ? emptySeen + 1 : 0;
    return emptySeen >= 2;
  };
  const stopReason = o.interrupted?.then(() => {
    interrupted = true;
  });
  for (;;) {
    const done = await Promise.race([
      new Promise<'tick'>((r) => setTimeout(() => r('tick'), TICK_MS).unref()),
      running.then(() => 'ended' as const),
      ...(stopReason ? [stopReason.then(() => 'interrupted' as const)] : []),
    ]);
    if (done !== 'tick') break;
    o.onProgress?.({ seen: pass.seen, settled: await settled(), handed: pass.handed });
    if (await finished()) break;
  }
  if (outcome === undefined) outcome = await supervisor.stop(config.shutdownTimeout);
  await running;
  await cache.close().catch(() => undefined);

  const c = await metrics.countersOf(bridge.name);
  o.onProgress?.({ seen: pass.seen, settled: await settled(), handed: pass.handed });
  const summary: ReplaySummary = {
    bridge: given.name,
    dryRun: o.dryRun,
    byReason: pass.byReason,
    replayed: c.forwarded,
    droppedAsDelivered: c.duplicatesDropped,
    flagged: pass.flagged + c.possibleDuplicates,
    refusedAgain: c.deadLettered,
    skipped: pass.skipped,
    left: pass.left,
    skippedWhy: [...pass.skippedWhy],
    seconds: Math.round((Date.now() - started) / 100) / 10,
    result: outcome.kind === 'failed' ? 'failed' : interrupted ? 'interrupted' : c.deadLettered > 0 ? 'refused-again' : 'done',
  };
  if (outcome.kind === 'failed') summary.error = outcome.error.message;
  return summary;
}

/**
 * Whether a replayed copy goes out flagged because the target's cache cannot reach back to it: the cache is full and
 * the dead letter is older than its horizon (the oldest ID it still remembers), or older than id-cache-ttl. (A cache
 * that lost data is the session's to see: every replayed copy is handed on as a redelivery.) A templated target's
 * addresses are not known ahead: the fixed address's horizon is read.
 */
async function cacheVouching(config: Config, bridge: BridgeConfig, cache: ReturnType<typeof createIdCache>): Promise<(d: SourceDelivery) => boolean> {
  const address = cacheAddress(bridge.target);
  const horizon = await cache.horizon(address).catch(() => undefined);
  const full = horizon === undefined || horizon.ids >= config.idCache.idCacheSize;
  const reach = horizon?.oldestAgeMs ?? null;
  const ttl = config.idCache.idCacheTtl;
  return (d) => {
    const at = deadLetteredAt(d.message);
    const age = at === undefined ? Number.POSITIVE_INFINITY : Date.now() - at;
    if (ttl !== undefined && age > ttl) return true;
    return full && (reach === null || age > reach);
  };
}

/** The summary for a person: one line (and the reasons for skips). */
export function formatReplaySummary(s: ReplaySummary): string {
  const reasons = Object.entries(s.byReason).map(([r, n]) => `${r} ${n}`).join(', ') || 'none';
  if (s.dryRun) {
    const total = Object.values(s.byReason).reduce((a, b) => a + b, 0);
    return `replay ${s.bridge} (dry run, nothing changed): ${total} would be replayed (by reason: ${reasons}); skipped ${s.skipped}, left ${s.left}${skips(s)}`;
  }
  const what = s.result === 'failed' ? `failed: ${s.error ?? ''}` : s.result === 'interrupted' ? 'interrupted (drained; the rest stays in the dead-letter destination)' : 'done';
  return `replay ${s.bridge}: ${what}; replayed ${s.replayed}, dropped as already delivered ${s.droppedAsDelivered}, flagged ${s.flagged}, refused again ${s.refusedAgain}, skipped ${s.skipped}, left ${s.left} (selected by reason: ${reasons}); ${s.seconds} s${skips(s)}`;
}

function skips(s: ReplaySummary): string {
  return s.skippedWhy.length === 0 ? '' : `\n  skipped: ${s.skippedWhy.join('\n  skipped: ')}`;
}

export function replayExitCode(s: ReplaySummary): number {
  switch (s.result) {
    case 'done':
      return 0;
    case 'refused-again':
      return EXIT_REPLAY_REFUSED_AGAIN;
    case 'interrupted':
      return EXIT_REPLAY_INTERRUPTED;
    case 'failed':
      return 1;
  }
}
