/**
 * The heap of N idle AMQP→AMQP bridges (issue 47, item 4): starts `broker-bridge run` with N bridges on empty source
 * queues (a vhost of the run's own, the cache on REDIS_URL under a prefix of its own), waits until every bridge runs and
 * `--idle-seconds` more (with `--messages M`: M messages per source queue, published first, all through first), reads the process's heap (/metrics) and RSS, and with `--snapshot DIR` has it write a heap
 * snapshot there (SIGUSR2, --heapsnapshot-signal) for bench/heap-summary.mjs.
 *
 *   node --import tsx bench/idle-heap.ts --bridges 1000 [--messages 20] [--idle-seconds 10] [--snapshot /tmp/heap]
 *
 * BRIDGE_CLI=<another build's dist/cli.js> runs that build instead.
 */
import { parseArgs } from 'node:util';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import amqp from 'amqplib';
import { BridgeProcess, writeConfig } from '../test/support/bridge-process.js';
import { RabbitAdmin } from '../test/faults/rabbit-admin.js';
import { sleep } from '../test/support/wait.js';
import { deleteKeysUnder } from '../test/support/redis-keys.js';

const { values } = parseArgs({
  options: {
    bridges: { type: 'string', default: '300' },
    messages: { type: 'string', default: '0' },
    'idle-seconds': { type: 'string', default: '10' },
    snapshot: { type: 'string' },
    // 'running': the snapshot is taken as soon as every bridge runs (with --messages, while they are in flight).
    'snapshot-at': { type: 'string', default: 'idle' },
  },
});
const N = Number(values.bridges);
const M = Number(values.messages);
const idleSeconds = Number(values['idle-seconds']);
const amqpUrl = process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672';
const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const managementUrl = process.env.RABBITMQ_MANAGEMENT_URL ?? 'http://guest:guest@127.0.0.1:15672';

function rssMiB(pid: number, field: 'VmHWM' | 'VmRSS'): number | undefined {
  const m = new RegExp(`${field}:\\s+(\\d+) kB`).exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Math.round(Number(m[1]) / 1024) : undefined;
}

/** Has the process write a heap snapshot into `dir` (it runs with --heapsnapshot-signal=SIGUSR2) and waits for it. */
async function snapshot(pid: number, dir: string): Promise<string | undefined> {
  const before = new Set(readdirSync(dir));
  process.kill(pid, 'SIGUSR2');
  for (let i = 0; i < 600; i++) {
    await sleep(500);
    const fresh = readdirSync(dir).filter((f) => !before.has(f) && f.endsWith('.heapsnapshot'));
    if (fresh.length === 0) continue;
    // Written once the file stops growing.
    const size = (): number => statSync(`${dir}/${fresh[0]}`).size;
    const a = size();
    await sleep(2000);
    if (a > 0 && a === size()) return `${dir}/${fresh[0]}`;
  }
  return undefined;
}

async function main(): Promise<void> {
  const runId = `idle-${N}-${Date.now().toString(36)}`;
  const vhost = `bench-${runId}`;
  const admin = new RabbitAdmin(managementUrl);
  await admin.check();
  await admin.createVhost(vhost);
  const u = new URL(amqpUrl);
  u.pathname = '/' + encodeURIComponent(vhost);
  const keyPrefix = `bench-${runId}`;
  let bridge: BridgeProcess | undefined;
  try {
    const conn = await amqp.connect(u.toString(), { clientProperties: { connection_name: 'faults-harness bench setup' } });
    const ch = await conn.createChannel();
    await ch.assertQueue('tgt', { durable: true });
    for (let i = 0; i < N; i++) {
      await ch.assertQueue(`src-${i}`, { durable: true });
      for (let j = 0; j < M; j++) ch.sendToQueue(`src-${i}`, Buffer.from(`bridge ${i} message ${j}`), { persistent: false });
    }
    await ch.checkQueue('tgt');
    const lines = [
      'log-level: info',
      'http-port: 0',
      'connections:',
      `  rabbit: { type: amqp, url: "${u.toString()}" }`,
      'id-cache:',
      `  redis-url: "${redisUrl}"`,
      `  key-prefix: "${keyPrefix}"`,
      'defaults:',
      '  prefetch: 50',
      'bridges:',
    ];
    for (let i = 0; i < N; i++) lines.push(`  - name: b${i}`, `    source: { connection: rabbit, queue: "src-${i}" }`, '    target: { connection: rabbit, queue: "tgt" }');
    const file = writeConfig(lines.join('\n') + '\n');
    const nodeArgs = values.snapshot ? `--heapsnapshot-signal=SIGUSR2 --diagnostic-dir=${values.snapshot}` : '';
    const started = Date.now();
    bridge = BridgeProcess.start(file, { LOG_LEVEL: 'info', BRIDGE_NODE_ARGS: [process.env.BRIDGE_NODE_ARGS ?? '', nodeArgs].join(' ') });
    let seen = 0;
    let scanned = 0;
    while (seen < N) {
      for (; scanned < bridge.logs.length; scanned++) if (bridge.logs[scanned]!.msg === 'bridge running') seen += 1;
      if (bridge.child.exitCode !== null) throw new Error(`the bridge exited: ${bridge.stderr.join('').slice(-2000)}`);
      if (Date.now() - started > 300_000) throw new Error(`${seen} of ${N} running after 300 s`);
      await sleep(20);
    }
    const runningMs = Date.now() - started;
    const pid = bridge.child.pid!;
    const rssAtAllRunning = rssMiB(pid, 'VmRSS');
    const peakAtAllRunning = rssMiB(pid, 'VmHWM');
    const early = values.snapshot && values['snapshot-at'] === 'running' ? await snapshot(pid, values.snapshot) : undefined;
    while ((await ch.checkQueue('tgt')).messageCount < N * M) {
      if (Date.now() - started > 600_000) throw new Error('not every message went through in 600 s');
      await sleep(100);
    }
    const throughMs = Date.now() - started;
    await conn.close();
    await sleep(idleSeconds * 1000);
    const port = bridge.logs.find((l) => l.component === 'http' && typeof l.port === 'number')?.port as number;
    const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    const gauge = (name: string): number | undefined => {
      const m = new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'm').exec(text);
      return m ? Math.round(Number(m[1]) / 1048576) : undefined;
    };
    const result: Record<string, unknown> = {
      bridges: N,
      build: process.env.BRIDGE_CLI ?? 'this worktree',
      allRunningMs: runningMs,
      rssAtAllRunningMiB: rssAtAllRunning,
      peakRssAtAllRunningMiB: peakAtAllRunning,
      messages: N * M,
      allThroughMs: throughMs,
      peakRssMiB: rssMiB(pid, 'VmHWM'),
      idleRssMiB: rssMiB(pid, 'VmRSS'),
      idleHeapUsedMiB: gauge('nodejs_heap_size_used_bytes'),
      idleHeapTotalMiB: gauge('nodejs_heap_size_total_bytes'),
      metricsLines: text.split('\n').length,
      ...(early ? { snapshotAtAllRunning: early } : {}),
    };
    if (values.snapshot && values['snapshot-at'] === 'idle') result.snapshot = await snapshot(pid, values.snapshot);
    console.log(JSON.stringify(result, null, 2));
    await bridge.stop(30_000);
  } finally {
    await bridge?.kill('SIGKILL');
    await admin.deleteVhost(vhost);
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
