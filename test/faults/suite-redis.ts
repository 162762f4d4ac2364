/**
 * The Redis behind the bridge's duplicate-ID cache in a fault run (`--redis standalone|cluster|sentinel`): what the
 * bridge's `id-cache` section says, and the Redis faults done to it.
 *
 * - standalone: the suite's own redis-server (./own-redis.ts, AOF with fsync always); `redis-restart` restarts it with
 *   its AOF (nothing lost); `redis-data-loss` alternates between a restart with its data wiped (what a Redis without
 *   persistence does) and FLUSHALL. No `redis-failover`: there is no replica.
 * - cluster: the local Redis Cluster of scripts/redis-cluster.sh (7000–7005). `redis-failover` SIGKILLs the master
 *   serving the slot of the bridge's keys (CLUSTER KEYSLOT of the keys' hash tag, then CLUSTER NODES), waits for its
 *   replica's promotion and restarts the killed node, which rejoins as a replica; `redis-data-loss` is FLUSHALL on the
 *   master serving that slot (its replica follows).
 * - sentinel: the local Sentinel setup of scripts/redis-sentinel.sh. `redis-failover` SIGKILLs the master the
 *   sentinels name, waits for the promotion and restarts the old one (the sentinels make it a replica);
 *   `redis-data-loss` is FLUSHALL on the current master.
 * On cluster and sentinel there is no `redis-restart` (a master that stops for longer than the node timeout is failed
 * over: that is `redis-failover`).
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { OwnRedis } from './own-redis.js';
import {
  CLUSTER_SCRIPT,
  SENTINEL_SCRIPT,
  clusterNodes,
  clusterUrls,
  currentMaster,
  failoverSentinel,
  flushNode,
  killMaster,
  masterForKey,
  restartNode,
  sentinelName,
  sentinelUrls,
  withNode,
} from '../support/redis-topology.js';
import { sleep } from '../support/wait.js';

const execFileP = promisify(execFile);

export type RedisMode = 'standalone' | 'cluster' | 'sentinel';
export const REDIS_MODES: readonly RedisMode[] = ['standalone', 'cluster', 'sentinel'];

export interface SuiteRedis {
  readonly mode: RedisMode;
  /** The lines of the bridge's `id-cache` section that say where Redis is (indented for the section). */
  idCacheLines(): string[];
  start(): Promise<void>;
  dispose(): Promise<void>;
  /** `redis-restart` with persistence; undefined where the mode has none. */
  readonly restart?: (downMs: number) => Promise<string>;
  /** `redis-failover`; undefined where the mode has no replica. `keys` are keys of the bridge's cache (their hash tags pick the master). */
  readonly failover?: (keys: readonly string[], n: number) => Promise<string>;
  /** `redis-data-loss`: the cache's data gone while the bridge runs. */
  dataLoss(keys: readonly string[], n: number): Promise<string>;
  /** Deletes the keys a run left under its prefix (shared cluster/sentinel). */
  cleanup(prefix: string): Promise<void>;
}

/** The standalone mode around an OwnRedis the caller made (the short fault test in test/integration/faults.test.ts). */
export function standaloneRedis(own: OwnRedis): SuiteRedis {
  return new StandaloneRedis(own);
}

/** `own` is the suite's own Redis, used in standalone mode. */
export function suiteRedis(mode: RedisMode, own: OwnRedis): SuiteRedis {
  switch (mode) {
    case 'standalone':
      return new StandaloneRedis(own);
    case 'cluster':
      return new ClusterRedis();
    case 'sentinel':
      return new SentinelRedis();
  }
}

