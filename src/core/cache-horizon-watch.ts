/**
 * The duplicate-ID cache's horizon for one bridge's target address (how many IDs it holds, how old the oldest is),
 * read every HORIZON_EVERY_MS through IdCache.horizon — never per message — into the gauges
 * bridge_id_cache_horizon_seconds{address} and bridge_id_cache_ids{address}, and into /bridges/{name}. With
 * min-cache-horizon set, a cache that is full (id-cache-size IDs) and reaches back less than that is `short`: one
 * warning per crossing, and the supervisor shows the state cache-horizon-short (still ready), because a publisher's
 * re-send older than the horizon would pass as new. A cache that is not full yet has evicted nothing: not short.
 */
import type { IdCache } from './id-cache.js';
import type { Logger } from '../shared/log.js';
import type { Metrics } from './metrics.js';
import { SharedRead } from './shared-read.js';

export const HORIZON_EVERY_MS = 5000;

/** The bridges whose target is one address of one cache share its horizon read (./shared-read.ts). */
const reads = new SharedRead<Awaited<ReturnType<IdCache['horizon']>>>(HORIZON_EVERY_MS / 2);

export interface HorizonReading {
  address: string;
  ids: number;
  /** null while the cache holds no ID. */
  oldestAgeSeconds: number | null;
  /** When it was read (ISO 8601). */
  at: string;
}

export class CacheHorizonWatch {
  private last = 0;
  private reading = false;
  private latest: HorizonReading | undefined;
  private isShort = false;

  constructor(
    private readonly o: {
      cache: IdCache;
      address: string;
      /** id-cache-size; undefined = unknown (then never short). */
      size: number | undefined;
      minHorizonMs: number;
      metrics: Metrics;
      log: Logger;
      /** The short state changed. */
      onChange: () => void;
    },
  ) {}

  get value(): HorizonReading | null {
    return this.latest ?? null;
  }

  get short(): boolean {
    return this.isShort;
  }

  /** Called by the supervisor's tick; reads at most every HORIZON_EVERY_MS, one read at a time. */
  tick(now: number): void {
    if (this.reading || now - this.last < HORIZON_EVERY_MS) return;
    this.last = now;
    this.reading = true;
    void this.read(now).finally(() => {
      this.reading = false;
    });
  }

  private async read(now: number): Promise<void> {
    const { cache, address, metrics, log } = this.o;
    let h: Awaited<ReturnType<IdCache['horizon']>>;
    try {
      h = await reads.get(cache, address, now, () => cache.horizon(address));
    } catch (err) {
      // An unreachable cache is the cache probe's to report; the last reading stays.
      log.debug({ err }, 'cache horizon not read');
      return;
    }
    const ageSeconds = h.oldestAgeMs === null ? null : h.oldestAgeMs / 1000;
    this.latest = { address, ids: h.ids, oldestAgeSeconds: ageSeconds === null ? null : Math.round(ageSeconds * 10) / 10, at: new Date().toISOString() };
    metrics.cacheIds.set({ address }, h.ids);
    if (ageSeconds === null) metrics.cacheHorizon.remove({ address });
    else metrics.cacheHorizon.set({ address }, ageSeconds);
    const min = this.o.minHorizonMs;
    const short = min > 0 && this.o.size !== undefined && h.ids >= this.o.size && h.oldestAgeMs !== null && h.oldestAgeMs < min;
    if (short === this.isShort) return;
    this.isShort = short;
    if (short) {
      log.warn(
        { address, ids: h.ids, horizonSeconds: ageSeconds, minCacheHorizonMs: min },
        `the duplicate-ID cache of ${address} remembers only ${ageSeconds?.toFixed(1)} s back (${h.ids} IDs, id-cache-size full), less than min-cache-horizon ${min} ms: a re-send older than that passes as new; raise id-cache-size`,
      );
    } else {
      log.info({ address, horizonSeconds: ageSeconds }, `the duplicate-ID cache of ${address} reaches back min-cache-horizon again`);
    }
    this.o.onChange();
  }
}
