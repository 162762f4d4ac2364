/**
 * Many bridges in one process (issue 37): N AMQP→AMQP bridges on one RabbitMQ, each forwarding its own source queue to
 * one shared target queue, M messages each. Measured on the real `broker-bridge run`:
 * - start-up: from spawn to every bridge's 'bridge running', and to every message through (the target holds N × M);
 * - the connections the process holds, as RabbitMQ lists them (count and names, from the management API);
 * - peak RSS (VmHWM of the process), idle CPU (the process's CPU over `--idle-seconds` once everything is through);
 * - the heap and the messages in flight while the messages go through (/metrics every 500 ms), and from them the heap
 *   and the RSS per message in flight;
 * - reload of one bridge: its prefetch changed in the file, POST /reload timed to its answer, and the answer checked
 *   (that bridge changed, every other one unchanged).
 *
 *   node --import tsx bench/many-bridges.ts --bridges 1000 [--messages 20] [--idle-seconds 10] [--max-fds 800] [--sample-ms 500]
 *
 * `--sample-ms 0` reads no /metrics while the messages flow: a scrape of 1,000 bridges is ~127,000 lines, built in the
 * process as one string, and every 500 ms that is part of what the peak RSS measures.
 *
 * BRIDGE_CLI=<another build's dist/cli.js> runs that build instead (e.g. the commit before connections were shared). The
 * run uses a vhost of its own (created and deleted through the management API, RABBITMQ_MANAGEMENT_URL), so that the
 * connections it counts are the bridge's; it watches RabbitMQ's file descriptors and stops the bridge at once when more
 * than `--max-fds` are in use (RabbitMQ runs with 1,024 here and breaks when they run out). Redis: REDIS_URL, under a
 * key prefix of the run's own, deleted after.
 */
import { parseArgs } from 'node:util';
import { readFileSync, writeFileSync } from 'node:fs';
import amqp from 'amqplib';
import { BridgeProcess, writeConfig } from '../test/support/bridge-process.js';
import { RabbitAdmin } from '../test/faults/rabbit-admin.js';
import { cpuMs } from './process-cpu.js';
import { sleep } from '../test/support/wait.js';
import { deleteKeysUnder } from '../test/support/redis-keys.js';

const { values } = parseArgs({
  options: {
    bridges: { type: 'string', default: '100' },
    messages: { type: 'string', default: '20' },
    'idle-seconds': { type: 'string', default: '10' },
    'max-fds': { type: 'string', default: '800' },
    'sample-ms': { type: 'string', default: '500' },
    'keep-vhost': { type: 'boolean', default: false },
  },
});
const N = Number(values.bridges);
const M = Number(values.messages);
const idleSeconds = Number(values['idle-seconds']);
const maxFds = Number(values['max-fds']);
const sampleMs = Number(values['sample-ms']);
const amqpUrl = process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672';
const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const managementUrl = process.env.RABBITMQ_MANAGEMENT_URL ?? 'http://guest:guest@127.0.0.1:15672';

interface NodeStats {
  fd_used: number;
  fd_total: number;
  sockets_used: number;
}

async function nodeStats(): Promise<NodeStats | undefined> {
  const u = new URL(managementUrl);
  const auth = 'Basic ' + Buffer.from(`${decodeURIComponent(u.username || 'guest')}:${decodeURIComponent(u.password || 'guest')}`).toString('base64');
  const res = await fetch(`${u.origin}/api/nodes?columns=fd_used,fd_total,sockets_used`, { headers: { authorization: auth }, signal: AbortSignal.timeout(5000) }).catch(() => undefined);
  if (!res?.ok) return undefined;
  return ((await res.json()) as NodeStats[])[0];
}

/** VmHWM (the peak resident set) or VmRSS (now) of a process, MiB. */
function rssMiB(pid: number, field: 'VmHWM' | 'VmRSS'): number | undefined {
  try {
    const m = new RegExp(`${field}:\\s+(\\d+) kB`).exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Math.round(Number(m[1]) / 1024) : undefined;
  } catch {
    return undefined;
  }
}

function withVhost(url: string, vhost: string): string {
  const u = new URL(url);
  u.pathname = '/' + encodeURIComponent(vhost);
  return u.toString();
}

