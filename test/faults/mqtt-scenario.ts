/**
 * One fault run on an MQTT path: `mqtt-amqp` (devices → the suite's own Mosquitto → the bridge → RabbitMQ) or
 * `amqp-mqtt` (RabbitMQ → the bridge → the suite's own Mosquitto → a collector), with the same numbered stream,
 * analysis and table as the other paths (./scenario.ts, ./report.ts). The bridge's MQTT connection is MQTT 5: every
 * copy must carry its ID, and every extra copy the possible-duplicate flag.
 *
 * Layout (all on 127.0.0.1):
 * - Mosquitto is the suite's own (./own-mosquitto.ts: persistence on, a free port, a folder of its own), never the
 *   machine's 1883: `mosquitto-restart` restarts it (SIGTERM, a pause, a start with the same persistence file).
 * - The bridge reaches Mosquitto through a TCP proxy: `mqtt-cut` cuts its MQTT connection; on mqtt-amqp the devices
 *   reach it through another one: `device-cut` cuts the devices mid-publish, their PUBACKs are lost, and MQTT.js sends
 *   those PUBLISHes again once reconnected (./mqtt-harness.ts): re-sends the bridge must drop by their ID.
 * - RabbitMQ: a vhost of the run's own, as on the other paths (`connection-close` closes the bridge's AMQP connection
 *   through the management API). The AMQP target is the headers exchange the other paths use (a poison message
 *   without the route header is unroutable). On amqp-mqtt the MQTT target topic is a template on that header,
 *   `…/out/${header.faults-route:-none}`, and the collector subscribes to `…/out/ok` only: a poison message goes to a
 *   topic nobody subscribes to, which the MQTT 5 target refuses as unroutable (no-subscribers: refuse); a too-large one
 *   is over the connection's max-packet-size and refused before it is written. Both are dead-lettered to RabbitMQ.
 *   On mqtt-amqp there is no too-large poison: RabbitMQ's max_message_size is the shared node's, and is left alone.
 * - Redis: the suite's own (--redis-port), `redis-restart` restarts it with its AOF.
 * - No broker-restart of RabbitMQ and no target stall here (they act on the shared RabbitMQ).
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import amqp from 'amqplib';
import { TcpProxy } from '../support/tcp-proxy.js';
import { sleep } from '../support/wait.js';
import { BridgeControl } from './bridge-control.js';
import { AmqpCollector, AmqpPublisher, type Collector, type Publisher } from './harness-clients.js';
import { MqttCollector, MqttDevices } from './mqtt-harness.js';
import { OwnMosquitto } from './own-mosquitto.js';
import type { SuiteRedis } from './suite-redis.js';
import { Prng } from './prng.js';
import { HARNESS_CONNECTION_PREFIX, type RabbitAdmin } from './rabbit-admin.js';
import { analyse, type FaultRunReport, type SentRecord } from './report.js';
import { ROUTE_HEADER, ROUTE_VALUE, planStream, poisonBody, type Outgoing, type PoisonKind } from './stream.js';
import { RELOAD_PREFETCHES, ReloadFault } from './reload-fault.js';
import { Gate, recordUncertain, withVhost } from './run-parts.js';
import { StreamPublisher, faultsThenDrain } from './stream-run.js';
import { burstMessage } from './in-flight.js';

export type MqttPathName = 'mqtt-amqp' | 'amqp-mqtt';
export const MQTT_PATHS: readonly MqttPathName[] = ['mqtt-amqp', 'amqp-mqtt'];

export type MqttFaultKind = 'sigkill' | 'connection-close' | 'mqtt-cut' | 'device-cut' | 'mosquitto-restart' | 'redis-restart' | 'poison-unroutable' | 'poison-too-large' | 'reload';
export type MqttFaultCounts = Record<MqttFaultKind, number>;

export const MQTT_FULL_FAULTS: MqttFaultCounts = {
  sigkill: 5,
  'connection-close': 3,
  'mqtt-cut': 5,
  'device-cut': 5,
  'mosquitto-restart': 2,
  'redis-restart': 1,
  'poison-unroutable': 2,
  'poison-too-large': 2,
  reload: 15,
};

export interface MqttScenarioOptions {
  path: MqttPathName;
  messages: number;
  seed: number;
  faults: MqttFaultCounts;
  publishSeconds: number;
  amqpUrl: string;
  redis: SuiteRedis;
  admin: RabbitAdmin;
  quietMs?: number;
  drainTimeoutMs?: number;
  /** A fault kind whose injection fails on purpose (--break-injection): the run must FAIL and name it. */
  breakInjection?: string;
  log?: (line: string) => void;
}

