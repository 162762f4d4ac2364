/**
 * The HTTP API, metrics, the stall watchdog and `broker-bridge status` of a real `broker-bridge run` process between
 * queues of the real RabbitMQ (one bridge also reads ActiveMQ over STOMP), with real HTTP requests. Every test asserts
 * where the messages are (which queue, how many, which IDs), not only what the API says.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import type { ReceivedMessage, TestMessage } from '../support/amqp.js';
import { CLI, type BridgeProcess } from '../support/bridge-process.js';
import { useBridgeFixture } from '../support/bridge-fixture.js';
import { parsePrometheusText } from '../support/prometheus-text.js';
import { countOwnDeadLetters, publishStomp, type StompTestMessage } from '../support/stomp.js';
import { services, uniqueName } from '../support/services.js';
import { TcpProxy } from '../support/tcp-proxy.js';
import { sleep, untilValue } from '../support/wait.js';

const ID = '_AMQ_DUPL_ID';
const run = promisify(execFile);

const fx = useBridgeFixture();

function newQueues(...names: string[]): Promise<string[]> {
  return fx.queues(...names.map((n) => `ops-${n}`));
}

/** Starts the bridge and returns it with the base URL of its HTTP API (http-port 0: the port it logged). */
async function start(yaml: string, bridges = 1): Promise<{ bridge: BridgeProcess; api: string }> {
  const bridge = await fx.start(yaml, bridges);
  await bridge.waitForLog((l) => l.component === 'http' && typeof l.port === 'number', 10_000);
  const port = bridge.logs.find((l) => l.component === 'http' && typeof l.port === 'number')?.port as number;
  return { bridge, api: `http://127.0.0.1:${port}` };
}

function numbered(n: number, from = 0): TestMessage[] {
  return Array.from({ length: n }, (_, k) => ({ body: Buffer.from(`message ${from + k}`), options: { headers: { [ID]: `id-${from + k}` } } }));
}

function ids(messages: ReceivedMessage[]): string[] {
  return messages.map((m) => String(m.headers[ID])).sort();
}

function range(n: number, from = 0): string[] {
  return Array.from({ length: n }, (_, k) => `id-${from + k}`).sort();
}

interface Reply {
  status: number;
  body: Record<string, unknown>;
  text: string;
}

async function http(url: string, init: RequestInit = {}): Promise<Reply> {
  const res = await fetch(url, { ...init, signal: AbortSignal.timeout(15_000) });
  const text = await res.text();
  let body: Record<string, unknown> = {};
  try {
    body = JSON.parse(text) as Record<string, unknown>;
  } catch {
    // /metrics is text.
  }
  return { status: res.status, body, text };
}

/** Polling the HTTP API: a request per 200 ms. */
const HTTP_POLL = { everyMs: 200 };

