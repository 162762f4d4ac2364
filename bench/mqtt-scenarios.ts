/**
 * MQTT→AMQP and AMQP→MQTT, the bridge next to a plain MQTT.js ↔ amqplib loop with the same QoS 1, the same window
 * (the prefetch, announced as the MQTT 5 receive maximum) and the acknowledgement after the other side confirmed —
 * and, for reference, the unsafe loop that acknowledges on receipt.
 *
 * MQTT runs on a Mosquitto of the bench's own (test/faults/own-mosquitto.ts: a free port, persistence on, no queue
 * limit — the machine's one keeps 1,000 messages per offline session — and `max_inflight_messages` = the prefetch, its
 * receive maximum towards clients, so that the bridge, which keeps to it, and MQTT.js, which does not, publish with
 * the same window). An MQTT source is pre-filled into a persistent session (the bridge's or the loop's client id,
 * subscribed beforehand); an MQTT target is drained by a counting QoS 1 subscriber in this process, for the loops
 * and the bridge alike.
 *
 * The safe MQTT→AMQP loop needs what MQTT.js does not offer (src/endpoints/mqtt/mqtt-session.ts says why): its
 * PUBACK goes out when handleMessage calls back, and the call-back is what lets it read the next packet. So the loop
 * calls back at once and holds the PUBACK MQTT.js then writes (its private `_sendPacket`, wrapped here, in a bench
 * baseline only) until the AMQP confirm, writing them in arrival order, as the bridge's source does.
 */
import mqtt, { type MqttClient } from 'mqtt';
import amqp from 'amqplib';
import type { IPublishPacket, Packet } from 'mqtt-packet';
import { BridgeProcess, writeConfig } from '../test/support/bridge-process.js';
import { OwnMosquitto } from '../test/faults/own-mosquitto.js';
import { BENCH_MOSQUITTO_NAME, cpuSplitMs, ownCpuMs } from './process-cpu.js';
import { BODY, PREFETCH, deleteAmqpQueues, peakRssMb, prefillAmqp, uniq, waitAmqpCount, type Scenario } from './harness.js';
import { type RunResult, WARMUP, Window } from './window.js';

let broker: OwnMosquitto | undefined;

/** The bench's own Mosquitto, started on first use and stopped when the process exits. */
async function mosquittoUrl(): Promise<string> {
  if (!broker) {
    broker = new OwnMosquitto(BENCH_MOSQUITTO_NAME, [`max_inflight_messages ${PREFETCH}`]);
    await broker.start();
    process.once('exit', () => void broker?.dispose());
  }
  return broker.url;
}

function client(url: string, clientId: string, clean: boolean): Promise<MqttClient> {
  return mqtt.connectAsync(url, {
    protocolVersion: 5,
    clientId,
    clean,
    reconnectPeriod: 0,
    ...(clean ? {} : { properties: { sessionExpiryInterval: 3600, receiveMaximum: PREFETCH } }),
  });
}

/** Creates the persistent session `clientId` subscribed to `topic`, then publishes n QoS 1 messages of 1 KiB to it. */
async function prefillMqtt(url: string, topic: string, clientId: string, n: number, withIds: boolean): Promise<void> {
  const session = await client(url, clientId, false);
  await session.subscribeAsync(topic, { qos: 1 });
  await session.endAsync();
  const pub = await client(url, uniq('pub'), true);
  try {
    for (let i = 0; i < n; i += 1000) {
      await Promise.all(
        Array.from({ length: Math.min(1000, n - i) }, (_, k) =>
          pub.publishAsync(topic, BODY, { qos: 1, ...(withIds ? { properties: { userProperties: { _AMQ_DUPL_ID: `${topic}-${i + k}` } } } : {}) }),
        ),
      );
    }
  } finally {
    await pub.endAsync();
  }
}

/** Ends a persistent session. */
async function dropSession(url: string, clientId: string): Promise<void> {
  const c = await client(url, clientId, true);
  await c.endAsync();
}

/** Counts QoS 1 messages arriving on `topic` into the window handed to `done` (subscribed before anything is sent). */
async function countMqtt(url: string, topic: string): Promise<{ done: (w: Window) => Promise<void>; close: () => Promise<void> }> {
  const c = await client(url, uniq('count'), true);
  let count = 0;
  let window: Window | undefined;
  let resolve!: () => void;
  const all = new Promise<void>((r) => (resolve = r));
  c.on('message', () => {
    count += 1;
    if (window?.count(count)) resolve();
  });
  await c.subscribeAsync(topic, { qos: 1 });
  return {
    done: (w) => {
      window = w;
      if (w.count(count)) resolve();
      return all;
    },
    close: () => c.endAsync(),
  };
}

