/**
 * The operator page's server side (src/service/page/): the page and its assets under the CSP, the paged and filtered
 * GET /bridges beside the plain one (unchanged), the bounded history, and the quantiles it computes from the latency
 * buckets. The page itself in a browser: test/integration/operator-page.test.ts.
 */
import type { Server } from 'node:http';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Metrics } from '../../src/core/metrics.js';
import type { BridgeStatus, BridgeSupervisor } from '../../src/core/supervisor.js';
import { startHttpServer } from '../../src/service/http-server.js';
import { RateHistory, SAMPLES, SAMPLE_INTERVAL_MS, quantiles } from '../../src/service/page/history.js';
import { createLogger } from '../../src/shared/log.js';

const N = 250;
const metrics = new Metrics('test', { defaultMetrics: false });
let server: Server;
let base: string;

function fakeSupervisor(i: number): BridgeSupervisor {
  const name = `b-${String(i).padStart(3, '0')}`;
  const status: BridgeStatus = {
    name,
    state: i % 10 === 0 ? 'stalled' : 'running',
    since: new Date(0).toISOString(),
    paused: false,
    pause: null,
    declaredState: 'running',
    source: `amqp rabbit queue 'src-${i}'`,
    target: `amqp rabbit queue '${i % 2 === 0 ? 'even' : 'odd'}'`,
    lastError: null,
    inFlight: 0,
    inFlightBytes: 0,
    oldestUnforwardedAgeSeconds: 0,
    forwardedPerSecond: 0,
    sourceDepth: null,
    sourceDepthNote: 'not available over STOMP',
    sourceDepthAvailable: false,
    lastForwardAt: null,
    targetFullSince: null,
    cacheHorizon: null,
    connections: { source: null, target: null },
    retry: null,
  };
  return { name, status: () => status } as unknown as BridgeSupervisor;
}

