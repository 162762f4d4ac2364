/**
 * A measurement, not the product: what a leaner key layout of the duplicate-ID cache would cost Redis per ID, beside
 * today's (issue 23, lever 2). Today each ID touches the `at` and `res` hashes and the `res-exp` sorted set besides the
 * circular `ids` set: 12 field operations per ID for a reserve and a commit. Layout B (./reserve-b.lua,
 * ./commit-b.lua) keeps one hash per address (id → `c<commit time>` once recorded, `r<token>|<expiry>|<flag>` while
 * reserved) beside `ids`, and finds abandoned reservations with a bounded HSCAN instead of a sorted set: 7 field
 * operations per ID. The prototype leaves out what the product's scripts must also do (the epoch guard's checks beyond
 * its cost, id-cache-ttl, another owner's live reservation at commit, bad arguments), so it bounds the gain from
 * above; its figures, and what adopting it would take (new key names, mixed versions), are in docs/measurements.md.
 *
 *   redis-server --port 6410 --bind 127.0.0.1 --save '' --appendonly no --daemonize yes
 *   node --import tsx bench/prototypes/layout-b/compare.ts --port 6410 --burst 100 --rounds 5
 *
 * Alternates the two layouts round by round (20,000 IDs per pass, each reserved then committed in bursts, after a
 * first pass that fills the address to id-cache-size 2000), and prints the median script time (INFO commandstats) and
 * server CPU (schedstat) per ID of each. It FLUSHALLs that Redis between rounds: never point it at a shared one.
 */
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { RedisIdCache } from '../../../src/cache/redis-id-cache.js';
import { packPairs } from '../../../src/cache/address-batcher.js';
import { threadsCpuUs } from '../../process-cpu.js';
import { scriptStats } from '../../redis-calls.js';
import { median } from '../../report.js';

const { values } = parseArgs({
  options: { port: { type: 'string', default: '6410' }, burst: { type: 'string', default: '100' }, rounds: { type: 'string', default: '5' } },
});
const port = Number(values.port);
const BURST = Number(values.burst);
const ROUNDS = Number(values.rounds);
const N = 20_000;

const admin = new Redis({ port, host: '127.0.0.1' });
const raw = new Redis({ port, host: '127.0.0.1' });
// Today's scripts start with the epoch guard (an INFO and a GET); layout B pays the same, for a fair comparison.
const guard = "local server = string.match(redis.call('INFO', 'server'), 'run_id:(%x+)') or '?'\nlocal epoch = redis.call('GET', KEYS[1]) or ''\ntable.remove(KEYS, 1)\n";
raw.defineCommand('reserveB', { lua: guard + readFileSync(new URL('./reserve-b.lua', import.meta.url), 'utf8'), numberOfKeys: 5 });
raw.defineCommand('commitB', { lua: guard + readFileSync(new URL('./commit-b.lua', import.meta.url), 'utf8'), numberOfKeys: 5 });
const scripts = raw as unknown as Record<'reserveB' | 'commitB', (...args: (string | number | Buffer)[]) => Promise<unknown>>;

const pid = Number(/process_id:(\d+)/.exec(await admin.info('server'))?.[1]);

const burst = (d: number) => Array.from({ length: BURST }, () => ({ id: randomUUID(), token: `tk.${d}` }));

/** Script µs and server CPU µs per ID over the second of two passes. */
async function measure(pass: () => Promise<void>): Promise<[number, number]> {
  await pass();
  const u0 = (await scriptStats(admin)).usec;
  const c0 = threadsCpuUs(pid);
  await pass();
  const c1 = threadsCpuUs(pid);
  const u1 = (await scriptStats(admin)).usec;
  return [(u1 - u0) / N, (c1 - c0) / N];
}

async function today(): Promise<[number, number]> {
  const cache = new RedisIdCache({ url: `redis://127.0.0.1:${port}`, keyPrefix: `today-${randomUUID().slice(0, 6)}`, size: 2000, lease: 30_000 });
  try {
    return await measure(async () => {
      for (let d = 0; d < N; d += BURST) {
        const b = burst(d);
        await Promise.all(b.map((m) => cache.reserve('address', m.id, m.token)));
        await Promise.all(b.map((m) => cache.commit('address', m.id, m.token)));
      }
    });
  } finally {
    await cache.close();
  }
}

async function layoutB(): Promise<[number, number]> {
  const p = `b-${randomUUID().slice(0, 6)}:{address}`;
  const keys = [`${p}:epoch`, `${p}:st`, `${p}:ids`, `${p}:uncertain`];
  return measure(async () => {
    for (let d = 0; d < N; d += BURST) {
      const b = burst(d);
      const out = await scripts.reserveB(...keys, `${p}:cursor`, 30_000, 0, 60_000, 1000, ...packPairs(b));
      if (String(out) !== 'R'.repeat(BURST)) throw new Error(`layout B reserved ${String(out)}`);
      await scripts.commitB(...keys, `${p}:seq`, 2000, 0, ...packPairs(b));
    }
  });
}

const results: Record<'today' | 'layout B', [number, number][]> = { today: [], 'layout B': [] };
for (let r = 0; r < ROUNDS; r++) {
  results.today.push(await today());
  results['layout B'].push(await layoutB());
  await admin.flushall();
}
console.log(`Redis per ID (reserve + commit), ${N} IDs in bursts of ${BURST}, ${ROUNDS} alternating rounds: medians, µs`);
for (const [name, rs] of Object.entries(results)) {
  console.log(
    `${name.padEnd(9)} script ${median(rs.map((r) => r[0])).toFixed(2)}  server CPU ${median(rs.map((r) => r[1])).toFixed(2)}  [${rs.map((r) => `${r[0].toFixed(1)}/${r[1].toFixed(1)}`).join(' ')}]`,
  );
}
await admin.quit();
await raw.quit();
