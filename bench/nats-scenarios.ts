/**
 * NATS JetStream in the bench (issue 36): AMQP → JetStream and JetStream → AMQP through the bridge, each beside a plain
 * nats.js ↔ amqplib loop with the same safety — the source message is acked only after the target confirmed it
 * (JetStream PubAck; AMQP publisher confirm on a mandatory publish) — and the same in-flight bound (PREFETCH).
 *
 * NATS: NATS_URL, default the local server on 127.0.0.1:4222 (JetStream on). Streams and consumers have names of
 * their own and are deleted after each run. The AMQP → JetStream messages carry `_AMQ_DUPL_ID`: the bridge publishes
 * it as `Nats-Msg-Id`, and so does the plain loop, so the stream deduplicates on both sides.
 */
import amqp from 'amqplib';
import { AckPolicy, connect, DeliverPolicy, headers as natsHeaders, nanos, type NatsConnection } from 'nats';
import { BridgeProcess, writeConfig } from '../test/support/bridge-process.js';
import { cpuSplitMs, ownCpuMs } from './process-cpu.js';
import { BODY, PREFETCH, deleteAmqpQueues, peakRssMb, prefillAmqp, uniq, waitAmqpCount, withAmqp, type Scenario } from './harness.js';
import { type RunResult, WARMUP, Window } from './window.js';

const natsUrl = () => process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function natsConn(): Promise<NatsConnection> {
  const u = new URL(natsUrl());
  return connect({ servers: `${u.hostname}:${u.port || 4222}`, name: 'broker-bridge bench' });
}

/** A stream of its own capturing `subject`; removed by the returned function. */
async function stream(nc: NatsConnection, prefix: string): Promise<{ name: string; subject: string; remove: () => Promise<void> }> {
  const name = uniq(prefix).replace(/[^A-Za-z0-9_-]/g, '_').toUpperCase();
  const subject = name.toLowerCase();
  const jsm = await nc.jetstreamManager();
  await jsm.streams.add({ name, subjects: [subject] });
  return { name, subject, remove: async () => void (await jsm.streams.delete(name).catch(() => undefined)) };
}

async function prefillStream(nc: NatsConnection, subject: string, n: number): Promise<void> {
  const js = nc.jetstream();
  const inFlight: Promise<unknown>[] = [];
  for (let i = 0; i < n; i++) {
    inFlight.push(js.publish(subject, BODY));
    if (inFlight.length >= 1000) await Promise.all(inFlight.splice(0));
  }
  await Promise.all(inFlight);
}

/** Polls the stream's message count into `window` until it holds all of the run's messages. */
async function waitStreamCount(nc: NatsConnection, name: string, window: Window, timeoutMs = 300_000): Promise<void> {
  const jsm = await nc.jetstreamManager();
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { messages } = (await jsm.streams.info(name)).state;
    if (window.count(messages)) return;
    if (Date.now() > deadline) throw new Error(`stream ${name} reached only ${messages}/${WARMUP + window.n}`);
    await sleep(10);
  }
}

async function runNatsBridge(source: string, target: string, n: number, waitDone: (w: Window) => Promise<void>): Promise<RunResult> {
  const keyPrefix = uniq('cache');
  const file = writeConfig(`log-level: info
connections:
  rabbit: { type: amqp, url: "${process.env.AMQP_URL}" }
  nats: { type: nats, url: "${natsUrl()}" }
id-cache:
  redis-url: "${process.env.REDIS_URL}"
  key-prefix: ${keyPrefix}
  id-cache-size: ${Math.max(2000, PREFETCH * 2)}
bridges:
  - name: bench
    source: ${source}
    target: ${target}
    prefetch: ${PREFETCH}
`);
  const p = BridgeProcess.start(file);
  try {
    await p.waitForLog((l) => l.msg === 'bridge running', 60_000);
    const running = p.logs.find((l) => l.msg === 'bridge running');
    const window = new Window(n, () => cpuSplitMs(p.child.pid));
    if (typeof running?.time === 'number') window.started = running.time;
    await waitDone(window);
    return window.result({ rssMb: peakRssMb(p.child.pid) });
  } finally {
    // A profiled bridge must exit by itself to write its profile.
    await p.kill(process.env.BRIDGE_NODE_ARGS?.includes('-prof') ? 'SIGTERM' : 'SIGKILL');
  }
}

/** AMQP → JetStream through the bridge (header IDs → Nats-Msg-Id). */
async function amqpToJetStreamBridge(n: number): Promise<RunResult> {
  const src = uniq('nsrc');
  await prefillAmqp(src, WARMUP + n, true);
  const nc = await natsConn();
  const s = await stream(nc, 'bench-tgt');
  try {
    return await runNatsBridge(`{ connection: rabbit, queue: "${src}" }`, `{ connection: nats, subject: "${s.subject}" }`, n, (w) => waitStreamCount(nc, s.name, w));
  } finally {
    await s.remove();
    await nc.close();
    await deleteAmqpQueues(src);
  }
}

