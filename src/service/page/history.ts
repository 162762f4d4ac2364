/**
 * What the operator page (docs/operations.md, "The operator page") charts of a bridge over the last 15 minutes: its
 * forward rate and its forward latency p50/p99, sampled from the metrics every 10 s into a ring of 90 samples per
 * bridge. Bounded whatever the traffic: 90 × 3 float32 per bridge (about 1 KiB; 1 MiB for 1,000 bridges), plus the
 * latency buckets of the last minute (WINDOW_SAMPLES snapshots) that give the table its p50/p99 over the last minute.
 *
 * One reading of the two metrics per sample for every bridge (not one per bridge: prom-client's get() returns every
 * bridge's series, so a per-bridge read would cost O(bridges²)).
 */
import type { Metrics } from '../../core/metrics.js';

export const SAMPLE_INTERVAL_MS = 10_000;
export const SAMPLES = 90;
/** Snapshots of the latency buckets kept for the table's "last minute" (the oldest is 60 s old once 7 were taken). */
const WINDOW_SAMPLES = 7;

/** Cumulative latency bucket counts of one bridge, and the bounds they count up to (the last is +Inf). */
export interface Buckets {
  bounds: readonly number[];
  counts: readonly number[];
}

export interface LatencyQuantiles {
  p50: number;
  p99: number;
  /** Messages the figures are over. */
  count: number;
  windowSeconds: number;
}

export interface HistorySample {
  at: string;
  forwardedPerSecond: number;
  /** Seconds; null when nothing was forwarded in the interval. */
  latencyP50: number | null;
  latencyP99: number | null;
}

interface BridgeRing {
  /** [rate, p50, p99] per slot; NaN where the bridge did not exist yet or nothing was forwarded. */
  values: Float32Array;
  lastForwarded: number;
  /** The last WINDOW_SAMPLES bucket snapshots (oldest first), with their times. */
  window: { at: number; counts: number[] }[];
}

/** The metrics' readings of every bridge at one moment. */
interface Reading {
  forwarded: Map<string, number>;
  buckets: Map<string, Buckets>;
}

export class RateHistory {
  private readonly times = new Float64Array(SAMPLES).fill(Number.NaN);
  /** The slot the next sample goes to. */
  private head = 0;
  private readonly rings = new Map<string, BridgeRing>();

  constructor(private readonly metrics: Metrics) {}

  /** Takes one sample of every bridge in `names`; forgets bridges no longer there (a reload removed them). */
  async sample(names: readonly string[], now = Date.now()): Promise<void> {
    const reading = await this.read();
    const prevSlot = (this.head + SAMPLES - 1) % SAMPLES;
    const elapsed = (now - this.times[prevSlot]!) / 1000;
    const keep = new Set(names);
    for (const name of this.rings.keys()) if (!keep.has(name)) this.rings.delete(name);
    for (const name of names) {
      const forwarded = reading.forwarded.get(name) ?? 0;
      const buckets = reading.buckets.get(name);
      let ring = this.rings.get(name);
      const isNew = ring === undefined;
      ring ??= { values: new Float32Array(SAMPLES * 3).fill(Number.NaN), lastForwarded: forwarded, window: [] };
      this.rings.set(name, ring);
      const o = this.head * 3;
      const last = ring.window.at(-1);
      if (isNew || !(elapsed > 0)) {
        ring.values.fill(Number.NaN, o, o + 3);
      } else {
        ring.values[o] = Math.max(0, forwarded - ring.lastForwarded) / elapsed;
        const q = buckets && last ? quantiles({ bounds: buckets.bounds, counts: minus(buckets.counts, last.counts) }) : undefined;
        ring.values[o + 1] = q?.p50 ?? Number.NaN;
        ring.values[o + 2] = q?.p99 ?? Number.NaN;
      }
      ring.lastForwarded = forwarded;
      ring.window.push({ at: now, counts: [...(buckets?.counts ?? [])] });
      if (ring.window.length > WINDOW_SAMPLES) ring.window.shift();
    }
    this.times[this.head] = now;
    this.head = (this.head + 1) % SAMPLES;
  }

