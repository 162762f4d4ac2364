/**
 * `npm run bench`: throughput of the bridge next to plain-client baselines, measured side by side in the same run
 * (these machines are shared and noisy: only ratios within one run mean anything).
 *
 * Every scenario pre-fills a source queue with WARMUP + N persistent 1 KiB messages, then drains it through the path
 * under test. It reports msgs/s over the last N, from the moment the target holds WARMUP until it holds all: the
 * steady state of a running service (bench/window.ts says why), and next to it the rate from the start, warm-up
 * included. Scenarios are interleaved over several rounds and the median is reported. The bridge runs as the real
 * `broker-bridge run` process.
 *
 * Environment: AMQP_URL, REDIS_URL, STOMP_URL, NATS_URL (defaults: the local services), BENCH_MESSAGES (N, default 20000),
 * BENCH_WARMUP (default 10000), BENCH_ROUNDS (default 3), BENCH_ONLY (scenario or group names, separated by ';':
 * names contain commas), BENCH_PREFETCH (the bridges' and baselines' prefetch and the shovel's src-prefetch-count,
 * default 1000).
 *
 * To compare two builds side by side, set BRIDGE_CLI to the other build's dist/cli.js (e.g. a `git worktree` of an
 * older commit, built there) and run the scenarios once with and once without it, alternating.
 *
 * Besides msgs/s it reports the client's CPU time per message, with its system (kernel) part: the bench process's own
 * for the plain-client baselines, the bridge process's for the bridge; and the CPU per message of RabbitMQ, Redis and
 * ActiveMQ, all over the same measured window (bench/process-cpu.ts). On a machine the brokers share, CPU is what
 * throughput is bought with. RabbitMQ's own dynamic shovel (management API + rabbitmq_shovel) is a baseline of its own: the
 * AMQP→AMQP rows say how fast they are next to it.
 */
import { scenarios } from './scenarios.js';
import { ROLES, processCpu, type Role } from './process-cpu.js';
import { redisCalls } from './redis-calls.js';
import { formatTable, median } from './report.js';
import { WARMUP } from './window.js';

process.env.AMQP_URL ??= 'amqp://guest:guest@127.0.0.1:5672';
process.env.REDIS_URL ??= 'redis://127.0.0.1:6379';
process.env.STOMP_URL ??= 'stomp://127.0.0.1:61613';