class StandaloneRedis implements SuiteRedis {
  readonly mode = 'standalone';
  constructor(readonly own: OwnRedis) {}
  idCacheLines(): string[] {
    return [`  redis-url: "${this.own.url}"`];
  }
  start(): Promise<void> {
    return this.own.start();
  }
  dispose(): Promise<void> {
    return this.own.dispose();
  }
  readonly restart = async (downMs: number): Promise<string> => {
    await this.own.restart(downMs);
    return `own Redis restarted with its AOF after ${downMs} ms down`;
  };
  async dataLoss(_keys: readonly string[], n: number): Promise<string> {
    if (n % 2 === 1) {
      await this.own.restartEmpty(1000);
      return 'own Redis restarted with its data wiped (as a Redis without persistence)';
    }
    await flushNode(this.own.port, '127.0.0.1');
    return 'FLUSHALL on the own Redis';
  }
  async cleanup(): Promise<void> {
    // Its directory goes with dispose().
  }
}

class ClusterRedis implements SuiteRedis {
  readonly mode = 'cluster';
  idCacheLines(): string[] {
    return ['  redis-cluster:', ...clusterUrls().map((u) => `    - "${u}"`)];
  }
  async start(): Promise<void> {
    await execFileP('bash', [CLUSTER_SCRIPT, 'start'], { timeout: 120_000 });
  }
  async dispose(): Promise<void> {
    // Shared with the tests: left running.
  }
  /** The masters serving the keys' slots, in the order of the keys (duplicates removed). */
  private async masters(keys: readonly string[]): Promise<number[]> {
    const out: number[] = [];
    for (const k of keys) {
      const p = await masterForKey(k);
      if (!out.includes(p)) out.push(p);
    }
    return out;
  }
  readonly failover = async (keys: readonly string[], n: number): Promise<string> => {
    const masters = await this.masters(keys);
    // Several failovers take turns over the masters of the bridge's keys (the target's IDs first, then the stamps).
    const victim = masters[(n - 1) % masters.length]!;
    const p = await killMaster(victim);
    await sleep(1000);
    await restartNode(victim);
    return `cluster master ${victim} (masters of the bridge's keys: ${masters.join(', ')}) SIGKILLed; replica ${p.promoted} promoted after ${p.promotionMs} ms; ${victim} restarted and rejoined as a replica`;
  };
  async dataLoss(keys: readonly string[]): Promise<string> {
    const masters = await this.masters(keys);
    for (const m of masters) await flushNode(m);
    return `FLUSHALL on cluster master(s) ${masters.join(', ')} serving the bridge's keys`;
  }
  async cleanup(prefix: string): Promise<void> {
    const masters = (await clusterNodes()).filter((n) => n.role === 'master' && !n.failing);
    for (const m of masters) await deleteMatching(m.port, m.host, prefix);
  }
}

class SentinelRedis implements SuiteRedis {
  readonly mode = 'sentinel';
  idCacheLines(): string[] {
    return ['  redis-sentinel:', `    name: "${sentinelName()}"`, '    urls:', ...sentinelUrls().map((u) => `      - "${u}"`)];
  }
  async start(): Promise<void> {
    await execFileP('bash', [SENTINEL_SCRIPT, 'start'], { timeout: 120_000 });
  }
  async dispose(): Promise<void> {
    // Shared with the tests: left running.
  }
  readonly failover = async (): Promise<string> => {
    const f = await failoverSentinel();
    return `Sentinel master ${f.oldMaster.port} SIGKILLed; ${f.newMaster.port} promoted after ${f.promotionMs} ms; ${f.oldMaster.port} restarted (the sentinels make it a replica)`;
  };
  async dataLoss(): Promise<string> {
    const m = await currentMaster();
    await flushNode(m.port, m.host);
    return `FLUSHALL on the Sentinel master ${m.port}`;
  }
  async cleanup(prefix: string): Promise<void> {
    const m = await currentMaster();
    await deleteMatching(m.port, m.host, prefix);
  }
}

async function deleteMatching(port: number, host: string, prefix: string): Promise<void> {
  await withNode(
    port,
    async (r) => {
      let cursor = '0';
      do {
        const [next, keys] = await r.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
        cursor = next;
        // One DEL per key: on a cluster node, keys of a batch may sit in different slots.
        for (const k of keys) await r.del(k);
      } while (cursor !== '0');
    },
    host,
  );
}
