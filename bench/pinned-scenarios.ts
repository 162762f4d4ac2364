/**
 * The bridge as it runs on a host of its own (issue 23): RabbitMQ pinned to core 0, the bridge and Redis to core 1
 * (`taskset`), so that the broker's cost of serving a client no longer competes with the bridge for the same cores.
 * The shovel runs under the same pinning (inside RabbitMQ, on core 0) as the baseline. The affinities of RabbitMQ and
 * Redis are restored after each scenario, whatever happens.
 */
import { execFileSync } from 'node:child_process';
import { findPids } from './process-cpu.js';
import { type Scenario, amqpBridge, shovelBaseline } from './harness.js';
import { affinity, pin } from './pinning.js';
import type { RunResult } from './window.js';

const SHOVEL_PINNED = "RabbitMQ's shovel, RabbitMQ on core 0";
const OFF_PINNED = 'bridge, dedupe off, pinned';

/** Runs `fn` with RabbitMQ on core 0 and Redis on core 1, then gives both their affinities back. */
async function withBrokersPinned<T>(fn: () => Promise<T>): Promise<T> {
  const pids = findPids();
  const rabbit = pids.RabbitMQ;
  const redis = pids.Redis;
  if (rabbit === undefined || redis === undefined) throw new Error('pinned scenarios: RabbitMQ or Redis not found in /proc');
  const before = [
    [rabbit, affinity(rabbit)],
    [redis, affinity(redis)],
  ] as const;
  try {
    pin(rabbit, '0');
    pin(redis, '1');
    return await fn();
  } finally {
    for (const [pid, cpus] of before) pin(pid, cpus);
  }
}

async function unavailable(): Promise<string | undefined> {
  try {
    execFileSync('taskset', ['-p', String(process.pid)], { stdio: 'ignore' });
  } catch {
    return 'taskset is not available';
  }
  const pids = findPids();
  if (pids.RabbitMQ === undefined || pids.Redis === undefined) return 'RabbitMQ or Redis is not a process of this machine (no pinning)';
  return undefined;
}

const pinnedBridge = (dedupe: boolean, withIds: boolean) => (n: number): Promise<RunResult> =>
  withBrokersPinned(() => amqpBridge(dedupe, withIds, undefined, '1')(n));

export const pinnedScenarios: Scenario[] = [
  { group: 'pinned', name: SHOVEL_PINNED, run: (n) => withBrokersPinned(() => shovelBaseline(n)), unavailable },
  { group: 'pinned', name: 'bridge, header IDs, pinned', baseline: OFF_PINNED, detectionOff: OFF_PINNED, versus: SHOVEL_PINNED, run: pinnedBridge(true, true), unavailable },
  { group: 'pinned', name: 'bridge, stamped IDs, pinned', baseline: OFF_PINNED, detectionOff: OFF_PINNED, versus: SHOVEL_PINNED, run: pinnedBridge(true, false), unavailable },
  { group: 'pinned', name: OFF_PINNED, versus: SHOVEL_PINNED, run: pinnedBridge(false, true), unavailable },
];
