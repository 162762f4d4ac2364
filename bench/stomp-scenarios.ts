/**
 * AMQP→STOMP and STOMP→AMQP scenarios, each next to a plain baseline built on the same clients (amqplib, and the
 * bridge's own STOMP client, src/endpoints/stomp/stomp-client.ts: stompit's handshake and heart-beats, our frame reader
 * and writer), with per-message receipts and with transactional batches.
 * A STOMP target is drained by a counting consumer in this process (ActiveMQ has no queue depth over STOMP); the
 * baselines are drained the same way, so the comparison stays fair.
 */
import amqp from 'amqplib';
import type { StompConnectionConfig } from '../src/config/protocols/stomp-schema.js';
import { STOMP_READ_LIMITS } from '../src/config/schema.js';
import { connectStomp, type StompSession } from '../src/endpoints/stomp/stomp-client.js';
import { silentLogger } from '../src/shared/log.js';
import { BODY, PREFETCH, type Scenario, deleteAmqpQueues, prefillAmqp, runBridge, uniq, waitAmqpCount } from './harness.js';
import { ownCpuMs } from './process-cpu.js';
import { type RunResult, WARMUP, Window } from './window.js';

const BATCH = 100;

function stompConfig(): StompConnectionConfig {
  return { name: 'bench', type: 'stomp', urls: [process.env.STOMP_URL!], heartBeat: [10000, 10000], connectTimeout: 10000, ...STOMP_READ_LIMITS };
}

const connect = (): Promise<StompSession> => connectStomp(stompConfig(), silentLogger);

/** Counts what arrives at the STOMP queue into the window handed to `done`, which resolves once it holds all. */
async function countStomp(queue: string): Promise<{ done: (window: Window) => Promise<void>; close: () => Promise<void> }> {
  const s = await connect();
  let count = 0;
  let window: Window | undefined;
  let resolve!: () => void;
  const all = new Promise<void>((r) => (resolve = r));
  await s.subscribe({ destination: `/queue/${queue}`, ack: 'auto', 'activemq.prefetchSize': '2000' }, () => {
    count++;
    if (window?.count(count)) resolve();
  });
  return {
    done: (w) => {
      window = w;
      if (w.count(count)) resolve();
      return all;
    },
    close: () => s.disconnect(2000),
  };
}

/** Fills a STOMP queue with n persistent 1 KiB messages (receipts pipelined, 500 outstanding). */
async function prefillStomp(queue: string, n: number, withIds: boolean): Promise<void> {
  const s = await connect();
  try {
    let inflight: Promise<void>[] = [];
    for (let i = 0; i < n; i++) {
      const headers: Record<string, string> = { destination: `/queue/${queue}`, persistent: 'true', 'content-length': String(BODY.length) };
      if (withIds) headers._AMQ_DUPL_ID = `${queue}-${i}`;
      inflight.push(s.send(headers, BODY));
      if (inflight.length >= 500) {
        await Promise.all(inflight);
        inflight = [];
      }
    }
    await Promise.all(inflight);
  } finally {
    await s.disconnect(2000);
  }
}

/** Plain amqplib consume (prefetch 1000) → STOMP SEND with a receipt → ack on the receipt. */
async function amqpToStompBaseline(n: number): Promise<RunResult> {
  const src = uniq('a2s-base-src');
  const dst = uniq('a2s-base-dst');
  await prefillAmqp(src, WARMUP + n, true);
  const counter = await countStomp(dst);
  const conn = await amqp.connect(process.env.AMQP_URL!);
  const stomp = await connect();
  let closing = false;
  try {
    const ch = await conn.createChannel();
    await ch.prefetch(PREFETCH);
    const window = new Window(n, ownCpuMs);
    await ch.consume(src, (m) => {
      if (!m) return;
      const headers: Record<string, string> = { destination: `/queue/${dst}`, persistent: 'true', 'content-length': String(m.content.length) };
      const id: unknown = (m.properties.headers)?._AMQ_DUPL_ID;
      if (typeof id === 'string') headers._AMQ_DUPL_ID = id;
      stomp.send(headers, m.content).then(
        () => {
          // The counting consumer may see the last messages before their receipts arrive here.
          if (!closing) ch.ack(m);
        },
        () => undefined,
      );
    });
    await counter.done(window);
    return window.result();
  } finally {
    closing = true;
    await conn.close().catch(() => undefined);
    await stomp.disconnect(2000);
    await counter.close();
    await deleteAmqpQueues(src);
  }
}

function amqpToStompBridge(batchSize: number, dedupe = true) {
  return async (n: number): Promise<RunResult> => {
    const src = uniq('a2s-src');
    const dst = uniq('a2s-dst');
    await prefillAmqp(src, WARMUP + n, true);
    const counter = await countStomp(dst);
    try {
      return await runBridge({ sourceConnection: 'rabbit', sourceQueue: src, targetConnection: 'activemq', targetQueue: dst, dedupe, batchSize, waitDone: (w) => counter.done(w) }, n);
    } finally {
      await counter.close();
      await deleteAmqpQueues(src);
    }
  };
}