describe('HTTP API: liveness, readiness, bridges, metrics', () => {
  it('is ready while flowing, 503 naming the cache within seconds of Redis going away, ready again after; live throughout; /metrics parses and counts', async () => {
    const [src, dst, dst2] = await newQueues('src', 'dst', 'dst2');
    const stompQueue = uniqueName('ops-stomp-src');
    const redisProxy = await fx.proxy(services.redisUrl);
    const c = fx.config({
      bridges: [
        { name: 'amqp-in', sourceQueue: src!, target: `queue: "${dst}"`, extra: { prefetch: 50 } },
        { name: 'stomp-in', sourceConnection: 'activemq', sourceQueue: stompQueue, target: `queue: "${dst2}"`, extra: { prefetch: 50 } },
      ],
      redisUrl: redisProxy.rewrite(services.redisUrl),
      top: { 'http-port': 0 },
    });
    const { bridge, api } = await start(c.yaml, 2);

    await fx.amqp.publish(src!, numbered(200));
    await fx.amqp.waitForCount(src!, (n) => n === 0);
    expect(await fx.amqp.settledCount(dst!)).toBe(200);

    const ready = await untilValue('ready', () => http(`${api}/readyz`), (r) => r.status === 200, HTTP_POLL);
    expect(ready.body).toMatchObject({ status: 'ready', reasons: [] });
    expect((await http(`${api}/livez`)).status).toBe(200);

    // Per-bridge status: counters, depth over AMQP (read every 5 s), none over STOMP. A first read taken while the 200
    // were still waiting stands until the next one: wait for a read that shows the queue empty.
    const status = await untilValue('depth read', () => http(`${api}/bridges/amqp-in`), (r) => r.body.sourceDepth === 0, HTTP_POLL);
    expect(status.body).toMatchObject({
      name: 'amqp-in',
      state: 'running',
      inFlight: 0,
      sourceDepth: 0,
      lastError: null,
      counters: { forwarded: 200, duplicatesDropped: 0, deadLettered: 0, targetRefusals: 0, stalls: 0, sessions: 1 },
    });
    expect(Date.parse(String(status.body.lastForwardAt))).toBeGreaterThan(Date.now() - 60_000);
    expect(status.body.forwardedPerSecond).toBeGreaterThan(0);
    const stomp = await http(`${api}/bridges/stomp-in`);
    expect(stomp.body).toMatchObject({ state: 'running', sourceDepth: null, sourceDepthNote: 'not available over STOMP', sourceDepthAvailable: false });
    const all = await http(`${api}/bridges`);
    expect((all.body.bridges as { name: string }[]).map((b) => b.name)).toEqual(['amqp-in', 'stomp-in']);
    expect((await http(`${api}/bridges/nope`)).status).toBe(404);
    // No admin-token configured: the admin endpoints do not exist.
    expect((await http(`${api}/bridges/amqp-in/pause`, { method: 'POST' })).status).toBe(404);

    // /metrics, parsed: the histograms have observations, the counters match what was sent.
    const metrics = parsePrometheusText((await http(`${api}/metrics`)).text);
    expect(metrics.value('bridge_messages_forwarded_total', { bridge: 'amqp-in' })).toBe(200);
    expect(metrics.types.get('bridge_forward_latency_seconds')).toBe('histogram');
    expect(metrics.value('bridge_forward_latency_seconds_count', { bridge: 'amqp-in' })).toBe(200);
    expect(metrics.value('bridge_forward_latency_seconds_bucket', { bridge: 'amqp-in', le: '+Inf' })).toBe(200);
    expect(metrics.value('bridge_forward_latency_seconds_sum', { bridge: 'amqp-in' })).toBeGreaterThan(0);
    expect(metrics.types.get('bridge_cache_call_duration_seconds')).toBe('histogram');
    // One reserve per message (gathered calls are timed each); one commit per group of messages confirmed together.
    expect(metrics.value('bridge_cache_call_duration_seconds_count', { bridge: 'amqp-in', op: 'reserve', outcome: 'ok' })).toBe(200);
    const commits = metrics.value('bridge_cache_call_duration_seconds_count', { bridge: 'amqp-in', op: 'commit', outcome: 'ok' });
    expect(commits).toBeGreaterThanOrEqual(1);
    expect(commits).toBeLessThanOrEqual(200);
    expect(metrics.value('bridge_in_flight_messages', { bridge: 'amqp-in' })).toBe(0);
    expect(metrics.value('bridge_source_queue_depth_messages', { bridge: 'amqp-in' })).toBe(0);
    expect(metrics.find('bridge_source_queue_depth_messages', { bridge: 'stomp-in' })).toEqual([]);
    expect(metrics.value('bridge_state', { bridge: 'amqp-in', state: 'running' })).toBe(1);
    expect(metrics.value('bridge_state', { bridge: 'amqp-in', state: 'cache-down' })).toBe(0);
    expect(metrics.value('bridge_info', { version: '0.1.0' })).toBe(1);
    expect(metrics.find('process_cpu_user_seconds_total')).toHaveLength(1);
    expect(metrics.find('nodejs_eventloop_lag_seconds')).toHaveLength(1);
    // Every metric a panel of the Grafana dashboard queries is served.
    const dashboard = JSON.parse(readFileSync(resolve(import.meta.dirname, '../../docker/grafana/dashboards/broker-bridge.json'), 'utf8')) as {
      panels: { title: string; targets: { expr: string }[] }[];
    };
    const served = new Set([...metrics.types.keys(), ...metrics.samples.map((x) => x.name)]);
    for (const panel of dashboard.panels) {
      const names = panel.targets.flatMap((t) => [...t.expr.matchAll(/\b((?:bridge|process|nodejs)_[a-z0-9_]+)/g)].map((m) => m[1]!));
      expect(names.length, panel.title).toBeGreaterThan(0);
      for (const name of names) expect(served.has(name) || served.has(name.replace(/_(bucket|sum|count)$/, '')), `${panel.title}: ${name}`).toBe(true);
    }

    // Redis goes away: not ready within seconds, and the reason says the cache; alive all along.
    const cutAt = Date.now();
    redisProxy.cut();
    // Each bridge probes the cache on its own timer (every 2 s): wait for the one under test, not the first to notice.
    const down = await untilValue(
      '503 with amqp-in cache-down',
      () => http(`${api}/readyz`),
      (r) => r.status === 503 && (r.body.bridges as Record<string, string> | undefined)?.['amqp-in'] === 'cache-down',
      { ...HTTP_POLL, timeoutMs: 15_000 },
    );
    expect(Date.now() - cutAt).toBeLessThan(10_000);
    expect((down.body.reasons as string[]).join(' ')).toMatch(/duplicate-ID cache \(Redis\) is unreachable/);
    expect(down.body.bridges).toMatchObject({ 'amqp-in': 'cache-down' });
    expect((await http(`${api}/livez`)).status).toBe(200);
    // Messages published meanwhile are held, not forwarded unchecked.
    await fx.amqp.publish(src!, numbered(20, 200));
    await sleep(2000);
    expect(await fx.amqp.count(dst!)).toBe(200);
    expect((await http(`${api}/livez`)).status).toBe(200);

    redisProxy.resume();
    await untilValue('ready again', () => http(`${api}/readyz`), (r) => r.status === 200, { ...HTTP_POLL, timeoutMs: 30_000 });
    expect(await fx.amqp.settledCount(dst!)).toBe(220);
    expect(ids(await fx.amqp.drain(dst!))).toEqual(range(220));
    expect(bridge.count((l) => l.level >= 50)).toBe(0);
  });
});