  /** The bridge's samples, oldest first; undefined for a bridge not sampled yet. */
  of(name: string): HistorySample[] | undefined {
    const ring = this.rings.get(name);
    if (!ring) return undefined;
    const out: HistorySample[] = [];
    for (let i = 0; i < SAMPLES; i++) {
      const slot = (this.head + i) % SAMPLES;
      const rate = ring.values[slot * 3]!;
      if (Number.isNaN(this.times[slot]!) || Number.isNaN(rate)) continue;
      const p50 = ring.values[slot * 3 + 1]!;
      const p99 = ring.values[slot * 3 + 2]!;
      out.push({
        at: new Date(this.times[slot]!).toISOString(),
        forwardedPerSecond: round(rate),
        latencyP50: Number.isNaN(p50) ? null : round(p50),
        latencyP99: Number.isNaN(p99) ? null : round(p99),
      });
    }
    return out;
  }

  /**
   * Forward latency p50/p99 of each named bridge from the oldest snapshot of the last minute to now (since the start
   * before the first sample); null where nothing was forwarded in that time. One reading of the histogram for all.
   */
  async latencyOf(names: readonly string[], now = Date.now()): Promise<Map<string, LatencyQuantiles | null>> {
    const { buckets } = await this.read(false);
    const out = new Map<string, LatencyQuantiles | null>();
    for (const name of names) {
      const b = buckets.get(name);
      const base = this.rings.get(name)?.window[0];
      const counts = b ? (base && base.counts.length === b.counts.length ? minus(b.counts, base.counts) : b.counts) : [];
      const q = b ? quantiles({ bounds: b.bounds, counts }) : undefined;
      out.set(name, q ? { ...q, windowSeconds: base ? Math.round((now - base.at) / 1000) : Math.round(process.uptime()) } : null);
    }
    return out;
  }

  private async read(withForwarded = true): Promise<Reading> {
    const forwarded = new Map<string, number>();
    if (withForwarded) {
      for (const v of (await this.metrics.forwarded.get()).values) {
        const b = String(v.labels.bridge);
        forwarded.set(b, (forwarded.get(b) ?? 0) + v.value);
      }
    }
    const buckets = new Map<string, { bounds: number[]; counts: number[] }>();
    for (const v of (await this.metrics.forwardLatency.get()).values) {
      if (!v.metricName.endsWith('_bucket')) continue;
      const b = String(v.labels.bridge);
      let e = buckets.get(b);
      if (!e) buckets.set(b, (e = { bounds: [], counts: [] }));
      e.bounds.push(v.labels.le === '+Inf' ? Number.POSITIVE_INFINITY : Number(v.labels.le));
      e.counts.push(v.value);
    }
    return { forwarded, buckets };
  }
}

function minus(a: readonly number[], b: readonly number[]): number[] {
  return a.map((v, i) => v - (b[i] ?? 0));
}

/**
 * p50 and p99 from cumulative bucket counts, interpolated inside the bucket as Prometheus' histogram_quantile does
 * (a quantile in the +Inf bucket is the highest finite bound); undefined when the counts are all zero.
 */
export function quantiles(b: Buckets): Omit<LatencyQuantiles, 'windowSeconds'> | undefined {
  const total = b.counts.at(-1) ?? 0;
  if (!(total > 0)) return undefined;
  const at = (q: number): number => {
    const rank = q * total;
    for (let i = 0; i < b.counts.length; i++) {
      if (b.counts[i]! < rank) continue;
      const upper = b.bounds[i]!;
      if (!Number.isFinite(upper)) return b.bounds[i - 1] ?? 0;
      const lower = i > 0 ? b.bounds[i - 1]! : 0;
      const below = i > 0 ? b.counts[i - 1]! : 0;
      const inBucket = b.counts[i]! - below;
      return round(inBucket > 0 ? lower + ((upper - lower) * (rank - below)) / inBucket : upper);
    }
    return b.bounds.at(-2) ?? 0;
  };
  return { p50: at(0.5), p99: at(0.99), count: total };
}

function round(n: number): number {
  return Math.round(n * 1e6) / 1e6;
}
