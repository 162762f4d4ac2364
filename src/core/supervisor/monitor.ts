/**
 * The supervisor's monitor (../supervisor.ts): its probes (./probes.ts: the cache's health, the source's depth), the
 * cache horizon watch (../cache-horizon-watch.ts) and the stall watchdog (./stall-watchdog.ts), driven by one tick a
 * second while a session is open. The supervisor reads what they found and acts on a stall.
 */
import type { BridgeConfig } from '../../config/types.js';
import type { IdCache } from '../id-cache.js';
import type { Logger } from '../../shared/log.js';
import type { Metrics } from '../metrics.js';
import type { SourceEndpoint } from '../ports.js';
import type { Stall, WatchedSession } from './stall-watchdog.js';
import { CacheHorizonWatch } from '../cache-horizon-watch.js';
import { cacheAddress, targetTemplate } from '../../config/target-address.js';
import { StallWatchdog } from './stall-watchdog.js';
import { CacheProbe, DepthProbe } from './probes.js';

export interface MonitorDeps {
  cache: IdCache;
  metrics: Metrics;
  log: Logger;
  cacheSize: number | undefined;
  /** A probe failed while the cache was thought up: the bridge's lastError. */
  noteError: (message: string) => void;
  /** What the state is computed from changed. */
  changed: () => void;
}

export class Monitor {
  readonly watchdog: StallWatchdog;
  readonly cacheProbe: CacheProbe;
  readonly depth: DepthProbe;
  readonly horizon: CacheHorizonWatch;
  /**
   * A templated target has one cache per resolved address, unknown at start and unbounded in number: its horizon is
   * not read (docs/configuration.md#forwarding-rules); /bridges/{name} shows cacheHorizon null.
   */
  private readonly readsHorizon: boolean;

  constructor(bridge: BridgeConfig, deps: MonitorDeps) {
    this.watchdog = new StallWatchdog(bridge.name, bridge.stallTimeout, Date.now());
    this.cacheProbe = new CacheProbe(deps.cache, deps.log, { noteError: deps.noteError, changed: deps.changed });
    this.depth = new DepthProbe(bridge.name, deps.metrics, deps.log);
    this.readsHorizon = bridge.useDuplicateDetection && targetTemplate(bridge.target) === undefined;
    this.horizon = new CacheHorizonWatch({
      cache: deps.cache,
      address: cacheAddress(bridge.target),
      size: deps.cacheSize,
      minHorizonMs: bridge.minCacheHorizon,
      metrics: deps.metrics,
      log: deps.log,
      onChange: deps.changed,
    });
  }

  /**
   * One tick: the probes of the open session (`connected`, undefined while none is), then the watchdog. `current`
   * says after a depth read whether its session is still the open one. Returns the stall the watchdog found, if any.
   */
  tick(connected: (WatchedSession & { source: SourceEndpoint }) | undefined, current: () => unknown, now: number): Stall | undefined {
    if (connected) {
      this.cacheProbe.tick(now);
      this.depth.tick(connected.source, () => current() === connected, now);
      if (this.readsHorizon) this.horizon.tick(now);
    }
    return this.watchdog.check(connected, this.depth, this.cacheProbe.down, now) ?? undefined;
  }
}