describe('admin endpoints: pause, resume, restart', () => {
  it('need the bearer token; pause holds messages in the source queue, resume drains it, restart starts a new session losing and doubling nothing; status follows', async () => {
    const [src, dst] = await newQueues('src', 'dst');
    const token = `t-${uniqueName('token')}`;
    const c = fx.config({
      bridges: [{ name: 'ops', sourceQueue: src!, target: `queue: "${dst}"`, extra: { prefetch: 20 } }],
      top: { 'http-port': 0, 'admin-token': token },
    });
    const { bridge, api } = await start(c.yaml);
    const auth = { authorization: `Bearer ${token}` };

    expect((await http(`${api}/bridges/ops/pause`, { method: 'POST' })).status).toBe(401);
    const wrong = await http(`${api}/bridges/ops/pause`, { method: 'POST', headers: { authorization: `Bearer ${token}x` } });
    expect(wrong.status).toBe(401);
    expect((await http(`${api}/bridges/ops/pause`, { method: 'POST', headers: { authorization: `Basic ${token}` } })).status).toBe(401);
    expect((await http(`${api}/bridges/ops/pause`, { method: 'GET', headers: auth })).status).toBe(405);
    expect((await http(`${api}/bridges/ops`)).body.state).toBe('running');

    // Pause: the source queue grows, nothing is forwarded; the bridge stays ready (paused on purpose).
    const paused = await http(`${api}/bridges/ops/pause`, { method: 'POST', headers: auth });
    expect(paused.status).toBe(200);
    expect(paused.body).toMatchObject({ state: 'paused', paused: true });
    await fx.amqp.publish(src!, numbered(100));
    await sleep(3000);
    expect(await fx.amqp.count(src!)).toBe(100);
    expect(await fx.amqp.count(dst!)).toBe(0);
    expect((await http(`${api}/readyz`)).status).toBe(200);
    const pausedStatus = await untilValue('depth 100', () => http(`${api}/bridges/ops`), (r) => r.body.sourceDepth === 100, { ...HTTP_POLL, timeoutMs: 10_000 });
    expect(pausedStatus.body).toMatchObject({ state: 'paused', inFlight: 0 });

    // status: a paused bridge is not running → exit 1; the table names it.
    const table = await run(process.execPath, [CLI, 'status', '--url', api]).then(
      () => ({ code: 0, stdout: '' }),
      (err: { code: number; stdout: string }) => err,
    );
    expect(table.code).toBe(1);
    expect(table.stdout).toMatch(/^BRIDGE\s+STATE\s+SINCE\s+MSGS\/S\s+IN FLIGHT\s+SOURCE DEPTH\s+LAST ERROR$/m);
    expect(table.stdout).toMatch(/^ops\s+paused\s+\S+\s+\d+\.\d\s+0\s+100\s+-$/m);

    // Resume: it drains.
    const resumed = await http(`${api}/bridges/ops/resume`, { method: 'POST', headers: auth });
    expect(resumed.status).toBe(200);
    expect(resumed.body).toMatchObject({ state: 'running', paused: false });
    await fx.amqp.waitForCount(src!, (n) => n === 0);
    expect(await fx.amqp.settledCount(dst!)).toBe(100);

    // Restart mid-stream: a new session, nothing lost, nothing doubled.
    await fx.amqp.publish(src!, numbered(300, 100));
    const restarted = await http(`${api}/bridges/ops/restart`, { method: 'POST', headers: auth });
    expect(restarted.status).toBe(202);
    await bridge.waitForLog((l) => l.msg === 'bridge running', 20_000, 2);
    await fx.amqp.waitForCount(src!, (n) => n === 0);
    expect(await fx.amqp.settledCount(dst!)).toBe(400);
    expect(ids(await fx.amqp.drain(dst!))).toEqual(range(400));
    const after = await http(`${api}/bridges/ops`);
    expect(after.body).toMatchObject({ state: 'running', counters: { forwarded: 400, sessions: 2, duplicatesDropped: 0 } });

    // status --json: exit 0 with every bridge running.
    const json = await run(process.execPath, [CLI, 'status', '--url', api, '--json']);
    const parsed = JSON.parse(json.stdout) as { bridges: { name: string; state: string; counters: { forwarded: number } }[] };
    expect(parsed.bridges).toMatchObject([{ name: 'ops', state: 'running', counters: { forwarded: 400 } }]);
    const ok = await run(process.execPath, [CLI, 'status', '--url', api]);
    expect(ok.stdout).toMatch(/^ops\s+running\s/m);
  });

  it('pause and resume a STOMP source: nothing is forwarded while paused, nothing NACKed; resume (a new session) delivers every message once', async () => {
    const [dst] = await newQueues('dst');
    const src = uniqueName('ops-stomp-src');
    const token = `t-${uniqueName('token')}`;
    const c = fx.config({
      bridges: [{ name: 'from-stomp', sourceConnection: 'activemq', sourceQueue: src, target: `queue: "${dst}"`, extra: { prefetch: 10 } }],
      top: { 'http-port': 0, 'admin-token': token },
    });
    const { api } = await start(c.yaml);
    const auth = { authorization: `Bearer ${token}` };
    const stompMessages = (n: number, from: number): StompTestMessage[] =>
      Array.from({ length: n }, (_, k) => ({ body: `message ${from + k}`, headers: { [ID]: `id-${from + k}` } }));

    await publishStomp(src, stompMessages(20, 0));
    // Quiet alone could be read before the first forward: wait for the 20, then check that no more come.
    await fx.amqp.waitForCount(dst!, (n) => n >= 20, 30_000);
    expect(await fx.amqp.settledCount(dst!)).toBe(20);
    expect((await http(`${api}/bridges/from-stomp/pause`, { method: 'POST', headers: auth })).body).toMatchObject({ state: 'paused' });
    await publishStomp(src, stompMessages(50, 20));
    await sleep(3000);
    expect(await fx.amqp.count(dst!)).toBe(20);
    const resumed = await http(`${api}/bridges/from-stomp/resume`, { method: 'POST', headers: auth });
    expect(resumed.status).toBe(200);
    await untilValue('running', () => http(`${api}/bridges/from-stomp`), (r) => r.body.state === 'running', HTTP_POLL);
    await fx.amqp.waitForCount(dst!, (n) => n >= 70, 30_000);
    expect(await fx.amqp.settledCount(dst!)).toBe(70);
    expect(ids(await fx.amqp.drain(dst!))).toEqual(range(70));
    expect(await countOwnDeadLetters([src])).toBe(0);
    const after = await http(`${api}/bridges/from-stomp`);
    expect(after.body).toMatchObject({ counters: { forwarded: 70, duplicatesDropped: 0, sessions: 2 } });
  });

  it('takes the token from ADMIN_TOKEN_FILE, and refuses to start when that file cannot be read', async () => {
    const [src, dst] = await newQueues('src', 'dst');
    const c = fx.config({ bridges: [{ name: 'filed', sourceQueue: src!, target: `queue: "${dst}"` }], top: { 'http-port': 0 } });
    const tokenFile = join(mkdtempSync(join(tmpdir(), 'broker-bridge-test-')), 'admin-token');
    writeFileSync(tokenFile, 'from-a-file\n');
    const bridge = await fx.start(c.yaml, 1, { ADMIN_TOKEN_FILE: tokenFile });
    await bridge.waitForLog((l) => l.component === 'http' && l.admin === true, 10_000);
    const port = bridge.logs.find((l) => l.component === 'http' && typeof l.port === 'number')?.port as number;
    const api = `http://127.0.0.1:${port}`;
    expect((await http(`${api}/bridges/filed/pause`, { method: 'POST', headers: { authorization: 'Bearer from-a-file' } })).body).toMatchObject({ state: 'paused' });
    expect((await http(`${api}/bridges/filed/resume`, { method: 'POST', headers: { authorization: 'Bearer from-a-file' } })).body).toMatchObject({ state: 'running' });
    expect((await http(`${api}/bridges/nope/resume`, { method: 'POST', headers: { authorization: 'Bearer from-a-file' } })).status).toBe(404);

    const missing = fx.spawn(c.yaml, { ADMIN_TOKEN_FILE: `${tokenFile}.missing` });
    expect(await missing.waitExit()).toBe(2);
    expect(missing.stderr.join('')).toMatch(/not started: ADMIN_TOKEN_FILE \S+admin-token\.missing cannot be read: ENOENT/);
  });

  it('status exits 3 with a sentence when no bridge answers', async () => {
    const closed = await TcpProxy.forUrl('http://127.0.0.1:1').start();
    const port = closed.port;
    await closed.stop();
    const result = await run(process.execPath, [CLI, 'status', '--url', `http://127.0.0.1:${port}`]).then(
      () => ({ code: 0, stderr: '' }),
      (err: { code: number; stderr: string }) => err,
    );
    expect(result.code).toBe(3);
    expect(result.stderr).toMatch(/cannot ask http:\/\/127\.0\.0\.1:\d+: connection refused/);
  });
});

