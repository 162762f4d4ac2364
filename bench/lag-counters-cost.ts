/**
 * What issue 44's figures add to the per-message path, call by call (the end-to-end bench, `BENCH_TIMESTAMPS=1
 * BENCH_ONLY='bridge, dedupe on (header IDs)' npm run bench` before/after, is too noisy on a shared machine to see
 * them: its rounds differ by ±4 µs/msg). Per message: the received tally, the message's own time looked up at the
 * confirm, and for a message that has one the replication-latency observation; per scrape: one pass over the held
 * messages for the oldest (src/core/session/held.ts). The forwarded counter is counted once per commit group, as
 * before; the per-message labelled call it would cost is shown for comparison.
 *
 *   node --import tsx bench/lag-counters-cost.ts
 */
import { Metrics } from '../src/core/metrics.js';
import { ownTime } from '../src/core/session/held.js';
import type { SourceDelivery } from '../src/core/message.js';

const N = 2_000_000;
const metrics = new Metrics('bench', { defaultMetrics: false });

function nsPerCall(f: () => void): number {
  for (let i = 0; i < 100_000; i++) f();
  const start = process.hrtime.bigint();
  for (let i = 0; i < N; i++) f();
  return Number(process.hrtime.bigint() - start) / N;
}

const tally = metrics.tallyOf('b');
const plain: SourceDelivery = { message: { body: Buffer.alloc(0), properties: { persistent: true }, headers: {} }, redelivered: false, seq: 1 };
const observe = metrics.replicationLatency.bind({ bridge: 'b' });
const rows: [string, number][] = [
  ['received tally (every message)', nsPerCall(() => void (tally.received += 1))],
  ['own time looked up, none (every confirm)', nsPerCall(() => void ownTime(plain))],
  ['Date.now() + replication latency observed (a confirm of a message with its own time)', nsPerCall(() => observe((Date.now() - 1.7e12) / 1000))],
  ['for comparison: forwarded counted per message with a labelled call (not done: once per commit group)', nsPerCall(() => metrics.forwarded.inc({ bridge: 'b' }))],
];
for (const [what, ns] of rows) console.log(`${ns.toFixed(0).padStart(6)} ns  ${what}`);

const held = Array.from({ length: 1000 }, (_, i) => ({ receivedAt: performance.now() - i, delivery: { ...plain, message: { ...plain.message, properties: { persistent: true, ...(i % 2 ? { timestamp: Date.now() - i } : {}) } } } }));
const start = process.hrtime.bigint();
let oldest = 0;
for (let r = 0; r < 1000; r++) {
  const wallMinusMono = Date.now() - performance.now();
  let o = Number.POSITIVE_INFINITY;
  for (const job of held) o = Math.min(o, ownTime(job.delivery) ?? wallMinusMono + job.receivedAt);
  oldest = o;
}
console.log(`${(Number(process.hrtime.bigint() - start) / 1e6).toFixed(1).padStart(6)} µs  the oldest of 1,000 held messages, per scrape (${oldest > 0 ? 'read' : '?'})`);