/**
 * Plain STOMP consume (client-individual, prefetch 1000) → amqplib confirm-publish → ACK on the confirm; `mandatory`
 * as the bridge and the amqplib baseline publish (see amqpBaseline in scenarios.ts).
 */
const stompToAmqpBaseline = (mandatory: boolean) => async (n: number): Promise<RunResult> => {
  const src = uniq('s2a-base-src');
  const dst = uniq('s2a-base-dst');
  await prefillStomp(src, WARMUP + n, true);
  await prefillAmqp(dst, 0, false);
  const conn = await amqp.connect(process.env.AMQP_URL!);
  const stomp = await connect();
  try {
    const ch = await conn.createConfirmChannel();
    let acked = 0;
    let resolve!: () => void;
    const done = new Promise<void>((r) => (resolve = r));
    const window = new Window(n, ownCpuMs);
    await stomp.subscribe({ destination: `/queue/${src}`, ack: 'client-individual', 'activemq.prefetchSize': String(PREFETCH) }, (m) => {
      ch.sendToQueue(dst, m.body, { persistent: true, mandatory, headers: { _AMQ_DUPL_ID: m.headers._AMQ_DUPL_ID } }, (err) => {
        if (err) return;
        stomp.ack(m);
        if (window.count(++acked)) resolve();
      });
    });
    await done;
    return window.result();
  } finally {
    await stomp.disconnect(2000);
    await conn.close().catch(() => undefined);
    await deleteAmqpQueues(dst);
  }
};

function stompToAmqpBridge(batchSize: number, dedupe = true) {
  return async (n: number): Promise<RunResult> => {
    const src = uniq('s2a-src');
    const dst = uniq('s2a-dst');
    await prefillStomp(src, WARMUP + n, true);
    await prefillAmqp(dst, 0, false);
    try {
      return await runBridge({ sourceConnection: 'activemq', sourceQueue: src, targetConnection: 'rabbit', targetQueue: dst, dedupe, batchSize, waitDone: (w) => waitAmqpCount(dst, w) }, n);
    } finally {
      await deleteAmqpQueues(dst);
    }
  };
}

const noStomp = () => !process.env.STOMP_URL;

/** The plain loops on the bridge's own STOMP client (not stompit alone: see the header comment). */
const AMQP_TO_STOMP = 'amqplib→STOMP client baseline';
const STOMP_TO_AMQP = 'STOMP client→amqplib baseline';

/** The same bridge with duplicate detection off (the '× dedupe off' column of the row it names). */
const off = (name: string): string => `${name}, dedupe off`;
const A2S_EACH = 'bridge amqp→stomp, receipt each';
const A2S_BATCH = `bridge amqp→stomp, batches of ${BATCH}`;
const S2A_EACH = 'bridge stomp→amqp';
const S2A_BATCH = `bridge stomp→amqp, batches of ${BATCH}`;

export const stompScenarios: Scenario[] = [
  { group: 'amqp→stomp', name: AMQP_TO_STOMP, skip: noStomp, run: amqpToStompBaseline },
  { group: 'amqp→stomp', name: A2S_EACH, baseline: AMQP_TO_STOMP, detectionOff: off(A2S_EACH), skip: noStomp, run: amqpToStompBridge(1) },
  { group: 'amqp→stomp', name: off(A2S_EACH), baseline: AMQP_TO_STOMP, skip: noStomp, run: amqpToStompBridge(1, false) },
  { group: 'amqp→stomp', name: A2S_BATCH, baseline: A2S_EACH, detectionOff: off(A2S_BATCH), skip: noStomp, run: amqpToStompBridge(BATCH) },
  { group: 'amqp→stomp', name: off(A2S_BATCH), baseline: off(A2S_EACH), skip: noStomp, run: amqpToStompBridge(BATCH, false) },
  { group: 'stomp→amqp', name: STOMP_TO_AMQP, skip: noStomp, run: stompToAmqpBaseline(true) },
  { group: 'stomp→amqp', name: `${STOMP_TO_AMQP}, not mandatory`, baseline: STOMP_TO_AMQP, skip: noStomp, run: stompToAmqpBaseline(false) },
  { group: 'stomp→amqp', name: S2A_EACH, baseline: STOMP_TO_AMQP, detectionOff: off(S2A_EACH), skip: noStomp, run: stompToAmqpBridge(1) },
  { group: 'stomp→amqp', name: off(S2A_EACH), baseline: STOMP_TO_AMQP, skip: noStomp, run: stompToAmqpBridge(1, false) },
  { group: 'stomp→amqp', name: S2A_BATCH, baseline: STOMP_TO_AMQP, detectionOff: off(S2A_BATCH), skip: noStomp, run: stompToAmqpBridge(BATCH) },
  { group: 'stomp→amqp', name: off(S2A_BATCH), baseline: STOMP_TO_AMQP, skip: noStomp, run: stompToAmqpBridge(BATCH, false) },
];