/** Poison early, restarts mid-stream, the rest anywhere (as ./scenario.ts plans them). */
function planFaults(counts: MqttFaultCounts, prng: Prng): { kind: MqttFaultKind; at: number }[] {
  const events: { kind: MqttFaultKind; at: number }[] = [];
  for (const [kind, n] of Object.entries(counts) as [MqttFaultKind, number][]) {
    if (kind === 'reload') continue;
    for (let i = 0; i < n; i++) {
      let [lo, hi] = [0.05, 0.9];
      if (kind.startsWith('poison')) [lo, hi] = [0.05, 0.45];
      if (kind === 'mosquitto-restart') [lo, hi] = [0.3, 0.85];
      events.push({ kind, at: lo + prng.next() * (hi - lo) });
    }
  }
  return events.sort((a, b) => a.at - b.at);
}

export async function runMqttScenario(o: MqttScenarioOptions): Promise<FaultRunReport> {
  const started = Date.now();
  const t = () => `${((Date.now() - started) / 1000).toFixed(1).padStart(6)}s`;
  const log = (line: string) => (o.log ?? console.log)(`[${o.path} ${t()}] ${line}`);
  const prng = new Prng(o.seed);
  const runId = `${o.path}-${o.seed}-${Date.now().toString(36)}`;
  const sourceIsMqtt = o.path === 'mqtt-amqp';
  const faults: MqttFaultCounts = { ...o.faults };
  const notes: string[] = [];
  if (sourceIsMqtt && faults['poison-too-large'] > 0) {
    notes.push("too-large poison left out on mqtt-amqp: it needs RabbitMQ's max_message_size lowered, and the node is shared");
    faults['poison-too-large'] = 0;
  }
  if (!sourceIsMqtt && faults['device-cut'] > 0) {
    notes.push('device-cut left out on amqp-mqtt: the source is RabbitMQ (its publisher is the AMQP one)');
    faults['device-cut'] = 0;
  }
  if (!o.redis.restart && faults['redis-restart'] > 0) {
    notes.push(`redis-restart left out on ${o.redis.mode} Redis`);
    faults['redis-restart'] = 0;
  }

  const mosquitto = new OwnMosquitto();
  await mosquitto.start();
  log(`own mosquitto on ${mosquitto.url} (persistence in ${mosquitto.dir})`);
  const bridgeProxy = await TcpProxy.forUrl(mosquitto.url).start();
  const deviceProxy = await TcpProxy.forUrl(mosquitto.url).start();

  const vhost = `faults-${runId}`;
  const admin = o.admin;
  await admin.createVhost(vhost);
  const rabbitUrl = withVhost(o.amqpUrl, vhost);
  // On mqtt-amqp the bridge's RabbitMQ connection (its target) goes through a proxy whose answers (publisher confirms)
  // are held while a prefetch's worth fills before a kill or a close (./in-flight.ts): devices publish no faster than
  // the bridge forwards, so bursts alone can leave the window empty (2026-12-06: 0 of 300 after 20 s). Held on the
  // connections open when the wait begins only: a bridge restarting or reconnecting meanwhile must get through.
  const rabbitProxy = await TcpProxy.forUrl(o.amqpUrl).start();
  const bridgeRabbitUrl = sourceIsMqtt ? rabbitProxy.rewrite(rabbitUrl) : rabbitUrl;
  const exchange = 'faults.target';
  const [srcQueue, tgtQueue, dlQueue] = ['src', 'tgt', 'dl'];
  {
    const conn = await amqp.connect(rabbitUrl, { clientProperties: { connection_name: `${HARNESS_CONNECTION_PREFIX} setup` } });
    const ch = await conn.createChannel();
    if (!sourceIsMqtt) await ch.assertQueue(srcQueue, { durable: true });
    if (sourceIsMqtt) {
      await ch.assertExchange(exchange, 'headers', { durable: true });
      await ch.assertQueue(tgtQueue, { durable: true });
      await ch.bindQueue(tgtQueue, exchange, '', { 'x-match': 'all', [ROUTE_HEADER]: ROUTE_VALUE });
    }
    await ch.assertQueue(dlQueue, { durable: true });
    await conn.close();
  }

  const topic = `faults/${runId}`;
  const devicesTopic = `${topic}/dev`;
  const outTopic = `${topic}/out`;
  const publisher: Publisher = sourceIsMqtt ? new MqttDevices(deviceProxy.rewrite(mosquitto.url), devicesTopic, runId) : new AmqpPublisher(rabbitUrl, srcQueue);
  const mqttCollector = sourceIsMqtt ? undefined : new MqttCollector(mosquitto.url, `${outTopic}/${ROUTE_VALUE}`, `collector-${runId}`);
  const target: Collector = mqttCollector ?? new AmqpCollector(rabbitUrl, tgtQueue);
  const deadLetter: Collector = new AmqpCollector(rabbitUrl, dlQueue);
  await target.start();
  await deadLetter.start();
  await publisher.open();

  const tooLargeBytes = 2 * 1024 * 1024;
  const keyPrefix = `faults-${runId}`;
  const adminToken = `faults-${runId}`;
  const bridgeName = `faults-${o.path}`;
  const mqttConn = `  mosquitto: { type: mqtt, url: "${bridgeProxy.rewrite(mosquitto.url)}", client-id: "bb-${runId}", max-packet-size: ${1024 * 1024}, keepalive: 10 }`;
  const yaml = [
    'log-level: info',
    'shutdown-timeout: 10000',
    'http-port: 0',
    `admin-token: "${adminToken}"`,
    'connections:',
    `  rabbit: { type: amqp, url: "${bridgeRabbitUrl}" }`,
    mqttConn,
    'id-cache:',
    ...o.redis.idCacheLines(),
    `  key-prefix: "${keyPrefix}"`,
    '  id-cache-size: 50000',
    'bridges:',
    `  - name: ${bridgeName}`,
    sourceIsMqtt ? `    source: { connection: mosquitto, topic: "${devicesTopic}/+" }` : `    source: { connection: rabbit, queue: "${srcQueue}" }`,
    sourceIsMqtt
      ? `    target: { connection: rabbit, exchange: "${exchange}", routing-key: "" }`
      : `    target: { connection: mosquitto, topic: "${outTopic}/\${header.${ROUTE_HEADER}:-none}" }`,
    `    dead-letter: { connection: rabbit, queue: "${dlQueue}" }`,
    `    prefetch: ${RELOAD_PREFETCHES[0]}`,
    '    max-delivery-attempts: 3',
    '    retry-interval: 500',
    '    max-retry-interval: 2000',
    '',
  ].join('\n');
  const dir = mkdtempSync(join(tmpdir(), 'broker-bridge-faults-'));
  const configFile = join(dir, 'bridges.yaml');
  writeFileSync(configFile, yaml);
  const bridge = new BridgeControl(configFile, log);
  const reloads = new ReloadFault(configFile, bridgeName, adminToken, bridge, o.seed, log);

  const record: SentRecord = { sent: new Map(), resends: new Map(), poison: new Map(), uncertain: new Set(), identical: { sent: 0, uncertain: 0 } };
  const injected: Record<string, number> = Object.fromEntries(Object.keys(faults).map((k) => [k, 0]));
  const gate = new Gate();
  let report: FaultRunReport | undefined;
  // Chunks in flight when the devices were cut: their messages may be at the source twice (MQTT.js re-sends them).
  let deviceCuts = 0;

  try {
    log(`seed ${o.seed}; vhost ${vhost}; config ${configFile}`);
    if (!(await bridge.start())) throw new Error('the bridge did not start');

    const plan = planStream(o.messages, prng, runId);
    const events = planFaults(faults, prng);
    log(`faults planned: ${events.map((e) => `${e.kind}@${Math.round(e.at * 100)}%`).join(', ')}`);
    // A device cut during a chunk: MQTT.js sent its unacknowledged PUBLISHes again, so any may be at the source twice.
    const sendChunk = async (batch: Outgoing[]) => {
      const cutsBefore = deviceCuts;
      await gate.hold(() => publisher.publish(batch));
      if (deviceCuts !== cutsBefore) for (const m of batch) recordUncertain(record, m);
    };
    const stream = new StreamPublisher(plan.messages, record, o.publishSeconds, sendChunk, () => publisher.open(), log);
    const total = plan.messages.length;
    const publishLoop = stream.start();

    let poisonNo = 0;
    const injectPoison = async (kind: PoisonKind) => {
      poisonNo += 1;
      const n = poisonNo;
      const m: Outgoing & { type: 'poison' } = {
        type: 'poison',
        poison: n,
        kind,
        body: poisonBody(n, kind, runId, kind === 'too-large' ? tooLargeBytes : 0),
        ...(n % 2 === 0 ? { id: `faults-${runId}-poison-${n}` } : {}),
      };
      await stream.poison(m);
    };

    const inject = async (kind: MqttFaultKind): Promise<boolean> => {
      switch (kind) {
        case 'sigkill':
          await bridge.sigkill();
          await sleep(prng.int(0, 1000));
          await bridge.start();
          return true;
        case 'connection-close': {
          const deadline = Date.now() + 20_000;
          for (;;) {
            const list = await admin.bridgeConnections(vhost, bridge.pid).catch(() => []);
            if (list.length > 0) {
              const victim = prng.pick(list);
              const ok = await admin.closeConnection(victim.name);
              log(`closed RabbitMQ connection '${victim.clientName || victim.name}': ${ok ? 'ok' : 'failed'}`);
              return ok;
            }
            if (Date.now() > deadline) return false;
            await sleep(500);
          }
        }
        case 'mqtt-cut':
          bridgeProxy.cut();
          await sleep(prng.int(200, 2000));
          bridgeProxy.resume();
          return true;
        case 'device-cut':
          deviceCuts += 1;
          deviceProxy.cut();
          await sleep(prng.int(200, 1500));
          deviceProxy.resume();
          return true;
        case 'mosquitto-restart':
          await gate.hold(async () => log(await mosquitto.restart(prng.int(1000, 4000))));
          return true;
        case 'redis-restart':
          log(await o.redis.restart!(prng.int(1000, 5000)));
          return true;
        case 'poison-unroutable':
          await injectPoison('unroutable');
          return true;
        case 'poison-too-large':
          await injectPoison('too-large');
          return true;
        case 'reload':
          return reloads.inject();
      }
    };

    const outcome = await faultsThenDrain({
      events,
      stream,
      publishLoop,
      total,
      inject,
      injected,
      reloads,
      reloadCount: faults.reload,
      bridge,
      drain: { record, target, deadLetter, quietMs: o.quietMs ?? 45_000, timeoutMs: o.drainTimeoutMs ?? 300_000, settleMs: 3000 },
      // A prefetch's worth (MQTT 5: the receive maximum the source asks, which Mosquitto honours): the smaller of the two
      // prefetches a reload toggles between.
      inFlight: {
        threshold: Math.min(...RELOAD_PREFETCHES),
        message: burstMessage(runId),
        bridge,
        ...(sourceIsMqtt ? { holdTarget: { hold: () => rabbitProxy.holdReplies({ existingOnly: true }), release: () => rabbitProxy.releaseReplies() } } : {}),
      },
      ...(o.breakInjection !== undefined ? { breakInjection: o.breakInjection } : {}),
      log,
    });
    let leftAtSource: number | undefined;
    if (!sourceIsMqtt) {
      const conn = await amqp.connect(rabbitUrl, { clientProperties: { connection_name: `${HARNESS_CONNECTION_PREFIX} check` } });
      const ch = await conn.createChannel();
      leftAtSource = (await ch.checkQueue(srcQueue)).messageCount;
      await conn.close();
    }
    await bridge.stop();
    await sleep(1000);
    for (const e of bridge.unexpectedExits) notes.push(e.slice(0, 500));
    notes.push(bridge.counters.summary(), ...bridge.counters.violations());
    if (mqttCollector && mqttCollector.redeliveriesIgnored > 0) notes.push(`collector: ${mqttCollector.redeliveriesIgnored} copies Mosquitto sent it again (its own PUBACK lost) not counted`);
    report = analyse({
      outcome,
      path: o.path,
      seed: o.seed,
      faults: injected,
      record,
      target: target.messages,
      deadLetter: deadLetter.messages,
      durationMs: Date.now() - started,
      ...(leftAtSource === undefined ? {} : { leftAtSource }),
      notes,
    });
    if (report.lost > 0 || report.extraUnflagged > 0) log(`mosquitto log tail:\n${mosquitto.logTail()}`);
    return report;
  } finally {
    await bridge.stop().catch(() => undefined);
    await Promise.allSettled([publisher.close(), target.stop(), deadLetter.stop()]);
    await Promise.allSettled([bridgeProxy.stop(), deviceProxy.stop(), rabbitProxy.stop()]);
    await mosquitto.dispose(process.env.FAULTS_KEEP !== undefined);
    if (report && !process.env.FAULTS_KEEP) {
      await admin.deleteVhost(vhost);
      await o.redis.cleanup(keyPrefix).catch((err: unknown) => log(`could not delete the run's Redis keys: ${String(err)}`));
    }
  }
}
