import { Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { LightHistogram } from '../../src/core/light-histogram.js';

const BUCKETS = [0.001, 0.01, 0.1, 1];

describe('LightHistogram', () => {
  it('exposes the same text as prom-client’s Histogram for the same observations', async () => {
    const ours = new Registry();
    const theirs = new Registry();
    const light = new LightHistogram({ name: 'h_seconds', help: 'help', labelNames: ['bridge', 'op'], buckets: BUCKETS, registers: [ours] });
    const reference = new Histogram({ name: 'h_seconds', help: 'help', labelNames: ['bridge', 'op'], buckets: BUCKETS, registers: [theirs] });
    // On a bound, between bounds, above all of them, and two label sets.
    const observations: [{ bridge: string; op: string }, number][] = [
      [{ bridge: 'a', op: 'reserve' }, 0.001],
      [{ bridge: 'a', op: 'reserve' }, 0.0005],
      [{ bridge: 'a', op: 'reserve' }, 0.05],
      [{ bridge: 'a', op: 'reserve' }, 7],
      [{ bridge: 'b', op: 'commit' }, 0.2],
      // Label values the exposition must escape (the registry formats a series' labels once: getForPromString).
      [{ bridge: 'q"uo\\te\nd', op: 'commit' }, 0.02],
    ];
    for (const [labels, v] of observations) {
      light.observe(labels, v);
      reference.observe(labels, v);
    }
    const lines = (text: string) => text.split('\n').filter(Boolean).sort();
    expect(lines(await ours.metrics())).toEqual(lines(await theirs.metrics()));
    expect(await ours.metrics()).toContain('h_seconds_bucket{le="0.001",bridge="a",op="reserve"} 2');
    expect(await ours.metrics()).toContain('h_seconds_count{bridge="a",op="reserve"} 4');
  });

  it('ignores a value that is not a finite number instead of poisoning the sum', async () => {
    const r = new Registry();
    const h = new LightHistogram({ name: 'x', help: 'x', labelNames: ['bridge'], buckets: BUCKETS, registers: [r] });
    h.observe({ bridge: 'a' }, Number.NaN);
    h.observe({ bridge: 'a' }, 0.5);
    const snap = await h.get();
    expect(snap.values.find((v) => v.metricName === 'x_sum')?.value).toBe(0.5);
    expect(snap.values.find((v) => v.metricName === 'x_count')?.value).toBe(1);
  });

  it('observes through a bound label set into the same series as observe(), and after a reset too', async () => {
    const r = new Registry();
    const h = new LightHistogram({ name: 'y', help: 'y', labelNames: ['bridge', 'op'], buckets: BUCKETS, registers: [r] });
    const bound = h.bind({ bridge: 'a', op: 'commit' });
    bound(0.005);
    h.observe({ bridge: 'a', op: 'commit' }, 0.5);
    bound(Number.POSITIVE_INFINITY);
    expect(await r.metrics()).toContain('y_count{bridge="a",op="commit"} 2');
    expect(await r.metrics()).toContain('y_bucket{le="0.01",bridge="a",op="commit"} 1');
    h.reset();
    bound(0.05);
    expect(await r.metrics()).toContain('y_count{bridge="a",op="commit"} 1');
    expect(await r.metrics()).toContain('y_sum{bridge="a",op="commit"} 0.05');
  });
});