const N = Number(process.env.BENCH_MESSAGES ?? 20000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const only = process.env.BENCH_ONLY?.split(';').map((s) => s.trim());

async function main(): Promise<void> {
  const wanted = scenarios.filter((s) => !only || only.includes(s.name) || only.includes(s.group));
  const chosen: typeof wanted = [];
  console.log(
    `broker-bridge bench: ${N} persistent 1 KiB messages measured per scenario after ${WARMUP} of warm-up, ${ROUNDS} rounds, node ${process.version}`,
  );
  for (const s of wanted) {
    const why = s.skip?.() ? 'skipped' : await s.unavailable?.();
    if (why === undefined) chosen.push(s);
    else console.log(`  left out: ${s.name}: ${why}`);
  }
  const results = new Map<string, { rates: number[]; fromStart: number[]; rssMb: number[]; exitMs: number[]; cpu: number[]; sys: number[]; calls: number[]; scriptUs: number[]; brokers: Partial<Record<Role, number[]>> }>();
  for (let round = 1; round <= ROUNDS; round++) {
    for (const s of chosen) {
      const r = await s.run(N);
      const brokers = processCpu.take(N);
      const scripts = await redisCalls.take(N);
      const entry = results.get(s.name) ?? { rates: [], fromStart: [], rssMb: [], exitMs: [], cpu: [], sys: [], calls: [], scriptUs: [], brokers: {} };
      // Scenarios without the cache make no script calls: their 0 would only fill the column.
      if (scripts !== undefined && scripts.callsPerMsg > 0) {
        entry.calls.push(scripts.callsPerMsg);
        entry.scriptUs.push(scripts.scriptUsPerMsg);
      }
      entry.rates.push(r.rate);
      entry.fromStart.push(r.fromStart);
      if (r.rssMb !== undefined) entry.rssMb.push(r.rssMb);
      if (r.exitAfterMs !== undefined) entry.exitMs.push(r.exitAfterMs);
      if (r.cpuUsPerMsg !== undefined) entry.cpu.push(r.cpuUsPerMsg);
      if (r.sysUsPerMsg !== undefined) entry.sys.push(r.sysUsPerMsg);
      for (const role of ROLES) if (brokers[role] !== undefined) (entry.brokers[role] ??= []).push(brokers[role]);
      results.set(s.name, entry);
      const sys = r.sysUsPerMsg !== undefined ? ` (system ${r.sysUsPerMsg.toFixed(0)})` : '';
      const cpu = r.cpuUsPerMsg !== undefined ? `  CPU ${r.cpuUsPerMsg.toFixed(0)} µs/msg${sys}` : '';
      const others = ROLES.filter((role) => brokers[role] !== undefined).map((role) => ` ${role} ${brokers[role]!.toFixed(0)}`).join('');
      const calls = scripts !== undefined && scripts.callsPerMsg > 0 ? `  Redis scripts ${scripts.callsPerMsg.toFixed(3)} calls/msg, ${scripts.scriptUsPerMsg.toFixed(1)} µs/msg` : '';
      console.log(`  round ${round} ${s.name.padEnd(34)} ${Math.round(r.rate).toString().padStart(7)} msgs/s (from start ${Math.round(r.fromStart)})${cpu}${others ? `  (µs/msg:${others})` : ''}${calls}${r.rssMb !== undefined ? `  peak RSS ${r.rssMb.toFixed(0)} MiB` : ''}${r.exitAfterMs !== undefined ? `  exit ${r.exitAfterMs} ms after the last arrival` : ''}`);
    }
  }
  const rows = chosen
    .filter((s) => results.has(s.name))
    .map((s) => {
      const r = results.get(s.name)!;
      const rate = median(r.rates);
      const base = s.baseline ? median(results.get(s.baseline)?.rates ?? []) : undefined;
      const versus = s.versus ? median(results.get(s.versus)?.rates ?? []) : undefined;
      const off = s.detectionOff ? median(results.get(s.detectionOff)?.rates ?? []) : undefined;
      const row: Record<string, string | number> = {
        group: s.group,
        scenario: s.name,
        'msgs/s (median)': Math.round(rate),
        ratio: base ? `${(rate / base).toFixed(2)}× ${s.baseline}` : '—',
        '× shovel': versus ? `${(rate / versus).toFixed(2)}×` : '—',
        '× dedupe off': off ? `${(rate / off).toFixed(2)}×` : '—',
        'from start msgs/s': Math.round(median(r.fromStart)),
        'client CPU µs/msg': r.cpu.length ? median(r.cpu).toFixed(0) : '—',
        // The kernel's part of it: on loopback a send also pays the receiver's side of the network stack.
        'of it system': r.sys.length ? median(r.sys).toFixed(0) : '—',
      };
      // CPU per message of the other processes on the machine: the 2 cores are shared, so this is what the rate costs.
      for (const role of ROLES) row[`${role} µs/msg`] = r.brokers[role]?.length ? median(r.brokers[role]).toFixed(0) : '—';
      row['Redis script calls/msg'] = r.calls.length ? median(r.calls).toFixed(3) : '—';
      row['Redis script µs/msg'] = r.scriptUs.length ? median(r.scriptUs).toFixed(1) : '—';
      row['peak RSS MiB'] = r.rssMb.length ? median(r.rssMb).toFixed(0) : '—';
      // `move`: from the last message's arrival at the target to the process's exit.
      row['exit after last arrival ms'] = r.exitMs.length ? median(r.exitMs).toFixed(0) : '—';
      return row;
    });
  console.log('');
  console.log(formatTable(rows));
  for (const s of chosen) {
    if (!s.latency) continue;
    const l = await s.latency();
    console.log(`latency ${s.name}: p50 ${l.p50.toFixed(1)} ms, p99 ${l.p99.toFixed(1)} ms (one message at a time, ${l.count} messages)`);
  }
}

main().then(
  async () => {
    await redisCalls.close();
    process.exit(0);
  },
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
