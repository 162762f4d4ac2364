/**
 * The duplicate-ID cache's script calls over a scenario's measured window, from the `INFO commandstats` of the Redis
 * the bench uses (REDIS_URL): how many EVAL/EVALSHA calls the bridge made per message, and how long they ran inside
 * Redis. Calls per message show how well the bridge batches (each call costs Redis a fixed ~40–50 µs of CPU and the
 * bridge a write and a read on its socket, whatever it carries); script time per message, beside the Redis process's
 * CPU, shows what the IDs themselves cost. Read asynchronously when the window opens and closes (./window.ts), so the
 * edges are a few ms off. Other clients' scripts on the same Redis count too, and so does their CPU in the Redis
 * column: on the machine's shared Redis, other suites' tests once made MQTT → AMQP read 0.91 calls per message where
 * the bridge made 0.01 (docs/measurements.md). Point REDIS_URL at a Redis of the bench's own for these columns.
 */
import { Redis } from 'ioredis';

export interface ScriptStats {
  calls: number;
  usec: number;
}

/**
 * EVAL + EVALSHA calls and their usec so far on `redis`, from INFO commandstats (a script's first call is an EVAL, the
 * rest EVALSHA). Also read by bench/redis-cpu.ts.
 */
export async function scriptStats(redis: Redis): Promise<ScriptStats> {
  const info = await redis.info('commandstats');
  const out = { calls: 0, usec: 0 };
  for (const m of info.matchAll(/^cmdstat_(?:eval|evalsha):calls=(\d+),usec=(\d+)/gm)) {
    out.calls += Number(m[1]);
    out.usec += Number(m[2]);
  }
  return out;
}

let admin: Redis | undefined;

async function read(): Promise<ScriptStats | undefined> {
  try {
    if (admin === undefined) {
      admin = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', { maxRetriesPerRequest: 1 });
      // A Redis the bench cannot read only leaves the columns empty (the read below rejects); no unhandled 'error' noise.
      admin.on('error', () => undefined);
    }
    return await scriptStats(admin);
  } catch {
    return undefined;
  }
}

export const redisCalls = {
  before: undefined as Promise<ScriptStats | undefined> | undefined,
  after: undefined as Promise<ScriptStats | undefined> | undefined,
  start(): void {
    this.before = read();
    this.after = undefined;
  },
  stop(): void {
    if (this.before) this.after = read();
  },
  /** Script calls and script µs per message for the last scenario (undefined without both reads), then forgets it. */
  async take(n: number): Promise<{ callsPerMsg: number; scriptUsPerMsg: number } | undefined> {
    const [a, b] = await Promise.all([this.before, this.after]);
    this.before = this.after = undefined;
    if (a === undefined || b === undefined) return undefined;
    return { callsPerMsg: (b.calls - a.calls) / n, scriptUsPerMsg: (b.usec - a.usec) / n };
  },
  async close(): Promise<void> {
    admin?.disconnect();
    admin = undefined;
  },
};