async function main(): Promise<void> {
  const runId = `many-${N}-${Date.now().toString(36)}`;
  const vhost = `bench-${runId}`;
  const admin = new RabbitAdmin(managementUrl);
  await admin.check();
  const before = await nodeStats();
  console.log(`many-bridges: ${N} bridges × ${M} messages; vhost ${vhost}; RabbitMQ fds in use before: ${before?.fd_used ?? '?'} of ${before?.fd_total ?? '?'}`);
  await admin.createVhost(vhost);
  const url = withVhost(amqpUrl, vhost);
  const keyPrefix = `bench-${runId}`;
  const adminToken = `bench-${runId}`;
  let bridge: BridgeProcess | undefined;
  let stopWatch = false;
  let tooMany: string | undefined;
  let watch: Promise<number> = Promise.resolve(0);
  try {
    // RabbitMQ's file descriptors, every half second: past max-fds the bridge is killed at once.
    watch = (async () => {
      let peak = 0;
      while (!stopWatch) {
        const s = await nodeStats();
        if (s) {
          peak = Math.max(peak, s.fd_used);
          if (s.fd_used > maxFds && !tooMany) {
            tooMany = `RabbitMQ had ${s.fd_used} file descriptors in use (more than ${maxFds}): the run was stopped`;
            console.log(tooMany);
            await bridge?.kill('SIGKILL');
          }
        }
        await sleep(500);
      }
      return peak;
    })();

    // Queues and messages: one harness connection.
    const conn = await amqp.connect(url, { clientProperties: { connection_name: 'faults-harness bench setup' } });
    const ch = await conn.createConfirmChannel();
    await ch.assertQueue('tgt', { durable: true });
    for (let i = 0; i < N; i++) {
      await ch.assertQueue(`src-${i}`, { durable: true });
      // Not persistent: a persistent message makes each of the N queues keep index files open, and N of those take
      // RabbitMQ's file descriptors here (1,000 queues: 890 of its 1,024). The bridge keeps the delivery mode.
      for (let j = 0; j < M; j++) ch.sendToQueue(`src-${i}`, Buffer.from(`bridge ${i} message ${j}`), { persistent: false });
      if (i % 100 === 99) await ch.waitForConfirms();
      if (tooMany) throw new Error(tooMany);
    }
    await ch.waitForConfirms();
    const ready = await nodeStats();
    if (ready && ready.fd_used > maxFds * 0.75) throw new Error(`RabbitMQ has ${ready.fd_used} file descriptors in use before the bridge starts: not starting it`);
    console.log(`queues and messages in place; RabbitMQ fds in use: ${ready?.fd_used ?? '?'}`);

    const lines = [
      'log-level: info',
      'shutdown-timeout: 10000',
      'http-port: 0',
      `admin-token: "${adminToken}"`,
      'connections:',
      `  rabbit: { type: amqp, url: "${url}" }`,
      'id-cache:',
      `  redis-url: "${redisUrl}"`,
      `  key-prefix: "${keyPrefix}"`,
      `  id-cache-size: ${Math.max(2000, N * 60)}`,
      'defaults:',
      '  prefetch: 50',
      'bridges:',
    ];
    for (let i = 0; i < N; i++) {
      lines.push(`  - name: b${i}`, `    source: { connection: rabbit, queue: "src-${i}" }`, '    target: { connection: rabbit, queue: "tgt" }');
    }
    // The bridge whose reload is timed carries a prefetch line of its own.
    lines.push('    prefetch: 50');
    const file = writeConfig(lines.join('\n') + '\n');

    const started = Date.now();
    bridge = BridgeProcess.start(file, { LOG_LEVEL: 'info' });
    // Counted as the lines come (BridgeProcess.waitForLog scans every line again on each one: too slow for thousands).
    const running = async (times: number, timeoutMs: number): Promise<void> => {
      let seen = 0;
      let scanned = 0;
      const deadline = Date.now() + timeoutMs;
      while (seen < times) {
        for (; scanned < bridge!.logs.length; scanned++) if (bridge!.logs[scanned]!.msg === 'bridge running') seen += 1;
        if (bridge!.child.exitCode !== null || bridge!.child.signalCode !== null) throw new Error(`the bridge exited: ${bridge!.stderr.join('').slice(-2000)}`);
        if (Date.now() > deadline) throw new Error(`${seen} of ${times} bridges running after ${timeoutMs} ms`);
        await sleep(20);
      }
    };
    await running(N, 300_000);
    const runningMs = Date.now() - started;
    const peakAtAllRunning = rssMiB(bridge.child.pid!, 'VmHWM');
    // Where the start-up time goes: the process's first log line, its connections, the first and last bridge running.
    const at = (pred: (l: { msg: string }) => boolean, last = false): number | undefined => {
      const hits = bridge!.logs.filter(pred);
      const t = (last ? hits.at(-1) : hits[0])?.time;
      return typeof t === 'number' ? t - started : undefined;
    };
    const timeline = {
      firstLogMs: at(() => true),
      connectionsOpenMs: bridge.logs.filter((l) => l.msg.startsWith('connection open')).map((l) => (l.time as number) - started),
      firstRunningMs: at((l) => l.msg === 'bridge running'),
      lastRunningMs: at((l) => l.msg === 'bridge running', true),
    };
    const total = N * M;
    let got = 0;
    const pid = bridge.child.pid!;
    const port = bridge.logs.find((l) => l.component === 'http' && typeof l.port === 'number')?.port as number;
    // While the messages go through: the heap and the messages in flight, from /metrics every 500 ms (a scrape of
    // 1,000 bridges' series costs the process CPU: not more often), for the heap per message in flight.
    const flow = { heapUsed: 0, heapTotal: 0, inFlight: 0, at: 0 };
    const sampleFlow = async (): Promise<void> => {
      const text = await fetch(`http://127.0.0.1:${port}/metrics`, { signal: AbortSignal.timeout(5000) }).then((r) => r.text(), () => '');
      const sum = (name: string): number => {
        let n = 0;
        for (const m of text.matchAll(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'gm'))) n += Number(m[1]);
        return n;
      };
      const inFlight = sum('bridge_in_flight_messages');
      flow.heapTotal = Math.max(flow.heapTotal, sum('nodejs_heap_size_total_bytes'));
      if (inFlight > flow.inFlight) flow.inFlight = inFlight;
      flow.heapUsed = Math.max(flow.heapUsed, sum('nodejs_heap_size_used_bytes'));
    };
    for (;;) {
      got = (await ch.checkQueue('tgt')).messageCount;
      if (got >= total || tooMany || Date.now() - started > 600_000) break;
      if (sampleMs > 0 && Date.now() - flow.at >= sampleMs) {
        flow.at = Date.now();
        await sampleFlow();
      }
      await sleep(50);
    }
    const throughMs = Date.now() - started;

    // Idle: every message through, nothing to do but the monitor ticks and heartbeats.
    await sleep(2000);
    const cpu0 = cpuMs(pid) ?? 0;
    await sleep(idleSeconds * 1000);
    const idleCpu = ((cpuMs(pid) ?? 0) - cpu0) / (idleSeconds * 1000);
    const idleRss = rssMiB(pid, 'VmRSS');
    // The process's own view of its memory at idle (prom-client's default metrics), MiB.
    const metricsText = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    const gauge = (name: string): number | undefined => {
      const m = new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'm').exec(metricsText);
      return m ? Math.round(Number(m[1]) / 1048576) : undefined;
    };
    const idleMemory = {
      heapTotal: gauge('nodejs_heap_size_total_bytes'),
      heapUsed: gauge('nodejs_heap_size_used_bytes'),
      external: gauge('nodejs_external_memory_bytes'),
    };
    const peakAfterRun = rssMiB(pid, 'VmHWM');
    // The management API lists a connection after its first stats emission (every 5 s): read once the idle time passed.
    await sleep(Math.max(0, 6000 - idleSeconds * 1000));
    const bridgeConnections = (await admin.connections(vhost)).filter((c) => !c.clientName.startsWith('faults-harness'));

    // Reload of one bridge: its prefetch changed.
    const text = readFileSync(file, 'utf8');
    const changedName = `b${N - 1}`;
    writeFileSync(file, text.replace(/ {4}prefetch: 50\n$/, '    prefetch: 40\n'));
    const t0 = Date.now();
    const logsBefore = bridge.logs.length;
    const res = await fetch(`http://127.0.0.1:${port}/reload`, { method: 'POST', headers: { authorization: `Bearer ${adminToken}` } });
    const reloadMs = Date.now() - t0;
    const outcome = (await res.json()) as { applied: boolean; changed?: string[]; unchanged?: string[] };
    const reloadOk = outcome.applied && outcome.changed?.length === 1 && outcome.changed[0] === changedName && outcome.unchanged?.length === N - 1;
    await running(N + 1, 60_000);
    // Where the reload's time went: the process's own lines from the request on (ms after it was sent), warnings summed.
    const reloadLines = bridge.logs.slice(logsBefore);
    const reloadTimeline = reloadLines
      .filter((l) => l.level < 40 || typeof l.file !== 'string')
      .slice(0, 12)
      .map((l) => `${typeof l.time === 'number' ? l.time - t0 : '?'} ms ${l.msg.slice(0, 100)}`);
    const reloadWarnings = reloadLines.filter((l) => l.level === 40 && typeof l.file === 'string').length;
    const after = await admin.connections(vhost);

    const rss = rssMiB(pid, 'VmHWM');
    const status = (await (await fetch(`http://127.0.0.1:${port}/bridges`)).json()) as { connections?: { name: string; channels?: number }[] };
    // Warnings and errors the bridge logged, by message (the start-up warnings of the file aside), the 5 most frequent.
    const trouble = new Map<string, number>();
    for (const l of bridge.logs) {
      if (l.level < 40 || typeof l.file === 'string') continue;
      const key = l.msg.replace(/\d+/g, 'N').slice(0, 160);
      trouble.set(key, (trouble.get(key) ?? 0) + 1);
    }
    await bridge.stop(30_000);
    stopWatch = true;
    const fdPeak = await watch;
    await conn.close();

    console.log(
      JSON.stringify(
        {
          bridges: N,
          messagesPerBridge: M,
          build: process.env.BRIDGE_CLI ?? 'this worktree',
          allThrough: got >= total,
          forwarded: got,
          startupToAllRunningMs: runningMs,
          timeline,
          startupToAllThroughMs: throughMs,
          connections: bridgeConnections.length,
          connectionNames: bridgeConnections.length <= 8 ? bridgeConnections.map((c) => c.clientName) : `${bridgeConnections.length} (not listed)`,
          channels: status.connections?.map((c) => ({ name: c.name, channels: c.channels })),
          peakRssMiB: rss,
          peakRssAtAllRunningMiB: peakAtAllRunning,
          peakRssBeforeReloadMiB: peakAfterRun,
          idleRssMiB: idleRss,
          idleMemoryMiB: idleMemory,
          // Sampled every 500 ms while the messages went through (so a lower bound of the true peaks).
          flowPeakHeapUsedMiB: Math.round(flow.heapUsed / 1048576),
          flowPeakHeapTotalMiB: Math.round(flow.heapTotal / 1048576),
          flowPeakInFlight: flow.inFlight,
          // Heap above the idle process's live heap, and the peak RSS above the RSS once all bridges ran, per message
          // in flight at the sampled peak.
          heapKiBPerMessageInFlight: flow.inFlight > 0 && idleMemory.heapUsed !== undefined ? Math.round(((flow.heapUsed / 1048576 - idleMemory.heapUsed) * 1024 / flow.inFlight) * 10) / 10 : undefined,
          rssKiBPerMessageInFlight: flow.inFlight > 0 && peakAfterRun !== undefined && peakAtAllRunning !== undefined ? Math.round(((peakAfterRun - peakAtAllRunning) * 1024 / flow.inFlight) * 10) / 10 : undefined,
          idleCpuPercentOfOneCore: Math.round(idleCpu * 1000) / 10,
          reloadOneBridgeMs: reloadMs,
          reloadAsExpected: reloadOk,
          reloadTimeline,
          reloadWarningLines: reloadWarnings,
          connectionsAfterReload: after.filter((c) => !c.clientName.startsWith('faults-harness')).length,
          rabbitFdsPeak: fdPeak,
          warnings: Object.fromEntries([...trouble.entries()].sort((a, b) => b[1] - a[1]).slice(0, 5)),
          ...(tooMany ? { aborted: tooMany } : {}),
        },
        null,
        2,
      ),
    );
  } finally {
    stopWatch = true;
    await bridge?.kill('SIGKILL');
    if (!values['keep-vhost']) await admin.deleteVhost(vhost);
    await deleteKeysUnder(redisUrl, keyPrefix);
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
