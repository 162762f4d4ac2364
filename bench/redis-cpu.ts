/**
 * Redis's own CPU per duplicate ID, measured without brokers: drives RedisIdCache directly (reserve, commit, and for
 * stamped IDs the stamp record before and the forget after) against a Redis of its own, and reads what Redis spent
 * from `INFO commandstats` (EVAL/EVALSHA usec and calls, per script: each phase of a burst is bracketed by a read) and
 * from the server's /proc CPU over a pass without those reads. Shared brokers' load does not enter either figure,
 * so it can be taken while others run tests.
 *
 *   redis-server --port 6410 --bind 127.0.0.1 --save '' --appendonly no --daemonize yes
 *   node --import tsx bench/redis-cpu.ts --port 6410 --ids 20000 --burst 100 --rounds 5
 *   redis-cli -p 6410 shutdown nosave
 * (Not 6390/6391, which the fault suite uses, nor 6395-6399, redis-durability.test.ts's.) It FLUSHALLs that Redis
 * between rounds: never point it at a shared one.
 *
 * The shape is the session's (src/core/session/): the IDs of one burst of deliveries are reserved in one tick (one
 * script call per address, src/cache/address-batcher.ts), their commits go together once confirmed, and for stamped IDs
 * the stamp records of the burst go before the reserves and the forgets after the acks. The bench's id-cache-size
 * (2000) and lease (30 s) are used, so past the first 2,000 IDs every commit also evicts.
 */
import { randomBytes, randomUUID, createHash } from 'node:crypto';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { RedisIdCache } from '../src/cache/redis-id-cache.js';
import { threadsCpuUs } from './process-cpu.js';
import { scriptStats, type ScriptStats } from './redis-calls.js';
import { median } from './report.js';

const { values } = parseArgs({
  options: {
    port: { type: 'string', default: '6410' },
    ids: { type: 'string', default: '20000' },
    burst: { type: 'string', default: '100' },
    rounds: { type: 'string', default: '5' },
    mode: { type: 'string', default: 'both' },
  },
});
const port = Number(values.port);
const N = Number(values.ids);
const BURST = Number(values.burst);
const ROUNDS = Number(values.rounds);
const modes = values.mode === 'both' ? (['header', 'stamped'] as const) : ([values.mode] as ('header' | 'stamped')[]);

type Phase = 'record' | 'reserve' | 'commit' | 'forget';
const admin = new Redis({ port, host: '127.0.0.1', lazyConnect: false });

/** EVAL + EVALSHA calls and usec so far. */
const evalStats = (): Promise<ScriptStats> => scriptStats(admin);

/** CPU of every thread of the Redis server so far, µs. */
const serverCpuUs = threadsCpuUs;

interface PhaseStat {
  /** Script calls (EVAL + EVALSHA). */
  calls: number;
  /** Script time as commandstats counts it (wall time inside the command: it grows when the server is descheduled). */
  usec: number;
  /** Server CPU (every thread, schedstat) while the phase ran: scripts, parsing, replies, networking. */
  cpuUs: number;
  /**
   * This process's CPU while the phase ran: the cache client's side (RedisIdCache, ioredis, the socket's system calls),
   * what the bridge pays per ID besides the session's own work.
   */
  clientUs: number;
}

/** This process's CPU time so far, µs. */
function clientCpuUs(): number {
  const u = process.cpuUsage();
  return u.user + u.system;
}

