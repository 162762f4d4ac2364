/**
 * A full target (issue #25): the target queue holds at most 100 messages (`x-max-length`, `x-overflow: reject-publish`,
 * so RabbitMQ nacks what finds it full) and its consumer takes FULL_PACE messages a second: the consumer is the
 * bottleneck. What is measured is the rate at which messages reach that consumer. The bridge should deliver at the
 * consumer's pace, as RabbitMQ's shovel does in the same setup; the row "consumer alone" drains an unbounded queue at
 * the same pace, and says what that pace really is on this machine.
 *
 * Every message is counted once, by its ID: a second copy would be a defect, and is reported as an error.
 */
import amqp from 'amqplib';
import { type Scenario, deleteAmqpQueues, prefillAmqp, runBridge, runShovel, shovelUnavailable, uniq, withAmqp } from './harness.js';
import { type RunResult, WARMUP, Window } from './window.js';

/** Messages a second the target's consumer takes (BENCH_FULL_PACE). */
const FULL_PACE = Number(process.env.BENCH_FULL_PACE ?? 2000);
const TICK_MS = 10;
const LIMIT = { 'x-max-length': 100, 'x-overflow': 'reject-publish' };

/** The scenarios run a shorter stream than the others: at FULL_PACE, WARMUP + N would take minutes a round. */
const scale = (n: number) => Math.max(1000, Math.round(n / 4));

/**
 * A consumer that acks at most FULL_PACE messages a second (TICK_MS ticks), feeding the window with the number of
 * distinct IDs it got; `duplicates` counts copies of an ID seen before.
 */
async function pacedConsumer(
  queue: string,
): Promise<{ done: (w: Window) => Promise<void>; stats: () => { duplicates: number; outOfPlace: number }; close: () => Promise<void> }> {
  const conn = await amqp.connect(process.env.AMQP_URL!);
  conn.on('error', () => undefined);
  const ch = await conn.createChannel();
  const perTick = Math.max(1, Math.round((FULL_PACE * TICK_MS) / 1000));
  await ch.prefetch(perTick * 2);
  const buffered: amqp.ConsumeMessage[] = [];
  const seen = new Set<string>();
  let duplicates = 0;
  // First copies that come after a message with a higher number (IDs are `<queue>-<n>`).
  let outOfPlace = 0;
  let highest = -1;
  let window: Window | undefined;
  let resolve!: () => void;
  const all = new Promise<void>((r) => (resolve = r));
  await ch.consume(queue, (m) => {
    if (m) buffered.push(m);
  });
  const timer = setInterval(() => {
    for (const m of buffered.splice(0, perTick)) {
      const id = String((m.properties.headers ?? {})._AMQ_DUPL_ID ?? m.properties.messageId ?? seen.size);
      if (seen.has(id)) duplicates++;
      else {
        const n = Number(id.slice(id.lastIndexOf('-') + 1));
        if (n < highest) outOfPlace++;
        highest = Math.max(highest, n);
      }
      seen.add(id);
      ch.ack(m);
    }
    if (window?.count(seen.size)) resolve();
  }, TICK_MS);
  return {
    done: (w) => {
      window = w;
      return all;
    },
    stats: () => ({ duplicates, outOfPlace }),
    close: async () => {
      clearInterval(timer);
      await conn.close().catch(() => undefined);
    },
  };
}

async function boundedQueue(name: string): Promise<void> {
  await withAmqp(async (ch) => {
    await ch.assertQueue(name, { durable: true, arguments: LIMIT });
  });
}

function checkNoDuplicates(what: string, duplicates: number): void {
  if (duplicates > 0) throw new Error(`${what}: ${duplicates} second copies reached the consumer of the full target`);
}

async function consumerAlone(n: number): Promise<RunResult> {
  const m = scale(n);
  const q = uniq('full-alone');
  await prefillAmqp(q, WARMUP + m, true);
  const consumer = await pacedConsumer(q);
  try {
    const window = new Window(m);
    await consumer.done(window);
    return window.result();
  } finally {
    await consumer.close();
    await deleteAmqpQueues(q);
  }
}

async function shovelIntoFull(n: number): Promise<RunResult> {
  const m = scale(n);
  const src = uniq('full-shovel-src');
  const dst = uniq('full-shovel-dst');
  await prefillAmqp(src, WARMUP + m, true);
  await boundedQueue(dst);
  const consumer = await pacedConsumer(dst);
  try {
    const r = await runShovel(src, dst, m, consumer.done);
    checkNoDuplicates('shovel', consumer.stats().duplicates);
    console.log(`    shovel into a full target: ${consumer.stats().outOfPlace} of ${WARMUP + m} out of place`);
    return r;
  } finally {
    await consumer.close();
    await deleteAmqpQueues(src, dst);
  }
}

async function bridgeIntoFull(n: number, batchSize: number): Promise<RunResult> {
  const m = scale(n);
  const src = uniq('full-src');
  const dst = uniq('full-dst');
  await prefillAmqp(src, WARMUP + m, true);
  await boundedQueue(dst);
  const consumer = await pacedConsumer(dst);
  try {
    const r = await runBridge({ sourceConnection: 'rabbit', sourceQueue: src, targetConnection: 'rabbit', targetQueue: dst, dedupe: true, batchSize, waitDone: consumer.done }, m);
    checkNoDuplicates('bridge', consumer.stats().duplicates);
    console.log(`    bridge into a full target (batch ${batchSize}): ${consumer.stats().outOfPlace} of ${WARMUP + m} out of place`);
    return r;
  } finally {
    await consumer.close();
    await deleteAmqpQueues(src, dst);
  }
}

const ALONE = `full target: consumer alone (${FULL_PACE}/s pace)`;
const SHOVEL_FULL = 'full target: RabbitMQ shovel (on-confirm)';

export const fullTargetScenarios: Scenario[] = [
  { group: 'full target', name: ALONE, run: consumerAlone },
  { group: 'full target', name: SHOVEL_FULL, baseline: ALONE, run: shovelIntoFull, unavailable: shovelUnavailable },
  { group: 'full target', name: 'full target: bridge, header IDs', baseline: ALONE, versus: SHOVEL_FULL, run: (n) => bridgeIntoFull(n, 1) },
  { group: 'full target', name: 'full target: bridge, header IDs, batch 50', baseline: ALONE, versus: SHOVEL_FULL, run: (n) => bridgeIntoFull(n, 50) },
];
