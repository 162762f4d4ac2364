/**
 * What the bench scenarios share: the Scenario shape, prefilling and draining queues, running a bridge process or the
 * shovel over a measured window (./window.ts), and the plain-client baselines. The scenarios themselves are in
 * ./*-scenarios.ts, listed by ./scenarios.ts; each drains a pre-filled source of WARMUP + N messages into a target
 * through one path and is measured over the last N; baselines use the plain clients the bridge is built on, with the
 * same prefetch and persistence.
 */
import { readFileSync } from 'node:fs';
import amqp from 'amqplib';
import { BridgeProcess, writeConfig } from '../test/support/bridge-process.js';
import { cpuSplitMs, ownCpuMs } from './process-cpu.js';
import { type RunResult, WARMUP, Window } from './window.js';
import { pin } from './pinning.js';
import { deleteKeysUnder } from '../test/support/redis-keys.js';

export type { RunResult } from './window.js';

export interface Scenario {
  group: string;
  name: string;
  /** Name of the scenario whose rate this one is compared with. */
  baseline?: string;
  /** A second scenario to compare with, in a column of its own (RabbitMQ's shovel). */
  versus?: string;
  /** The same bridge with duplicate detection off: the '× dedupe off' column (what detection costs). */
  detectionOff?: string;
  skip?: () => boolean;
  /** Checked once before the rounds: why the scenario cannot run here (it is left out, saying so), or undefined. */
  unavailable?: () => Promise<string | undefined>;
  run(n: number): Promise<RunResult>;
  latency?: () => Promise<{ p50: number; p99: number; count: number }>;
}

/** The bridges' and the baselines' prefetch (and the shovel's src-prefetch-count): BENCH_PREFETCH, default 1000. */
export const PREFETCH = Number(process.env.BENCH_PREFETCH ?? 1000);
export const BODY = Buffer.alloc(1024, 'x');
let counter = 0;
export const uniq = (p: string) => `bench-${p}-${process.pid}-${++counter}`;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function withAmqp<T>(fn: (ch: amqp.ConfirmChannel, conn: amqp.ChannelModel) => Promise<T>): Promise<T> {
  const conn = await amqp.connect(process.env.AMQP_URL!);
  conn.on('error', () => undefined);
  try {
    const ch = await conn.createConfirmChannel();
    return await fn(ch, conn);
  } finally {
    await conn.close().catch(() => undefined);
  }
}

/**
 * BENCH_TIMESTAMPS=1: each message carries a publisher timestamp (AMQP, whole seconds), so that the bridge observes its
 * replication latency (bridge_replication_latency_seconds) on the per-message path.
 */
function stamp(): { timestamp?: number } {
  return process.env.BENCH_TIMESTAMPS ? { timestamp: Math.floor(Date.now() / 1000) } : {};
}

/** Declares the queues and fills `queue` with n persistent messages (with an `_AMQ_DUPL_ID` header when `withIds`). */
export async function prefillAmqp(queue: string, n: number, withIds: boolean, ...others: string[]): Promise<void> {
  await prefillAmqpWith(queue, n, (i) => (withIds ? { _AMQ_DUPL_ID: `${queue}-${i}` } : {}), ...others);
}

/** The same with the headers `headersOf(i)` gives the i-th message. */
export async function prefillAmqpWith(queue: string, n: number, headersOf: (i: number) => Record<string, unknown>, ...others: string[]): Promise<void> {
  await prefillAmqpOptions(queue, n, (i) => ({ headers: headersOf(i) }), ...others);
}

/** The same with the publish options (headers, message-id, …) `optionsOf(i)` gives the i-th message. */
export async function prefillAmqpOptions(queue: string, n: number, optionsOf: (i: number) => amqp.Options.Publish, ...others: string[]): Promise<void> {
  await withAmqp(async (ch) => {
    for (const q of [queue, ...others]) await ch.assertQueue(q, { durable: true });
    for (let i = 0; i < n; i++) {
      if (!ch.sendToQueue(queue, BODY, { persistent: true, ...optionsOf(i), ...stamp() })) await new Promise((r) => ch.once('drain', r));
      if (i % 1000 === 999) await ch.waitForConfirms();
    }
    await ch.waitForConfirms();
  });
}

export async function deleteAmqpQueues(...queues: string[]): Promise<void> {
  await withAmqp(async (ch) => {
    for (const q of queues) await ch.deleteQueue(q).catch(() => undefined);
  });
}

/** Polls the queue's message count into `window` until it holds all of the run's messages. */
export async function waitAmqpCount(queue: string, window: Window, timeoutMs = 300_000): Promise<void> {
  const conn = await amqp.connect(process.env.AMQP_URL!);
  try {
    const ch = await conn.createChannel();
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const { messageCount } = await ch.checkQueue(queue);
      if (window.count(messageCount)) return;
      if (Date.now() > deadline) throw new Error(`${queue} reached only ${messageCount}/${WARMUP + window.n}`);
      await sleep(10);
    }
  } finally {
    await conn.close().catch(() => undefined);
  }
}

