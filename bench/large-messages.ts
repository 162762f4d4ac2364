/**
 * Large messages behind the defaults (issue 47 item 4): one AMQP→AMQP bridge with the default prefetch and
 * max-in-flight-bytes forwards `--messages` bodies of `--size` bytes from a source queue of the run's own to a target
 * queue of its own. Measured on the real `broker-bridge run`, every 100 ms: the process's VmRSS and (from its /metrics)
 * heap used, heap total, external memory and the messages and body bytes in flight; reported: peak RSS (VmHWM), the
 * peaks of the rest, and the peak RSS and heap above the idle process's, divided by the peak messages in flight.
 *
 *   node --import tsx bench/large-messages.ts [--messages 1500] [--size 1048576] [--rounds 2] \
 *     [--build before=/path/to/other/dist/cli.js] [--build after=dist/cli.js] [--env NAME=VALUE] [--setting key=value]
 *
 * --env: for the bridge process (e.g. NODE_OPTIONS=--max-old-space-size=256); --setting: a line of the bridge's own
 * (e.g. max-in-flight-bytes=16777216). Builds given more than once run interleaved, round by round (the same machine noise for each). Non-persistent
 * messages (the bridge keeps the delivery mode; the disk is not what is measured). Redis: REDIS_URL, under a key
 * prefix of the run's own, deleted after; RabbitMQ: AMQP_URL, the queues deleted after each round.
 */
import { parseArgs } from 'node:util';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import amqp from 'amqplib';
import { BridgeProcess, CLI, writeConfig } from '../test/support/bridge-process.js';
import { sleep } from '../test/support/wait.js';
import { deleteKeysUnder } from '../test/support/redis-keys.js';

const { values } = parseArgs({
  options: {
    messages: { type: 'string', default: '1500' },
    size: { type: 'string', default: String(1024 * 1024) },
    rounds: { type: 'string', default: '1' },
    build: { type: 'string', multiple: true },
    env: { type: 'string', multiple: true },
    setting: { type: 'string', multiple: true },
  },
});
const N = Number(values.messages);
const SIZE = Number(values.size);
const rounds = Number(values.rounds);
const builds = (values.build ?? [`this=${CLI}`]).map((b) => {
  const at = b.indexOf('=');
  return { name: b.slice(0, at), cli: resolve(b.slice(at + 1)) };
});
/** Extra environment for the bridge process, NAME=VALUE (e.g. NODE_OPTIONS=--max-old-space-size=256). */
const extraEnv = Object.fromEntries((values.env ?? []).map((e) => [e.slice(0, e.indexOf('=')), e.slice(e.indexOf('=') + 1)]));
const amqpUrl = process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672';
const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const MiB = 1024 * 1024;

function status(pid: number, field: 'VmHWM' | 'VmRSS'): number | undefined {
  try {
    const m = new RegExp(`${field}:\\s+(\\d+) kB`).exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) * 1024 : undefined;
  } catch {
    return undefined;
  }
}

interface Sample {
  rss: number;
  heapUsed: number;
  heapTotal: number;
  external: number;
  inFlight: number;
  inFlightBytes: number;
}

async function sample(pid: number, port: number): Promise<Sample | undefined> {
  const text = await fetch(`http://127.0.0.1:${port}/metrics`, { signal: AbortSignal.timeout(2000) }).then((r) => r.text(), () => undefined);
  if (text === undefined) return undefined;
  const sum = (name: string): number => {
    let total = 0;
    for (const m of text.matchAll(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'gm'))) total += Number(m[1]);
    return total;
  };
  return {
    rss: status(pid, 'VmRSS') ?? 0,
    heapUsed: sum('nodejs_heap_size_used_bytes'),
    heapTotal: sum('nodejs_heap_size_total_bytes'),
    external: sum('nodejs_external_memory_bytes'),
    inFlight: sum('bridge_in_flight_messages'),
    inFlightBytes: sum('bridge_in_flight_bytes'),
  };
}

