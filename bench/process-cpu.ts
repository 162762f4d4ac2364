/**
 * CPU time of the processes that share the machine during a bench scenario — RabbitMQ (`beam.smp`), Redis (the one
 * the bench uses), ActiveMQ (`java … activemq`), the bench's own Mosquitto — so that a reader sees where the 2 cores go, not only the bridge's
 * share. Read from /proc (Linux); a process that is not there is left out.
 */
import { readFileSync, readdirSync } from 'node:fs';

/** CPU time a process has used so far, ms: in all, and the part spent in the kernel (system calls, the network stack). */
export interface CpuSample {
  total: number;
  system: number;
}

/** CPU time (user + system) a process has used so far, in ms. */
export function cpuMs(pid: number | undefined): number | undefined {
  return cpuSplitMs(pid)?.total;
}

/** CPU time of a process so far, in ms, with its system part. */
export function cpuSplitMs(pid: number | undefined): CpuSample | undefined {
  if (pid === undefined) return undefined;
  try {
    // Fields 14 and 15 of /proc/<pid>/stat, in clock ticks (100 per second on Linux); the name (field 2) may hold spaces.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const system = Number(fields[12]) * 10;
    return { total: Number(fields[11]) * 10 + system, system };
  } catch {
    return undefined;
  }
}

/** CPU of every thread of a process so far, µs (schedstat: ns of run time, far finer than /proc/stat's ticks). */
export function threadsCpuUs(pid: number): number {
  let ns = 0;
  for (const t of readdirSync(`/proc/${pid}/task`)) ns += Number(readFileSync(`/proc/${pid}/task/${t}/schedstat`, 'utf8').split(' ')[0]);
  return ns / 1000;
}

/** CPU time this process has used so far, in ms, with its system part: the clock of the plain-client baselines. */
export function ownCpuMs(): CpuSample {
  const u = process.cpuUsage();
  return { total: (u.user + u.system) / 1000, system: u.system / 1000 };
}

export type Role = 'RabbitMQ' | 'Redis' | 'ActiveMQ' | 'Mosquitto';
export const ROLES: readonly Role[] = ['RabbitMQ', 'Redis', 'ActiveMQ', 'Mosquitto'];
/** The folder name of the bench's own Mosquitto (./mqtt-scenarios.ts), by which its process is told from the machine's. */
export const BENCH_MOSQUITTO_NAME = 'broker-bridge-bench-mosquitto-';

function cmdline(pid: string): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
  } catch {
    return '';
  }
}

function comm(pid: string): string {
  try {
    return readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
  } catch {
    return '';
  }
}

/**
 * The pid of each role's process, found by name (Redis: the one listening on the port of REDIS_URL). Where several
 * match (a `rabbitmqctl` run is a beam.smp with "rabbit" in its command line too), the one that has used the most CPU:
 * the broker, not a short-lived tool that may be gone by the end of the window.
 */
export function findPids(): Partial<Record<Role, number>> {
  const redisPort = new URL(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379').port || '6379';
  const found: Partial<Record<Role, number>> = {};
  const used: Partial<Record<Role, number>> = {};
  let pids: string[];
  try {
    pids = readdirSync('/proc').filter((d) => /^\d+$/.test(d));
  } catch {
    return found;
  }
  const consider = (role: Role, pid: string): void => {
    const ms = cpuMs(Number(pid)) ?? -1;
    if (found[role] === undefined || ms > (used[role] ?? -1)) {
      found[role] = Number(pid);
      used[role] = ms;
    }
  };
  for (const pid of pids) {
    const name = comm(pid);
    if (name === 'beam.smp' && /rabbit/.test(cmdline(pid))) consider('RabbitMQ', pid);
    else if (name === 'redis-server' && cmdline(pid).includes(`:${redisPort}`)) consider('Redis', pid);
    else if (name === 'java' && /activemq/i.test(cmdline(pid))) consider('ActiveMQ', pid);
    else if (name === 'mosquitto' && cmdline(pid).includes(BENCH_MOSQUITTO_NAME)) consider('Mosquitto', pid);
  }
  return found;
}

/** CPU ms used so far by each role's process. */
export function snapshot(pids: Partial<Record<Role, number>>): Partial<Record<Role, number>> {
  const out: Partial<Record<Role, number>> = {};
  for (const role of ROLES) {
    const ms = cpuMs(pids[role]);
    if (ms !== undefined) out[role] = ms;
  }
  return out;
}

/** µs of CPU per message of each role between two snapshots. */
export function perMessage(before: Partial<Record<Role, number>>, after: Partial<Record<Role, number>>, n: number): Partial<Record<Role, number>> {
  const out: Partial<Record<Role, number>> = {};
  for (const role of ROLES) {
    const a = before[role];
    const b = after[role];
    if (a !== undefined && b !== undefined) out[role] = ((b - a) * 1000) / n;
  }
  return out;
}

/**
 * The brokers' CPU over the measured window of the scenario that is running: the window (./window.ts) calls `start()`
 * when it opens and `stop()` when it closes; bench/run.ts reads `take(n)` after each run.
 */
export const processCpu = {
  pids: undefined as Partial<Record<Role, number>> | undefined,
  before: undefined as Partial<Record<Role, number>> | undefined,
  after: undefined as Partial<Record<Role, number>> | undefined,
  start(): void {
    this.pids = findPids();
    this.before = snapshot(this.pids);
    this.after = undefined;
  },
  stop(): void {
    if (this.pids) this.after = snapshot(this.pids);
  },
  /** µs per message of each role for the last scenario, then forgets it. */
  take(n: number): Partial<Record<Role, number>> {
    const out = this.before && this.after ? perMessage(this.before, this.after, n) : {};
    this.before = this.after = undefined;
    return out;
  },
};