export function peakRssMb(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined;
  try {
    const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : undefined;
  } catch {
    return undefined;
  }
}

export interface BridgeRunOptions {
  sourceConnection: 'rabbit' | 'activemq';
  sourceQueue: string;
  targetConnection: 'rabbit' | 'activemq';
  targetQueue: string;
  dedupe: boolean;
  batchSize?: number;
  /** YAML lines of `id-cache` that say where Redis is (default: `redis-url` from REDIS_URL) and how to use it. */
  redisYaml?: string[];
  /** More YAML lines of the bridge (filter, header rules, …). */
  bridgeYaml?: string[];
  /** The CPU list (taskset) of the bridge's threads, e.g. '1'; default: as started. */
  cpus?: string;
  /** The command the bridge process runs (its bridge is named `bench`); default `run`. */
  command?: readonly string[];
  /** Resolves once the target holds all of the window's messages (feeding the window as they arrive). */
  waitDone: (window: Window) => Promise<void>;
}

/**
 * Runs the real bridge process until the target holds everything; forwarding counts as started at its 'bridge running'
 * line, and its CPU over the window is read from /proc.
 */
export async function runBridge(o: BridgeRunOptions, n: number): Promise<RunResult> {
  const keyPrefix = uniq('cache');
  const yaml = `log-level: info
connections:
  rabbit: { type: amqp, url: "${process.env.AMQP_URL}" }
  activemq: { type: stomp, url: "${process.env.STOMP_URL}" }
id-cache:
${(o.redisYaml ?? [`redis-url: "${process.env.REDIS_URL}"`]).map((l) => `  ${l}`).join('\n')}
  key-prefix: ${keyPrefix}
  id-cache-size: ${Math.max(2000, PREFETCH * 2)}
bridges:
  - name: bench
    source: { connection: ${o.sourceConnection}, queue: "${o.sourceQueue}" }
    target: { connection: ${o.targetConnection}, queue: "${o.targetQueue}" }
    use-duplicate-detection: ${o.dedupe}
    prefetch: ${PREFETCH}
    max-batch-size: ${o.batchSize ?? 1}
    max-batch-time: 20
${(o.bridgeYaml ?? []).map((l) => `    ${l}\n`).join('')}`;
  const file = writeConfig(yaml);
  // A move logs to stderr, warnings only unless LOG_LEVEL says: its 'bridge running' line starts the clock.
  const p = BridgeProcess.start(file, { LOG_LEVEL: 'info' }, o.command);
  try {
    if (o.cpus !== undefined && p.child.pid !== undefined) pin(p.child.pid, o.cpus);
    await p.waitForLog((l) => l.msg === 'bridge running', 60_000);
    const running = p.logs.find((l) => l.msg === 'bridge running');
    const window = new Window(n, () => cpuSplitMs(p.child.pid));
    if (typeof running?.time === 'number') window.started = running.time;
    await o.waitDone(window);
    const result = window.result({ rssMb: peakRssMb(p.child.pid) });
    // A move ends by itself: how long after the last arrival it exits is part of what it costs.
    if (o.command?.[0] === 'move' && window.closedAt !== undefined) {
      const exited = await Promise.race([p.waitExit().then(() => Date.now()), sleep(30_000).then(() => undefined)]);
      if (exited !== undefined) result.exitAfterMs = exited - window.closedAt;
    }
    return result;
  } finally {
    // A profiled bridge must exit by itself to write its profile.
    await p.kill(process.env.BRIDGE_NODE_ARGS?.includes('-prof') ? 'SIGTERM' : 'SIGKILL');
    await deleteCacheKeys(keyPrefix);
  }
}

/** Removes what a bench bridge left in the duplicate-ID cache (its keys all start with its own prefix). */
export async function deleteCacheKeys(keyPrefix: string): Promise<void> {
  await deleteKeysUnder(process.env.REDIS_URL!, keyPrefix);
}

/**
 * Plain amqplib: consume (prefetch 1000) → confirm-publish → ack on confirm. `mandatory` as the bridge publishes: an
 * unroutable message comes back (basic.return) instead of being confirmed and lost. RabbitMQ 3.10's queue process then
 * sends its channel one more message per publish (send_mandatory), which the shovel (not mandatory: it confirms and
 * acks what its target cannot route) does not pay; the row without it shows what that costs in the whole loop (within
 * the spread of single rounds when measured, 2026-12-03; ~10% of the rate when publishing alone).
 */