/** The bridge between the bench's Mosquitto and RabbitMQ, until the target holds everything. */
async function runMqttBridge(source: string, target: string, dedupe: boolean, n: number, waitDone: (w: Window) => Promise<void>): Promise<RunResult> {
  const keyPrefix = uniq('cache');
  const file = writeConfig(`log-level: info
connections:
  rabbit: { type: amqp, url: "${process.env.AMQP_URL}" }
  mosquitto: { type: mqtt, url: "${await mosquittoUrl()}", client-id: bench }
id-cache:
  redis-url: "${process.env.REDIS_URL}"
  key-prefix: ${keyPrefix}
  id-cache-size: ${Math.max(2000, PREFETCH * 2)}
bridges:
  - name: bench
    source: ${source}
    target: ${target}
    use-duplicate-detection: ${dedupe}
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

// ---- MQTT → AMQP ----

const mqttToAmqpBridge = (dedupe: boolean, withIds: boolean) => async (n: number): Promise<RunResult> => {
  const url = await mosquittoUrl();
  const topic = uniq('m2a');
  const dst = uniq('m2a-dst');
  await prefillAmqp(dst, 0, false);
  // The bridge's source connects as <client-id>-<bridge>-source: bench-bench-source.
  await prefillMqtt(url, topic, 'bench-bench-source', WARMUP + n, withIds);
  try {
    return await runMqttBridge(`{ connection: mosquitto, topic: "${topic}" }`, `{ connection: rabbit, queue: "${dst}" }`, dedupe, n, (w) => waitAmqpCount(dst, w));
  } finally {
    await dropSession(url, 'bench-bench-source');
    await deleteAmqpQueues(dst);
  }
};

/**
 * MQTT.js → amqplib: each message confirm-published (mandatory, persistent) to RabbitMQ; `safe`: its PUBACK written
 * only after the confirm, in arrival order (the module comment); unsafe: MQTT.js's own PUBACK on receipt.
 */
const mqttToAmqpLoop = (safe: boolean) => async (n: number): Promise<RunResult> => {
  const url = await mosquittoUrl();
  const topic = uniq('m2a-loop');
  const dst = uniq('m2a-loop-dst');
  const clientId = uniq('loop');
  await prefillAmqp(dst, 0, false);
  await prefillMqtt(url, topic, clientId, WARMUP + n, false);
  const conn = await amqp.connect(process.env.AMQP_URL!);
  // Connected only once the handlers are in place: a resumed session's messages come right after CONNACK.
  const src = mqtt.connect(url, {
    protocolVersion: 5,
    clientId,
    clean: false,
    reconnectPeriod: 0,
    manualConnect: true,
    properties: { sessionExpiryInterval: 3600, receiveMaximum: PREFETCH },
  });
  src.on('error', () => undefined);
  try {
    const ch = await conn.createConfirmChannel();
    const window = new Window(n, ownCpuMs);
    let confirmed = 0;
    const order: { id: number; done: boolean }[] = [];
    // What MQTT.js hands to its writer: PUBACKs are held until their message is confirmed.
    const internals = src as unknown as { _sendPacket: (packet: Packet, cb?: () => void) => void };
    const write = internals._sendPacket.bind(src);
    const flush = (): void => {
      while (order.length > 0 && order[0]!.done) write({ cmd: 'puback', messageId: order.shift()!.id });
    };
    if (safe) {
      internals._sendPacket = (packet, cb) => {
        if (packet.cmd !== 'puback') return write(packet, cb);
        // Let MQTT.js read the next packet at once; the PUBACK itself goes out from flush().
        cb?.();
      };
    }
    const done = new Promise<void>((resolve) => {
      src.on('message', (_t, payload, packet: IPublishPacket) => {
        const entry = { id: packet.messageId ?? 0, done: false };
        if (safe) order.push(entry);
        ch.publish('', dst, payload, { persistent: true, mandatory: true }, (err) => {
          if (err) return;
          entry.done = true;
          if (safe) flush();
          if (window.count(++confirmed)) resolve();
        });
      });
    });
    src.connect();
    await done;
    return window.result();
  } finally {
    await src.endAsync(true).catch(() => undefined);
    await conn.close().catch(() => undefined);
    await dropSession(url, clientId).catch(() => undefined);
    await deleteAmqpQueues(dst);
  }
};

// ---- AMQP → MQTT ----

const amqpToMqttBridge = (dedupe: boolean, withIds: boolean) => async (n: number): Promise<RunResult> => {
  const url = await mosquittoUrl();
  const src = uniq('a2m-src');
  const topic = uniq('a2m');
  await prefillAmqp(src, WARMUP + n, withIds);
  const counter = await countMqtt(url, topic);
  try {
    return await runMqttBridge(`{ connection: rabbit, queue: "${src}" }`, `{ connection: mosquitto, topic: "${topic}" }`, dedupe, n, counter.done);
  } finally {
    await counter.close();
    await deleteAmqpQueues(src);
  }
};

/** amqplib → MQTT.js: each message published at QoS 1; `safe`: acked at RabbitMQ on its PUBACK; unsafe: on receipt. */
const amqpToMqttLoop = (safe: boolean) => async (n: number): Promise<RunResult> => {
  const url = await mosquittoUrl();
  const src = uniq('a2m-loop-src');
  const topic = uniq('a2m-loop');
  await prefillAmqp(src, WARMUP + n, false);
  const counter = await countMqtt(url, topic);
  const conn = await amqp.connect(process.env.AMQP_URL!);
  const pub = await client(url, uniq('loop-pub'), true);
  try {
    const ch = await conn.createChannel();
    await ch.prefetch(PREFETCH);
    const window = new Window(n, ownCpuMs);
    await ch.consume(src, (m) => {
      if (!m) return;
      if (!safe) ch.ack(m);
      pub.publish(topic, m.content, { qos: 1 }, (err) => {
        if (!err && safe) ch.ack(m);
      });
    });
    await counter.done(window);
    return window.result();
  } finally {
    await pub.endAsync(true).catch(() => undefined);
    await counter.close();
    await conn.close().catch(() => undefined);
    await deleteAmqpQueues(src);
  }
};

async function mosquittoUnavailable(): Promise<string | undefined> {
  try {
    await mosquittoUrl();
    return undefined;
  } catch (err) {
    return `the bench's own Mosquitto does not start (${(err as Error).message}; Debian's package is mosquitto)`;
  }
}

const M2A_SAFE = 'MQTT.js→amqplib, PUBACK after confirm';
const A2M_SAFE = 'amqplib→MQTT.js, ack after PUBACK';
const M2A_OFF = 'bridge mqtt→amqp, dedupe off';
const A2M_OFF = 'bridge amqp→mqtt, dedupe off';

export const mqttScenarios: Scenario[] = [
  { group: 'mqtt→amqp', name: M2A_SAFE, run: mqttToAmqpLoop(true), unavailable: mosquittoUnavailable },
  { group: 'mqtt→amqp', name: 'MQTT.js→amqplib, PUBACK on receipt (unsafe)', baseline: M2A_SAFE, run: mqttToAmqpLoop(false), unavailable: mosquittoUnavailable },
  { group: 'mqtt→amqp', name: 'bridge mqtt→amqp, dedupe on (header IDs)', baseline: M2A_SAFE, detectionOff: M2A_OFF, run: mqttToAmqpBridge(true, true), unavailable: mosquittoUnavailable },
  { group: 'mqtt→amqp', name: 'bridge mqtt→amqp, dedupe on (stamped IDs)', baseline: M2A_SAFE, detectionOff: M2A_OFF, run: mqttToAmqpBridge(true, false), unavailable: mosquittoUnavailable },
  { group: 'mqtt→amqp', name: M2A_OFF, baseline: M2A_SAFE, run: mqttToAmqpBridge(false, true), unavailable: mosquittoUnavailable },
  { group: 'amqp→mqtt', name: A2M_SAFE, run: amqpToMqttLoop(true), unavailable: mosquittoUnavailable },
  { group: 'amqp→mqtt', name: 'amqplib→MQTT.js, ack on receipt (unsafe)', baseline: A2M_SAFE, run: amqpToMqttLoop(false), unavailable: mosquittoUnavailable },
  { group: 'amqp→mqtt', name: 'bridge amqp→mqtt, dedupe on (header IDs)', baseline: A2M_SAFE, detectionOff: A2M_OFF, run: amqpToMqttBridge(true, true), unavailable: mosquittoUnavailable },
  { group: 'amqp→mqtt', name: 'bridge amqp→mqtt, dedupe on (stamped IDs)', baseline: A2M_SAFE, detectionOff: A2M_OFF, run: amqpToMqttBridge(true, false), unavailable: mosquittoUnavailable },
  { group: 'amqp→mqtt', name: A2M_OFF, baseline: A2M_SAFE, run: amqpToMqttBridge(false, true), unavailable: mosquittoUnavailable },
];
