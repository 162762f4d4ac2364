/**
 * The cache horizon against a real Redis: after a known number of IDs at a known rate, `bridge_id_cache_ids` is
 * id-cache-size and `bridge_id_cache_horizon_seconds` is the age of the oldest ID still remembered, within 10% of what
 * the publishing times say; with min-cache-horizon above it, one warning and the state cache-horizon-short (ready).
 */
import { describe, expect, it } from 'vitest';
import { useBridgeFixture } from '../support/bridge-fixture.js';
import { parsePrometheusText } from '../support/prometheus-text.js';
import { sleep, untilValue } from '../support/wait.js';

const ID = '_AMQ_DUPL_ID';
const fx = useBridgeFixture();

interface Status {
  state: string;
  cacheHorizon: { address: string; ids: number; oldestAgeSeconds: number | null; at: string } | null;
}

describe('the duplicate-ID cache horizon', () => {
  it('is the age of the oldest remembered ID (within 10%), and below min-cache-horizon the bridge says so', async () => {
    const [src, dst] = await fx.queues('hz-src', 'hz-dst');
    const size = 500;
    const c = fx.config({
      bridges: [{ name: 'hz', sourceQueue: src!, target: `queue: "${dst}"`, extra: { 'min-cache-horizon': 3_600_000 } }],
      idCache: { 'id-cache-size': size },
      top: { 'http-port': 0 },
    });
    const bridge = await fx.start(c.yaml);
    await bridge.waitForLog((l) => l.component === 'http' && typeof l.port === 'number', 10_000);
    const api = `http://127.0.0.1:${bridge.logs.find((l) => l.component === 'http' && typeof l.port === 'number')?.port as number}`;

    // 1000 IDs at 500/s: 10 chunks of 100, one every 200 ms; chunk k's publishing time kept.
    const chunkAt: number[] = [];
    const started = Date.now();
    for (let k = 0; k < 10; k++) {
      const wait = started + k * 200 - Date.now();
      if (wait > 0) await sleep(wait);
      chunkAt.push(Date.now());
      await fx.amqp.publish(src!, Array.from({ length: 100 }, (_, i) => ({ body: Buffer.from(`h${k * 100 + i}`), options: { headers: { [ID]: `hz-${k * 100 + i}` } } })));
    }
    await fx.amqp.waitForCount(dst!, (n) => n === 1000);
    const streamEnd = Date.now();
    // A reading taken after the stream: the cache then holds IDs 500..999, the oldest of them published with chunk 5.
    const status = await untilValue(
      'a horizon read after the stream',
      async () => (await (await fetch(`${api}/bridges/hz`)).json()) as Status,
      (s) => s.cacheHorizon !== null && Date.parse(s.cacheHorizon.at) > streamEnd && s.cacheHorizon.ids === size,
      { timeoutMs: 20_000, everyMs: 200 },
    );
    const h = status.cacheHorizon!;
    const expected = (Date.parse(h.at) - chunkAt[5]!) / 1000;
    expect(h.oldestAgeSeconds).not.toBeNull();
    expect(Math.abs(h.oldestAgeSeconds! - expected), `horizon ${h.oldestAgeSeconds} s, expected ${expected.toFixed(2)} s`).toBeLessThanOrEqual(expected * 0.1);

    const metrics = parsePrometheusText(await (await fetch(`${api}/metrics`)).text());
    expect(metrics.find('bridge_id_cache_ids', { address: h.address })[0]?.value).toBe(size);
    const gauge = metrics.find('bridge_id_cache_horizon_seconds', { address: h.address })[0]?.value;
    expect(gauge).toBeGreaterThan(0);

    // min-cache-horizon is an hour: the cache reaches back seconds.
    expect(status.state).toBe('cache-horizon-short');
    expect((await fetch(`${api}/readyz`)).status).toBe(200);
    const warnings = bridge.logs.filter((l) => typeof l.msg === 'string' && l.msg.includes('less than min-cache-horizon'));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]!.msg).toMatch(/remembers only [\d.]+ s back \(500 IDs, id-cache-size full\)/);
    await bridge.stop();
  });
});
