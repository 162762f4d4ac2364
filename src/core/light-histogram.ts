/**
 * A Prometheus histogram for the per-message hot path. prom-client's Histogram validates and hashes the label object
 * and allocates on every observe(); with two to four observations per forwarded message that was about 5% of the
 * bridge's CPU in a profile of the bench (20,000 messages). Here a label set is looked up once by its joined values
 * and each observation is a bucket search and three additions. Registered in a prom-client Registry like any metric:
 * the registry asks get() for the same shape prom-client's own Histogram returns, so the exposition is the same.
 */
import type { Registry } from 'prom-client';

/** One line of the exposition, as prom-client's registry reads it from get(). */
export interface HistogramValue {
  labels: Record<string, string | number>;
  /** Labels the registry formats once per object (getForPromString): the series' own. */
  sharedLabels?: Record<string, string>;
  value: number;
  metricName: string;
}

export interface HistogramSnapshot {
  name: string;
  help: string;
  type: 'histogram';
  aggregator: 'sum';
  values: HistogramValue[];
}

interface Series {
  labels: Record<string, string>;
  /** Observations per bucket (not cumulative); the last slot is above every bound (+Inf). */
  counts: Float64Array;
  sum: number;
  count: number;
}

export interface LightHistogramOptions<L extends string> {
  name: string;
  help: string;
  labelNames: readonly L[];
  /** Upper bounds, ascending. */
  buckets: readonly number[];
  registers: Registry[];
}

/** The labels of a _sum or _count line when the series' own are shared: none of its own (never written to). */
const NO_LABELS: Record<string, string> = {};

export class LightHistogram<L extends string = string> {
  readonly name: string;
  readonly help: string;
  readonly type = 'histogram' as const;
  readonly aggregator = 'sum' as const;
  private readonly labelNames: readonly L[];
  private readonly bounds: readonly number[];
  private readonly series = new Map<string, Series>();

  constructor(options: LightHistogramOptions<L>) {
    this.name = options.name;
    this.help = options.help;
    this.labelNames = options.labelNames;
    this.bounds = options.buckets;
    for (const r of options.registers) r.registerMetric(this as never);
  }

  observe(labels: Record<L, string>, value: number): void {
    if (Number.isFinite(value)) this.record(this.seriesOf(labels), value);
  }

  /**
   * observe() for one label set whose key is built once: not again per observation (~0.1 KB of garbage each on the
   * per-message path). A reset() in between is seen: the series is looked up by that key each time.
   */
  bind(labels: Record<L, string>): (value: number) => void {
    const key = this.keyOf(labels);
    return (value) => this.record(this.series.get(key) ?? this.seriesOf(labels), value);
  }

  private keyOf(labels: Record<L, string>): string {
    let key = '';
    for (const n of this.labelNames) key += `${labels[n]}\u0000`;
    return key;
  }

  private seriesOf(labels: Record<L, string>): Series {
    const key = this.keyOf(labels);
    let s = this.series.get(key);
    if (!s) {
      const copy: Record<string, string> = {};
      for (const n of this.labelNames) copy[n] = String(labels[n]);
      s = { labels: copy, counts: new Float64Array(this.bounds.length + 1), sum: 0, count: 0 };
      this.series.set(key, s);
    }
    return s;
  }

  private record(s: Series, value: number): void {
    if (!Number.isFinite(value)) return; // a clock step backwards must not poison the sum
    let i = 0;
    while (i < this.bounds.length && value > this.bounds[i]!) i++;
    s.counts[i]! += 1;
    s.sum += value;
    s.count += 1;
  }

  /**
   * What prom-client's registry renders /metrics from, when a metric has it (instead of get()): the series' own labels
   * as `sharedLabels`, one object per series, which the registry formats once and caches (a WeakMap keyed by the
   * object), so that each bucket line formats only its `le`. The text is the same as get()'s; at 1,000 bridges a
   * scrape's histogram lines (64,000) took ~200 ms to format label by label.
   */
  getForPromString(): Promise<HistogramSnapshot> {
    return Promise.resolve(this.snapshot(true));
  }

  /** Every line with all its labels (read by the page's history and by tests). */
  get(): Promise<HistogramSnapshot> {
    return Promise.resolve(this.snapshot(false));
  }

  /** The lines of every series; `shared`: its labels as sharedLabels (getForPromString), else merged into each line's. */
  private snapshot(shared: boolean): HistogramSnapshot {
    const values: HistogramValue[] = [];
    const bucket = `${this.name}_bucket`;
    const sum = `${this.name}_sum`;
    const count = `${this.name}_count`;
    for (const s of this.series.values()) {
      const line = (value: number, metricName: string, le?: number | string): HistogramValue =>
        shared
          ? { labels: le === undefined ? NO_LABELS : { le }, sharedLabels: s.labels, value, metricName }
          : { labels: le === undefined ? s.labels : { le, ...s.labels }, value, metricName };
      let acc = 0;
      for (let i = 0; i < this.bounds.length; i++) {
        acc += s.counts[i]!;
        values.push(line(acc, bucket, this.bounds[i]));
      }
      values.push(line(s.count, bucket, '+Inf'), line(s.sum, sum), line(s.count, count));
    }
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }

  reset(): void {
    this.series.clear();
  }
}
