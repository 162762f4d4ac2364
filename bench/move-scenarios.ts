/**
 * Moving a queue's contents and ending (docs/design.md §9.4): `broker-bridge move --until-empty` beside `run` of the
 * same bridge and RabbitMQ's shovel with `src-delete-after: queue-length` (a shovel that moves what the queue holds and
 * deletes itself), on the same pre-filled queue. A move is a run with a stop condition: its rate should be run's.
 * The 'from start' column counts from the bridge's 'bridge running' line (the shovel's creation) until the target holds
 * everything; a move also exits by itself once it saw the source empty (the last tick, not in the rate).
 */
import { type Scenario, amqpBridge, deleteAmqpQueues, prefillAmqp, runShovel, shovelUnavailable, uniq, waitAmqpCount } from './harness.js';
import { WARMUP, type RunResult } from './window.js';

const SHOVEL_DELETE = 'shovel, src-delete-after queue-length';
const RUN = 'bridge run (header IDs)';

async function shovelMove(n: number): Promise<RunResult> {
  const src = uniq('mv-shovel-src');
  const dst = uniq('mv-shovel-dst');
  await prefillAmqp(src, WARMUP + n, true, dst);
  try {
    return await runShovel(src, dst, n, (window) => waitAmqpCount(dst, window), { 'src-delete-after': 'queue-length' });
  } finally {
    await deleteAmqpQueues(src, dst);
  }
}

export const moveScenarios: Scenario[] = [
  { group: 'move', name: SHOVEL_DELETE, run: shovelMove, unavailable: shovelUnavailable },
  { group: 'move', name: RUN, versus: SHOVEL_DELETE, run: amqpBridge(true, true) },
  {
    group: 'move',
    name: 'broker-bridge move --until-empty',
    baseline: RUN,
    versus: SHOVEL_DELETE,
    run: amqpBridge(true, true, undefined, undefined, ['move', '--bridge', 'bench', '--until-empty']),
  },
];