describe('stall watchdog', () => {
  it('fires against a target that accepts TCP and never confirms, restarts the session, and the flow resumes when the target answers again', async () => {
    const [src, dst] = await newQueues('src', 'dst');
    const targetProxy = await fx.proxy(services.amqpUrl);
    const c = fx.config({
      bridges: [
        {
          name: 'stall',
          sourceQueue: src!,
          target: `queue: "${dst}"`,
          extra: { prefetch: 20, 'stall-timeout': 3000, 'confirm-timeout': 120000, 'retry-interval': 500, 'max-retry-interval': 500 },
        },
      ],
      top: { 'http-port': 0 },
    });
    // The target through the proxy on a connection of its own; the source straight to RabbitMQ.
    const yaml = c.yaml
      .replace('connections:\n', `connections:\n  via-proxy: { type: amqp, url: "${targetProxy.rewrite(services.amqpUrl)}", connect-timeout: 2000 }\n`)
      .replace(`target: { connection: rabbit, queue: "${dst}" }`, `target: { connection: via-proxy, queue: "${dst}" }`);
    expect(yaml).toContain('connection: via-proxy');
    const { bridge, api } = await start(yaml);
    await untilValue('ready', () => http(`${api}/readyz`), (r) => r.status === 200, HTTP_POLL);

    targetProxy.stall();
    await fx.amqp.publish(src!, numbered(30));
    await bridge.waitForLog((l) => l.level === 50 && /stalled/.test(l.msg), 15_000);
    const notReady = await http(`${api}/readyz`);
    expect(notReady.status).toBe(503);
    expect((notReady.body.reasons as string[]).join(' ')).toMatch(/bridge 'stall' is stalled/);
    const metrics = parsePrometheusText((await http(`${api}/metrics`)).text);
    expect(metrics.value('bridge_stalls_total', { bridge: 'stall' })).toBe(1);
    const status = await http(`${api}/bridges/stall`);
    expect(status.body).toMatchObject({ state: 'stalled', counters: { stalls: 1 } });
    expect(String((status.body.lastError as { message: string }).message)).toMatch(/stalled: \d+ message\(s\) in flight/);
    // While the target still does not answer, the new session cannot open: no second stall, one error line.
    await sleep(4000);
    expect(bridge.count((l) => l.level === 50 && /stalled/.test(l.msg))).toBe(1);
    expect(await fx.amqp.count(dst!)).toBe(0);

    targetProxy.resume();
    await untilValue('ready again', () => http(`${api}/readyz`), (r) => r.status === 200, { ...HTTP_POLL, timeoutMs: 30_000 });
    await fx.amqp.waitForCount(src!, (n) => n === 0, 30_000);
    expect(await fx.amqp.settledCount(dst!)).toBe(30);
    expect(ids(await fx.amqp.drain(dst!))).toEqual(range(30));
    expect((await http(`${api}/bridges/stall`)).body).toMatchObject({ state: 'running', counters: { forwarded: 30, stalls: 1 } });
  });
});