async function pass(cache: RedisIdCache, mode: 'header' | 'stamped', pid: number): Promise<Record<Phase, PhaseStat>> {
  const zero = (): PhaseStat => ({ calls: 0, usec: 0, cpuUs: 0, clientUs: 0 });
  const perPhase: Record<Phase, PhaseStat> = { record: zero(), reserve: zero(), commit: zero(), forget: zero() };
  const address = `target-${randomUUID()}`;
  const source = `source-${randomUUID()}`;
  let stats = await evalStats();
  let cpu = serverCpuUs(pid);
  let client = clientCpuUs();
  // The CPU of a phase is read before the INFO that follows it, and the next phase starts after that INFO: the
  // server's work on INFO is in no phase.
  const mark = async (phase: Phase): Promise<void> => {
    // This process's CPU first: reading the server's /proc files is the bench's work, not the client's.
    perPhase[phase].clientUs += clientCpuUs() - client;
    const cpuNow = serverCpuUs(pid);
    const now = await evalStats();
    perPhase[phase].cpuUs += cpuNow - cpu;
    perPhase[phase].calls += now.calls - stats.calls;
    perPhase[phase].usec += now.usec - stats.usec;
    stats = now;
    cpu = serverCpuUs(pid);
    client = clientCpuUs();
  };
  for (let done = 0; done < N; done += BURST) {
    const n = Math.min(BURST, N - done);
    const burst = Array.from({ length: n }, () => {
      const token = randomUUID();
      if (mode === 'header') return { id: randomUUID(), token, fp: '' };
      // A stamped ID and the fingerprint of a 1 KiB body, as resolve-id.ts makes them.
      return { id: `bb:${randomUUID()}`, token, fp: createHash('sha256').update(randomBytes(1024)).digest('base64url') };
    });
    // Making the burst is the bench's work, not the client's.
    client = clientCpuUs();
    if (mode === 'stamped') {
      await Promise.all(burst.map((m) => cache.recordStamp(source, m.fp, m.id, m.token)));
      await mark('record');
    }
    const reserved = await Promise.all(burst.map((m) => cache.reserve(address, m.id, m.token)));
    if (reserved.some((r) => r.status !== 'reserved')) throw new Error('a fresh ID was not reserved');
    await mark('reserve');
    await Promise.all(burst.map((m) => cache.commit(address, m.id, m.token)));
    await mark('commit');
    if (mode === 'stamped') {
      await Promise.all(burst.map((m) => cache.forgetStamp(source, m.fp, m.id)));
      await mark('forget');
    }
  }
  return perPhase;
}

async function round(mode: 'header' | 'stamped', pid: number): Promise<Record<Phase, PhaseStat>> {
  const cache = new RedisIdCache({ url: `redis://127.0.0.1:${port}`, keyPrefix: `cpu-${randomUUID().slice(0, 8)}`, size: 2000, lease: 30_000 });
  try {
    // A first pass loads the scripts, makes the epoch markers and fills the address to id-cache-size.
    await pass(cache, mode, pid);
    return await pass(cache, mode, pid);
  } finally {
    await cache.close();
  }
}


const f = (x: number): string => x.toFixed(2);
const pid = Number(/process_id:(\d+)/.exec(await admin.info('server'))?.[1]);
const results: Record<string, Record<Phase, PhaseStat>[]> = {};
// Modes alternate round by round, so that a drift of the machine touches both alike.
for (let r = 0; r < ROUNDS; r++) {
  for (const mode of modes) {
    (results[mode] ??= []).push(await round(mode, pid));
    await admin.flushall();
  }
}
console.log(`Redis per ID, ${N} IDs in bursts of ${BURST}, ${ROUNDS} rounds: medians, µs (each round's in brackets)`);
for (const mode of modes) {
  const rs = results[mode]!;
  const phases = (mode === 'header' ? ['reserve', 'commit'] : ['record', 'reserve', 'commit', 'forget']) as Phase[];
  const sum = (r: Record<Phase, PhaseStat>, k: keyof PhaseStat): number => phases.reduce((a, p) => a + r[p][k], 0);
  const cpu = rs.map((r) => sum(r, 'cpuUs') / N);
  const usec = rs.map((r) => sum(r, 'usec') / N);
  console.log(
    `${mode.padEnd(8)} server CPU ${f(median(cpu))} [${cpu.map(f).join(' ')}] | script time ${f(median(usec))} [${usec.map(f).join(' ')}]` +
      ` | ${(median(rs.map((r) => sum(r, 'calls'))) / N).toFixed(3)} calls/ID`,
  );
  for (const p of phases) {
    console.log(
      `  ${p.padEnd(8)} CPU ${f(median(rs.map((r) => r[p].cpuUs / N)))}/ID ${f(median(rs.map((r) => r[p].cpuUs / Math.max(1, r[p].calls))))}/call` +
        ` | script ${f(median(rs.map((r) => r[p].usec / N)))}/ID ${f(median(rs.map((r) => r[p].usec / Math.max(1, r[p].calls))))}/call` +
        ` | client CPU ${f(median(rs.map((r) => r[p].clientUs / N)))}/ID ${f(median(rs.map((r) => r[p].clientUs / Math.max(1, r[p].calls))))}/call`,
    );
  }
}
await admin.quit();