/** Plain amqplib consume (prefetch) → JetStream publish with Nats-Msg-Id → ack on the PubAck. */
async function amqpToJetStreamPlain(n: number): Promise<RunResult> {
  const src = uniq('nsrc-plain');
  await prefillAmqp(src, WARMUP + n, true);
  const nc = await natsConn();
  const s = await stream(nc, 'bench-tgt-plain');
  const conn = await amqp.connect(process.env.AMQP_URL!);
  try {
    const ch = await conn.createChannel();
    await ch.prefetch(PREFETCH);
    const js = nc.jetstream();
    let acked = 0;
    const window = new Window(n, ownCpuMs);
    await new Promise<void>((resolve, reject) => {
      void ch.consume(src, (m) => {
        if (!m) return;
        const h = natsHeaders();
        const id = String(m.properties.headers?._AMQ_DUPL_ID);
        h.set('_AMQ_DUPL_ID', id);
        js.publish(s.subject, m.content, { msgID: id, headers: h }).then(() => {
          ch.ack(m);
          if (window.count(++acked)) resolve();
        }, reject);
      });
    });
    return window.result();
  } finally {
    await conn.close().catch(() => undefined);
    await s.remove();
    await nc.close();
    await deleteAmqpQueues(src);
  }
}

/** A durable pull consumer with explicit acks, at most PREFETCH unacked (as the bridge keeps its window). */
async function pullConsumer(nc: NatsConnection, streamName: string): Promise<string> {
  const name = 'bench';
  await (await nc.jetstreamManager()).consumers.add(streamName, { durable_name: name, ack_policy: AckPolicy.Explicit, deliver_policy: DeliverPolicy.All, ack_wait: nanos(60_000), max_ack_pending: PREFETCH });
  return name;
}

/** JetStream → AMQP through the bridge (the stream sequence as the duplicate ID). */
async function jetStreamToAmqpBridge(n: number): Promise<RunResult> {
  const dst = uniq('ndst');
  await withAmqp(async (ch) => void (await ch.assertQueue(dst, { durable: true })));
  const nc = await natsConn();
  const s = await stream(nc, 'bench-src');
  try {
    await prefillStream(nc, s.subject, WARMUP + n);
    const consumer = await pullConsumer(nc, s.name);
    return await runNatsBridge(`{ connection: nats, stream: "${s.name}", consumer: "${consumer}" }`, `{ connection: rabbit, queue: "${dst}" }`, n, (w) => waitAmqpCount(dst, w));
  } finally {
    await s.remove();
    await nc.close();
    await deleteAmqpQueues(dst);
  }
}

/** Plain nats.js pull consumer → amqplib confirm-publish (mandatory) → ack on the confirm. */
async function jetStreamToAmqpPlain(n: number): Promise<RunResult> {
  const dst = uniq('ndst-plain');
  const nc = await natsConn();
  const s = await stream(nc, 'bench-src-plain');
  const conn = await amqp.connect(process.env.AMQP_URL!);
  try {
    await prefillStream(nc, s.subject, WARMUP + n);
    const ch = await conn.createConfirmChannel();
    await ch.assertQueue(dst, { durable: true });
    const consumer = await nc.jetstream().consumers.get(s.name, await pullConsumer(nc, s.name));
    const messages = await consumer.consume({ max_messages: PREFETCH });
    let acked = 0;
    const window = new Window(n, ownCpuMs);
    for await (const m of messages) {
      ch.publish('', dst, Buffer.from(m.data), { persistent: true, mandatory: true, headers: { _AMQ_DUPL_ID: `${s.name}:${m.seq}` } }, (err) => {
        if (err) return;
        m.ack();
        if (window.count(++acked)) void messages.close();
      });
    }
    return window.result();
  } finally {
    await conn.close().catch(() => undefined);
    await s.remove();
    await nc.close();
    await deleteAmqpQueues(dst);
  }
}

async function natsUnavailable(): Promise<string | undefined> {
  try {
    const nc = await natsConn();
    try {
      await nc.jetstreamManager();
      return undefined;
    } finally {
      await nc.close();
    }
  } catch (err) {
    return `no NATS with JetStream at ${natsUrl()} (${(err as Error).message}; set NATS_URL)`;
  }
}

const A2J_PLAIN = 'amqplib → nats.js loop (PubAck, then ack)';
const J2A_PLAIN = 'nats.js → amqplib loop (confirm, then ack)';

export const natsScenarios: Scenario[] = [
  { group: 'amqp→jetstream', name: A2J_PLAIN, run: amqpToJetStreamPlain, unavailable: natsUnavailable },
  { group: 'amqp→jetstream', name: 'bridge → JetStream (header IDs as Nats-Msg-Id)', baseline: A2J_PLAIN, run: amqpToJetStreamBridge, unavailable: natsUnavailable },
  { group: 'jetstream→amqp', name: J2A_PLAIN, run: jetStreamToAmqpPlain, unavailable: natsUnavailable },
  { group: 'jetstream→amqp', name: 'bridge ← JetStream (pull consumer)', baseline: J2A_PLAIN, run: jetStreamToAmqpBridge, unavailable: natsUnavailable },
];
