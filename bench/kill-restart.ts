/**
 * Recovery after a crash, measured (docs/design.md §8, §10): one AMQP → AMQP bridge, MESSAGES numbered messages with
 * duplicate IDs, prefetch PREFETCH; the bridge process is SIGKILLed once a third of them reached the target and started
 * again at once. Per run it reports the seconds from the kill until every message is at the target (the last ones are
 * usually the in-flight ones the dead process held), that nothing was lost, that every extra copy was flagged, and how
 * many messages arrived out of place (their first copy after a message with a higher number), unflagged and flagged.
 * RUNS runs, then the distribution.
 *
 *   node --import tsx bench/kill-restart.ts        (RUNS=20 MESSAGES=4000 PREFETCH=500; BRIDGE_CLI=<a build's dist/cli.js>)
 *
 * The real RabbitMQ and Redis (AMQP_URL, REDIS_URL); queues and cache keys are the run's own and removed after it.
 */
import amqp from 'amqplib';
import { BridgeProcess, writeConfig } from '../test/support/bridge-process.js';
import { percentile } from './report.js';
import { deleteKeysUnder } from '../test/support/redis-keys.js';

const AMQP_URL = (process.env.AMQP_URL ??= 'amqp://guest:guest@127.0.0.1:5672');
const REDIS_URL = (process.env.REDIS_URL ??= 'redis://127.0.0.1:6379');
const RUNS = Number(process.env.RUNS ?? 20);
const MESSAGES = Number(process.env.MESSAGES ?? 4000);
const PREFETCH = Number(process.env.PREFETCH ?? 500);
const FLAG = 'x-bridge-possible-duplicate';

interface RunOutcome {
  killToLastS: number;
  /** From the kill until the restarted process logged 'bridge running'. */
  killToRunningS: number;
  lost: number;
  unflaggedExtras: number;
  flaggedExtras: number;
  /** First copies that arrived after a message with a higher number: unflagged, and flagged. */
  outOfPlace: number;
  outOfPlaceFlagged: number;
}

async function oneRun(run: number): Promise<RunOutcome> {
  const tag = `kr-${process.pid}-${run}`;
  const src = `${tag}-src`;
  const dst = `${tag}-dst`;
  const conn = await amqp.connect(AMQP_URL);
  const ch = await conn.createConfirmChannel();
  await ch.assertQueue(src, { durable: true });
  await ch.assertQueue(dst, { durable: true });
  for (let i = 0; i < MESSAGES; i++) {
    ch.sendToQueue(src, Buffer.from(`m${i}`), { persistent: true, headers: { _AMQ_DUPL_ID: `${tag}-${i}`, seq: i } });
    if (i % 500 === 499) await ch.waitForConfirms();
  }
  await ch.waitForConfirms();

  const firstArrival = new Map<number, number>();
  let extras = 0;
  let unflagged = 0;
  let maxSeq = -1;
  let outOfPlace = 0;
  let outOfPlaceFlagged = 0;
  const sub = await conn.createChannel();
  await sub.prefetch(1000);
  await sub.consume(dst, (m) => {
    if (!m) return;
    const seq = Number(m.properties.headers?.seq);
    if (firstArrival.has(seq)) {
      extras += 1;
      if (m.properties.headers?.[FLAG] !== true) unflagged += 1;
    } else {
      firstArrival.set(seq, performance.now());
      if (seq < maxSeq) {
        if (m.properties.headers?.[FLAG] === true) outOfPlaceFlagged += 1;
        else outOfPlace += 1;
      }
      maxSeq = Math.max(maxSeq, seq);
    }
    sub.ack(m);
  });

  const file = writeConfig(`log-level: info
connections:
  rabbit: { type: amqp, url: "${AMQP_URL}" }
id-cache: { redis-url: "${REDIS_URL}", key-prefix: ${tag} }
bridges:
  - name: kr
    source: { connection: rabbit, queue: "${src}" }
    target: { connection: rabbit, queue: "${dst}" }
    prefetch: ${PREFETCH}
`);
  let bridge = BridgeProcess.start(file);
  let killedAt = 0;
  try {
    while (firstArrival.size < MESSAGES / 3) await sleep(2);
    await bridge.kill('SIGKILL');
    killedAt = performance.now();
    const atKill = new Set(firstArrival.keys());
    bridge = BridgeProcess.start(file);
    const restarted = bridge;
    let runningAt = 0;
    void restarted.waitForLog((l) => l.msg === 'bridge running', 60_000).then(
      () => (runningAt = performance.now()),
      () => undefined,
    );
    const deadline = Date.now() + 120_000;
    while (firstArrival.size < MESSAGES && Date.now() < deadline) await sleep(5);
    // Copies still on their way: a little longer, to count them.
    await sleep(500);
    const arrivedAfter = [...firstArrival].filter(([seq]) => !atKill.has(seq)).map(([, t]) => t);
    return {
      killToLastS: (Math.max(killedAt, ...arrivedAfter) - killedAt) / 1000,
      killToRunningS: (runningAt - killedAt) / 1000,
      lost: MESSAGES - firstArrival.size,
      unflaggedExtras: unflagged,
      flaggedExtras: extras - unflagged,
      outOfPlace,
      outOfPlaceFlagged,
    };
  } finally {
    await bridge.stop(5000);
    await conn.close().catch(() => undefined);
    const admin = await amqp.connect(AMQP_URL);
    const c = await admin.createChannel();
    await c.deleteQueue(src).catch(() => undefined);
    await c.deleteQueue(dst).catch(() => undefined);
    await admin.close().catch(() => undefined);
    await deleteKeysUnder(REDIS_URL, tag);
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

async function main(): Promise<void> {
  console.log(`kill-restart: ${RUNS} runs of ${MESSAGES} messages, prefetch ${PREFETCH}, build ${process.env.BRIDGE_CLI ?? 'dist/cli.js'}`);
  const outcomes: RunOutcome[] = [];
  for (let run = 1; run <= RUNS; run++) {
    const o = await oneRun(run);
    outcomes.push(o);
    console.log(
      `  run ${String(run).padStart(2)}: last in-flight message ${o.killToLastS.toFixed(2)} s after the kill (restarted, running, after ${o.killToRunningS.toFixed(2)} s); lost ${o.lost}, extras ${o.flaggedExtras} flagged / ${o.unflaggedExtras} unflagged; out of place ${o.outOfPlace} unflagged / ${o.outOfPlaceFlagged} flagged`,
    );
  }
  const s = outcomes.map((o) => o.killToLastS);
  const within3 = s.filter((x) => x <= 3).length;
  console.log(
    `kill → last in-flight message: median ${percentile(s, 50).toFixed(2)} s, p90 ${percentile(s, 90).toFixed(2)} s, max ${Math.max(...s).toFixed(2)} s; within 3 s in ${within3} of ${s.length} runs`,
  );
  console.log(
    `lost ${outcomes.reduce((a, o) => a + o.lost, 0)}, unflagged extras ${outcomes.reduce((a, o) => a + o.unflaggedExtras, 0)}, flagged extras ${outcomes.reduce((a, o) => a + o.flaggedExtras, 0)}; out of place (sums) ${outcomes.reduce((a, o) => a + o.outOfPlace, 0)} unflagged, ${outcomes.reduce((a, o) => a + o.outOfPlaceFlagged, 0)} flagged`,
  );
}

await main();