export const amqpBaseline = (mandatory: boolean) => async (n: number): Promise<RunResult> => {
  const src = uniq('base-src');
  const dst = uniq('base-dst');
  await prefillAmqp(src, WARMUP + n, true, dst);
  const conn = await amqp.connect(process.env.AMQP_URL!);
  try {
    const inCh = await conn.createChannel();
    const outCh = await conn.createConfirmChannel();
    await inCh.prefetch(PREFETCH);
    let acked = 0;
    const window = new Window(n, ownCpuMs);
    const done = new Promise<void>((resolve) => {
      void inCh.consume(src, (m) => {
        if (!m) return;
        outCh.publish('', dst, m.content, { ...m.properties, persistent: true, mandatory }, (err) => {
          if (err) return;
          inCh.ack(m);
          if (window.count(++acked)) resolve();
        });
      });
    });
    await done;
    return window.result();
  } finally {
    await conn.close().catch(() => undefined);
    await deleteAmqpQueues(src, dst);
  }
};

/** Where RabbitMQ's management API is (RABBITMQ_MANAGEMENT_URL, default the local one), as a URL and its auth header. */
function management(): { base: string; auth: string } {
  const u = new URL(process.env.RABBITMQ_MANAGEMENT_URL ?? 'http://guest:guest@127.0.0.1:15672');
  const auth = `Basic ${Buffer.from(`${decodeURIComponent(u.username)}:${decodeURIComponent(u.password)}`).toString('base64')}`;
  u.username = '';
  u.password = '';
  return { base: u.toString().replace(/\/$/, ''), auth };
}

/** The vhost of AMQP_URL, for the management API's paths and the shovel's URIs. */
function vhost(): string {
  const path = new URL(process.env.AMQP_URL!).pathname;
  return path.length > 1 ? decodeURIComponent(path.slice(1)) : '/';
}

export async function shovelUnavailable(): Promise<string | undefined> {
  const { base, auth } = management();
  try {
    const r = await fetch(`${base}/api/parameters/shovel`, { headers: { authorization: auth }, signal: AbortSignal.timeout(5000) });
    if (r.ok) return undefined;
    return `the management API answered ${r.status} for shovel parameters (bash scripts/rabbitmq-plugins.sh enable turns on rabbitmq_shovel and rabbitmq_shovel_management on a local node)`;
  } catch (err) {
    return `RabbitMQ's management API is not reachable (${(err as Error).message}; set RABBITMQ_MANAGEMENT_URL)`;
  }
}

/**
 * RabbitMQ's own dynamic shovel, queue to queue, `ack-mode: on-confirm`, `src-prefetch-count` = the bridge's prefetch:
 * what an operator would use instead of this bridge. Forwarding counts as started when the shovel is created.
 */
export async function shovelBaseline(n: number): Promise<RunResult> {
  const src = uniq('shovel-src');
  const dst = uniq('shovel-dst');
  await prefillAmqp(src, WARMUP + n, true, dst);
  try {
    return await runShovel(src, dst, n, (window) => waitAmqpCount(dst, window));
  } finally {
    await deleteAmqpQueues(src, dst);
  }
}

/** Runs a dynamic shovel from `src` to `dst` until `waitDone` says the target holds the window's messages. */
export async function runShovel(
  src: string,
  dst: string,
  n: number,
  waitDone: (window: Window) => Promise<void>,
  more: Record<string, string | number> = {},
): Promise<RunResult> {
  const { base, auth } = management();
  const v = vhost();
  const uri = v === '/' ? 'amqp://' : `amqp:///${encodeURIComponent(v)}`;
  const path = `${base}/api/parameters/shovel/${encodeURIComponent(v)}/${encodeURIComponent(uniq('shovel'))}`;
  const value = {
    'src-protocol': 'amqp091',
    'src-uri': uri,
    'src-queue': src,
    'dest-protocol': 'amqp091',
    'dest-uri': uri,
    'dest-queue': dst,
    'ack-mode': 'on-confirm',
    'src-prefetch-count': PREFETCH,
    ...more,
  };
  try {
    const window = new Window(n);
    const r = await fetch(path, { method: 'PUT', headers: { authorization: auth, 'content-type': 'application/json' }, body: JSON.stringify({ value }) });
    if (!r.ok) throw new Error(`creating the shovel failed: ${r.status} ${await r.text()}`);
    await waitDone(window);
    return window.result();
  } finally {
    await fetch(path, { method: 'DELETE', headers: { authorization: auth } }).catch(() => undefined);
  }
}

export function amqpBridge(dedupe: boolean, withIds: boolean, redisYaml?: string[], cpus?: string, command?: readonly string[]) {
  return async (n: number): Promise<RunResult> => {
    const src = uniq('src');
    const dst = uniq('dst');
    await prefillAmqp(src, WARMUP + n, withIds, dst);
    try {
      return await runBridge(
        {
          sourceConnection: 'rabbit',
          sourceQueue: src,
          targetConnection: 'rabbit',
          targetQueue: dst,
          dedupe,
          ...(redisYaml ? { redisYaml } : {}),
          ...(cpus ? { cpus } : {}),
          ...(command ? { command } : {}),
          waitDone: (w) => waitAmqpCount(dst, w),
        },
        n,
      );
    } finally {
      await deleteAmqpQueues(src, dst);
    }
  };
}