async function round(build: { name: string; cli: string }, r: number): Promise<Record<string, unknown>> {
  const runId = `large-${build.name}-${r}-${Date.now().toString(36)}`;
  const src = `bench-${runId}-src`;
  const tgt = `bench-${runId}-tgt`;
  const conn = await amqp.connect(amqpUrl, { clientProperties: { connection_name: `bench ${runId}` } });
  const ch = await conn.createConfirmChannel();
  let bridge: BridgeProcess | undefined;
  try {
    await ch.assertQueue(src, { durable: true });
    await ch.assertQueue(tgt, { durable: true });
    const file = writeConfig(
      [
        'log-level: info',
        'http-port: 0',
        'connections:',
        `  rabbit: { type: amqp, url: "${amqpUrl}" }`,
        'id-cache:',
        `  redis-url: "${redisUrl}"`,
        `  key-prefix: "bench-${runId}"`,
        'bridges:',
        `  - name: large`,
        `    source: { connection: rabbit, queue: "${src}" }`,
        `    target: { connection: rabbit, queue: "${tgt}" }`,
        ...(values.setting ?? []).map((kv) => `    ${kv.replace('=', ': ')}`),
      ].join('\n') + '\n',
    );
    process.env.BRIDGE_CLI = build.cli;
    const startBridge = async (): Promise<{ b: BridgeProcess; port: number; pid: number }> => {
      const b = BridgeProcess.start(file, extraEnv);
      bridge = b;
      await b.waitForLog((l) => l.msg === 'bridge running', 30_000);
      const port = b.logs.find((l) => l.component === 'http' && typeof l.port === 'number')?.port as number;
      return { b, port, pid: b.child.pid! };
    };
    // The baseline: the same build with the same configuration, running with nothing to forward (2 s after start).
    const idle = await startBridge();
    await sleep(2000);
    const base = (await sample(idle.pid, idle.port)) ?? { rss: 0, heapUsed: 0, external: 0 };
    await idle.b.stop(30_000);

    const body = Buffer.alloc(SIZE, 0x61);
    for (let i = 0; i < N; i++) {
      ch.sendToQueue(src, body, { persistent: false, messageId: `${runId}-${i}` });
      if (i % 50 === 49) await ch.waitForConfirms();
    }
    await ch.waitForConfirms();

    const started = Date.now();
    const { b, port, pid } = await startBridge();
    const peak: Sample = { rss: 0, heapUsed: 0, heapTotal: 0, external: 0, inFlight: 0, inFlightBytes: 0 };
    let got = 0;
    for (;;) {
      const s = await sample(pid, port);
      if (s) for (const k of Object.keys(peak) as (keyof Sample)[]) peak[k] = Math.max(peak[k], s[k]);
      got = (await ch.checkQueue(tgt)).messageCount;
      if (got >= N || Date.now() - started > 600_000) break;
      if (b.child.exitCode !== null) throw new Error(`the bridge exited (${b.child.exitCode}): ${b.stderr.join('').slice(-2000)}`);
      await sleep(100);
    }
    const seconds = (Date.now() - started) / 1000;
    const hwm = status(pid, 'VmHWM') ?? 0;
    await b.stop(30_000);
    const per = (v: number): number => (peak.inFlight > 0 ? Math.round((v / peak.inFlight / 1024) * 10) / 10 : 0);
    return {
      build: build.name,
      round: r,
      forwarded: got,
      seconds: Math.round(seconds * 10) / 10,
      peakRssMiB: Math.round(hwm / MiB),
      idleRssMiB: Math.round(base.rss / MiB),
      idleHeapUsedMiB: Math.round(base.heapUsed / MiB),
      idleExternalMiB: Math.round(base.external / MiB),
      peakHeapUsedMiB: Math.round(peak.heapUsed / MiB),
      peakHeapTotalMiB: Math.round(peak.heapTotal / MiB),
      peakExternalMiB: Math.round(peak.external / MiB),
      peakInFlight: peak.inFlight,
      peakInFlightMiB: Math.round(peak.inFlightBytes / MiB),
      rssKiBPerMessageInFlight: per(hwm - base.rss),
      // Heap: what the process holds per message besides its body (a negative figure: less than the idle process's
      // heap before its first full collection, i.e. nothing measurable). External: the bodies and their copies.
      heapKiBPerMessageInFlight: per(peak.heapUsed - base.heapUsed),
      externalKiBPerMessageInFlight: per(peak.external - base.external),
    };
  } finally {
    await bridge?.kill('SIGKILL');
    await ch.deleteQueue(src).catch(() => undefined);
    await ch.deleteQueue(tgt).catch(() => undefined);
    await conn.close().catch(() => undefined);
    await deleteKeysUnder(redisUrl, `bench-${runId}`);
  }
}

async function main(): Promise<void> {
  console.log(`large-messages: ${N} × ${SIZE} bytes, AMQP→AMQP, default prefetch and max-in-flight-bytes; builds ${builds.map((b) => b.name).join(', ')}`);
  const results: Record<string, unknown>[] = [];
  for (let r = 1; r <= rounds; r++) {
    for (const build of builds) {
      const res = await round(build, r);
      console.log(JSON.stringify(res));
      results.push(res);
    }
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