beforeAll(async () => {
  const sink = new Writable({ write: (_c, _e, done) => done() });
  metrics.forwarded.inc({ bridge: 'b-007' }, 5);
  metrics.deadLettered.inc({ bridge: 'b-007', reason: 'rejected' }, 2);
  metrics.deadLettered.inc({ bridge: 'b-007', reason: 'too-large' }, 1);
  const supervisors = Array.from({ length: N }, (_, i) => fakeSupervisor(i));
  const started = await startHttpServer(0, '127.0.0.1', { metrics, supervisors, log: createLogger('silent', 'json', sink), version: '9.9.9' });
  server = started.server;
  base = `http://127.0.0.1:${started.port}`;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

async function getJson(path: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${base}${path}`);
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

describe('operator page: routes', () => {
  it('serves the page and its assets from this process, under a CSP that allows nothing else', async () => {
    const page = await fetch(`${base}/`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(page.headers.get('content-security-policy')).toBe(
      "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    );
    const html = await page.text();
    expect(html).toContain('data-admin="off"');
    expect(html).toContain('9.9.9');
    // Nothing from another origin, no inline script or style.
    expect(html).not.toMatch(/(src|href)="(https?:)?\/\//);
    expect(html).not.toMatch(/<script>|<style|style="/);
    for (const [asset, type] of [['/page/page.js', 'text/javascript'], ['/page/page.css', 'text/css']] as const) {
      const res = await fetch(`${base}${asset}`);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toContain(type);
      expect(await res.text()).not.toMatch(/https?:\/\/(?!www\.w3\.org\/2000\/svg)/);
    }
    expect((await fetch(`${base}/page/other.js`)).status).toBe(404);
  });

  it('pages and filters GET /bridges on the server; without paging parameters the answer is the one it always was', async () => {
    const plain = await getJson('/bridges');
    expect(Object.keys(plain.body)).toEqual(['bridges']);
    expect(plain.body.bridges).toHaveLength(N);

    const first = await getJson('/bridges?offset=0&limit=50');
    expect(first.body).toMatchObject({ total: N, matched: N, offset: 0, limit: 50 });
    const rows = first.body.bridges as { name: string; counters: { forwarded: number; deadLettered: number }; deadLetteredByReason: Record<string, number>; latency: unknown }[];
    expect(rows.map((r) => r.name)).toEqual(Array.from({ length: 50 }, (_, i) => `b-${String(i).padStart(3, '0')}`));
    const b7 = rows.find((r) => r.name === 'b-007')!;
    expect(b7.counters).toMatchObject({ forwarded: 5, deadLettered: 3 });
    expect(b7.deadLetteredByReason).toEqual({ rejected: 2, 'too-large': 1 });
    expect(b7.latency).toBeNull();

    const last = await getJson('/bridges?offset=240&limit=50');
    expect((last.body.bridges as unknown[]).length).toBe(10);
    const q = await getJson(`/bridges?q=${encodeURIComponent("queue 'odd'")}&limit=200`);
    expect(q.body.matched).toBe(N / 2);
    const stalled = await getJson('/bridges?state=stalled');
    expect(stalled.body.matched).toBe(N / 10);
    expect((stalled.body.bridges as { state: string }[]).every((b) => b.state === 'stalled')).toBe(true);
    expect((await getJson('/bridges?state=!running')).body.matched).toBe(N / 10);
    expect((await getJson('/bridges?q=B-24')).body.matched).toBe(10);
    for (const bad of ['limit=0', 'limit=201', 'offset=-1', 'limit=abc']) expect((await getJson(`/bridges?${bad}`)).status).toBe(400);
  });

  it('answers the history and configuration of a bridge that exists, 404 otherwise', async () => {
    expect((await getJson('/bridges/b-001/history')).body).toMatchObject({ name: 'b-001', intervalSeconds: SAMPLE_INTERVAL_MS / 1000, samples: [] });
    expect((await getJson('/bridges/nope/history')).status).toBe(404);
    expect((await getJson('/bridges/b-001/config')).body).toEqual({ name: 'b-001', config: null });
  });
});

describe('operator page: history', () => {
  it('keeps 90 samples per bridge whatever the time it runs, the rate from the forwarded counter and the latency from the buckets', async () => {
    const m = new Metrics('test', { defaultMetrics: false });
    const h = new RateHistory(m);
    let t = 1_000_000;
    await h.sample(['a'], t);
    for (let i = 0; i < 200; i++) {
      m.forwarded.inc({ bridge: 'a' }, 100);
      for (let k = 0; k < 99; k++) m.forwardLatency.observe({ bridge: 'a' }, 0.004);
      m.forwardLatency.observe({ bridge: 'a' }, 20);
      t += SAMPLE_INTERVAL_MS;
      await h.sample(['a'], t);
    }
    const s = h.of('a')!;
    expect(s).toHaveLength(SAMPLES);
    expect(s.at(-1)).toMatchObject({ at: new Date(t).toISOString(), forwardedPerSecond: 10 });
    // 99 of 100 in the (0.0025, 0.005] bucket, one in (10, 30].
    expect(s.at(-1)!.latencyP50).toBeCloseTo(0.0025 + 0.0025 * (50 / 99), 6);
    expect(s.at(-1)!.latencyP99).toBeCloseTo(0.005, 6);
    // A bridge no longer in the set is forgotten.
    await h.sample(['b'], t + SAMPLE_INTERVAL_MS);
    expect(h.of('a')).toBeUndefined();
  });

  it('quantiles interpolate inside a bucket, and one in +Inf is the highest finite bound', () => {
    expect(quantiles({ bounds: [1, 2, Number.POSITIVE_INFINITY], counts: [0, 0, 0] })).toBeUndefined();
    expect(quantiles({ bounds: [1, 2, Number.POSITIVE_INFINITY], counts: [0, 10, 10] })).toEqual({ p50: 1.5, p99: 1.99, count: 10 });
    expect(quantiles({ bounds: [1, 2, Number.POSITIVE_INFINITY], counts: [0, 0, 4] })).toEqual({ p50: 2, p99: 2, count: 4 });
  });
});
