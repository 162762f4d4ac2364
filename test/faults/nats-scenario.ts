/**
 * One fault run on a NATS JetStream path (issue 36): `amqp-jetstream` (RabbitMQ queue → JetStream stream) or
 * `jetstream-amqp` (JetStream stream, durable pull consumer → RabbitMQ headers exchange). The real bridge process
 * between the real brokers, a numbered stream published while faults are injected at seeded random points, then a
 * drain and a count, as in ./scenario.ts, whose stream, report and reload fault this reuses.
 *
 * NATS is the suite's own nats-server (test/support/own-nats.ts: a free port, JetStream, its store on disk), never the
 * machine's shared one; the bridge reaches it through a TCP proxy of ours. RabbitMQ is the shared one, in a vhost of
 * the run's own. Redis is the suite's own standalone one.
 *
 * Faults:
 * - sigkill: every other one (the first, third, …) through the test-only fault point
 *   (src/endpoints/test-fault-point.ts): the bridge kills itself right after a target confirmation, before the cache
 *   commit — the crash gap, made on purpose; the others plain SIGKILLs at a random moment;
 * - connection-close: the bridge's NATS connections cut at the proxy, or one of its RabbitMQ connections closed;
 * - nats-restart: the suite's own nats-server stopped and started again, its store on disk;
 * - redis-restart: here, the suite's Redis restarted *without* its data (the cache lost under the running bridge);
 * - reload: as in ./reload-fault.ts;
 * - poison-unroutable (jetstream-amqp only): messages without the route header, dead-lettered.
 *
 * Verdict: the suite's (report.ts violations); for amqp-jetstream stricter: the stream must store each message once
 * — no ID twice, no message under two IDs, and no extra copy at all, flagged or not (every resend comes within the
 * stream's duplicate_window). The one exception, reported in its own row: after the Redis restart without data, a
 * byte-identical message without any ID whose stamp records were lost gets a new stamp when redelivered, and that
 * flagged copy under a second ID is one no target can recognise (docs/delivery.md, limits of stamping).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import amqp from 'amqplib';
import { connect as natsConnect } from 'nats';
import { TcpProxy } from '../support/tcp-proxy.js';
import { OwnNats } from '../support/own-nats.js';
import { sleep } from '../support/wait.js';
import { BridgeControl, FAULT_BRIDGE_SETTINGS, writeRunConfig } from './bridge-control.js';
import { AmqpCollector, AmqpPublisher, type Collector, type Publisher } from './harness-clients.js';
import { NatsPublisher, NatsStreamCollector } from './nats-clients.js';
import { Prng } from './prng.js';
import { HARNESS_CONNECTION_PREFIX, type RabbitAdmin } from './rabbit-admin.js';
import { analyse, type FaultRunReport, type SentRecord } from './report.js';
import { RELOAD_PREFETCHES, ReloadFault } from './reload-fault.js';
import { POSSIBLE_DUPLICATE_HEADER, ROUTE_HEADER, ROUTE_VALUE, planStream, poisonBody, type Outgoing } from './stream.js';
import { StreamPublisher, faultsThenDrain } from './stream-run.js';
import { burstMessage } from './in-flight.js';
import { withVhost } from './run-parts.js';
import type { SuiteRedis } from './suite-redis.js';

export type NatsPathName = 'amqp-jetstream' | 'jetstream-amqp';
export const NATS_PATHS: readonly NatsPathName[] = ['amqp-jetstream', 'jetstream-amqp'];

export interface NatsScenarioOptions {
  path: NatsPathName;
  messages: number;
  seed: number;
  sigkills: number;
  closes: number;
  natsRestarts: number;
  redisRestarts: number;
  reloads: number;
  poison: number;
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

type NatsFault = 'sigkill' | 'connection-close' | 'nats-restart' | 'redis-restart' | 'poison-unroutable';

const TARGET_STREAM = 'FAULTS_TGT';
const TARGET_SUBJECT = 'faults.tgt';
const SOURCE_STREAM = 'FAULTS_SRC';
const SOURCE_SUBJECT = 'faults.src';
const LEASE_MS = 5000;

export async function runNatsScenario(o: NatsScenarioOptions): Promise<FaultRunReport> {
  const started = Date.now();
  const log = (line: string) => (o.log ?? console.log)(`[${o.path} ${((Date.now() - started) / 1000).toFixed(1).padStart(6)}s] ${line}`);
  const prng = new Prng(o.seed);
  const runId = `${o.path}-${o.seed}-${Date.now().toString(36)}`;
  const toStream = o.path === 'amqp-jetstream';
  const notes: string[] = [];
  if (o.redis.mode !== 'standalone') throw new Error(`path ${o.path} runs with the suite's own standalone Redis (--redis standalone)`);
  const counts: Record<NatsFault, number> = {
    sigkill: o.sigkills,
    'connection-close': o.closes,
    'nats-restart': o.natsRestarts,
    'redis-restart': o.redisRestarts,
    'poison-unroutable': toStream ? 0 : o.poison,
  };
  if (toStream && o.poison > 0) notes.push('poison left out: a JetStream target stores any subject its stream captures (refusals are in test/integration/nats-endpoints.test.ts)');
  notes.push('redis-restart here is a restart WITHOUT data: the cache is lost under the running bridge');

  const nats = new OwnNats();
  await nats.start();
  const natsProxy = await TcpProxy.forUrl(nats.url).start();
  const vhost = `faults-${runId}`;
  const admin = o.admin;
  await admin.createVhost(vhost);
  const rabbitUrl = withVhost(o.amqpUrl, vhost);
  // JetStream → AMQP: a pull consumer takes no faster than the bridge forwards, so a kill or a close would find nothing
  // in flight (the full run of 2026-12-06: 2 of 300 before a close); RabbitMQ's confirms are held here while a
  // prefetch's worth fills, as on the AMQP and MQTT paths. Only the connections open when the wait begins are held.
  const rabbitProxy = await TcpProxy.forUrl(o.amqpUrl).start();
  const bridgeRabbitUrl = toStream ? rabbitUrl : rabbitProxy.rewrite(rabbitUrl);
  const exchange = 'faults.target';
  {
    const conn = await amqp.connect(rabbitUrl, { clientProperties: { connection_name: `${HARNESS_CONNECTION_PREFIX} setup` } });
    const ch = await conn.createChannel();
    if (toStream) await ch.assertQueue('src', { durable: true });
    else {
      await ch.assertExchange(exchange, 'headers', { durable: true });
      await ch.assertQueue('tgt', { durable: true });
      await ch.bindQueue('tgt', exchange, '', { 'x-match': 'all', [ROUTE_HEADER]: ROUTE_VALUE });
    }
    await ch.assertQueue('dl', { durable: true });
    await conn.close();
    const nc = await natsConnect({ servers: `127.0.0.1:${nats.port}`, reconnect: false });
    const jsm = await nc.jetstreamManager();
    // File storage (kept across the server's restarts); the default duplicate_window, 2 minutes.
    await jsm.streams.add(toStream ? { name: TARGET_STREAM, subjects: [TARGET_SUBJECT] } : { name: SOURCE_STREAM, subjects: [SOURCE_SUBJECT] });
    await nc.close();
  }

  const publisher: Publisher = toStream ? new AmqpPublisher(rabbitUrl, 'src') : new NatsPublisher(nats.url, SOURCE_SUBJECT);
  const streamCollector = toStream ? new NatsStreamCollector(nats.url, TARGET_STREAM) : undefined;
  const target: Collector = streamCollector ?? new AmqpCollector(rabbitUrl, 'tgt');
  const deadLetter: Collector = new AmqpCollector(rabbitUrl, 'dl');
  await publisher.open();
  await target.start();
  await deadLetter.start();

  const keyPrefix = `faults-${runId}`;
  const adminToken = `faults-${runId}`;
  const yaml = [
    'log-level: info',
    'shutdown-timeout: 10000',
    'http-port: 0',
    `admin-token: "${adminToken}"`,
    'connections:',
    `  rabbit: { type: amqp, url: "${bridgeRabbitUrl}" }`,
    `  nats: { type: nats, url: "${natsProxy.rewrite(nats.url)}", ping-interval: 2000 }`,
    'id-cache:',
    ...o.redis.idCacheLines(),
    `  key-prefix: "${keyPrefix}"`,
    '  id-cache-size: 50000',
    `  reservation-lease: ${LEASE_MS}`,
    'bridges:',
    `  - name: faults-${o.path}`,
    toStream ? '    source: { connection: rabbit, queue: "src" }' : `    source: { connection: nats, stream: "${SOURCE_STREAM}", consumer: "bridge" }`,
    toStream ? `    target: { connection: nats, subject: "${TARGET_SUBJECT}" }` : `    target: { connection: rabbit, exchange: "${exchange}", routing-key: "" }`,
    '    dead-letter: { connection: rabbit, queue: "dl" }',
    `    prefetch: ${RELOAD_PREFETCHES[0]}`,
    ...FAULT_BRIDGE_SETTINGS,
    '',
  ].join('\n');
  const { dir, configFile } = writeRunConfig(yaml);
  const bridge = new BridgeControl(configFile, log);
  const reloads = new ReloadFault(configFile, `faults-${o.path}`, adminToken, bridge, o.seed, log);

  const record: SentRecord = { sent: new Map(), resends: new Map(), poison: new Map(), uncertain: new Set(), identical: { sent: 0, uncertain: 0 } };
  const injected: Record<string, number> = Object.fromEntries([...Object.keys(counts), 'reload', 'crash-after-confirm'].map((k) => [k, 0]));
  let report: FaultRunReport | undefined;
  let publisherPaused: Promise<void> = Promise.resolve();

  try {
    log(`seed ${o.seed}; vhost ${vhost}; nats-server ${nats.url} (store ${nats.dir}); config ${configFile}`);
    if (!(await bridge.start())) throw new Error('the bridge did not start');
    const plan = planStream(o.messages, prng, runId);
    const events: { kind: NatsFault; at: number }[] = [];
    for (const [kind, n] of Object.entries(counts) as [NatsFault, number][]) {
      for (let i = 0; i < n; i++) {
        const [lo, hi] = kind === 'poison-unroutable' ? [0.05, 0.45] : kind === 'nats-restart' ? [0.4, 0.8] : [0.05, 0.9];
        events.push({ kind, at: lo + prng.next() * (hi - lo) });
      }
    }
    events.sort((a, b) => a.at - b.at);
    log(`faults planned: ${events.map((e) => `${e.kind}@${Math.round(e.at * 100)}%`).join(', ')}`);

    const total = plan.messages.length;
    const stream = new StreamPublisher(
      plan.messages,
      record,
      o.publishSeconds,
      async (batch) => {
        await publisherPaused;
        await publisher.publish(batch);
      },
      () => publisher.open(),
      log,
    );
    const publishChunk = (batch: Outgoing[]) => stream.publishChunk(batch);
    const publishLoop = stream.start();

    let poisonNo = 0;
    let sigkills = 0;
    let closes = 0;
    const inject = async (kind: NatsFault): Promise<boolean> => {
      switch (kind) {
        case 'sigkill': {
          sigkills += 1;
          if (sigkills % 2 === 1) {
            // The crash gap on purpose: killed right after a target confirmation, before the cache commit.
            const after = prng.int(5, 100);
            await bridge.sigkill();
            const how = await bridge.crashAfterConfirms(after);
            log(how === 'crashed' ? `bridge killed itself after ${after} target confirmation(s) (test fault point)` : `fewer than ${after} confirmations came within 30 s: SIGKILLed instead`);
            if (how === 'crashed') injected['crash-after-confirm']! += 1;
          } else {
            await bridge.sigkill();
          }
          await sleep(prng.int(0, 1000));
          await bridge.start();
          return true;
        }
        case 'connection-close': {
          closes += 1;
          if (closes % 2 === 1) {
            // A reset of every connection through the proxy; new ones are let through again at once.
            natsProxy.cut();
            natsProxy.resume();
            log('cut the bridge\'s NATS connections at the proxy');
            return true;
          }
          // The bridge may be restarting after another fault: wait for its connections, as ./scenario.ts does.
          const deadline = Date.now() + 20_000;
          let list = await admin.bridgeConnections(vhost, bridge.pid).catch(() => []);
          while (list.length === 0 && Date.now() < deadline) {
            await sleep(500);
            list = await admin.bridgeConnections(vhost, bridge.pid).catch(() => []);
          }
          if (list.length === 0) {
            log('no bridge connection to close on RabbitMQ within 20 s');
            return false;
          }
          const victim = prng.pick(list);
          const ok = await admin.closeConnection(victim.name);
          log(`closed RabbitMQ connection '${victim.clientName || victim.name}': ${ok ? 'ok' : 'failed'}`);
          return ok;
        }
        case 'nats-restart': {
          const downMs = prng.int(1000, 4000);
          let resume!: () => void;
          publisherPaused = new Promise((r) => (resume = r));
          try {
            await nats.stop();
            await sleep(downMs);
            await nats.start();
            log(`own nats-server restarted (store on disk) after ${downMs} ms down`);
          } finally {
            resume();
          }
          return true;
        }
        case 'redis-restart':
          log(await o.redis.dataLoss([], 1));
          return true;
        case 'poison-unroutable': {
          poisonNo += 1;
          const m: Outgoing = { type: 'poison', poison: poisonNo, kind: 'unroutable', body: poisonBody(poisonNo, 'unroutable', runId, 0), ...(poisonNo % 2 === 0 ? { id: `faults-${runId}-poison-${poisonNo}` } : {}) };
          if (stream.publishing) stream.poisonQueue.push(m);
          else await publishChunk([m]);
          return true;
        }
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
      reloadCount: o.reloads,
      bridge,
      // Late extra copies (a resend after the lease) would come within the settle time.
      drain: { record, target, deadLetter, quietMs: o.quietMs ?? 60_000, timeoutMs: o.drainTimeoutMs ?? 300_000, settleMs: LEASE_MS + 3000 },
      // A prefetch's worth: the smaller of the two prefetches a reload toggles between.
      inFlight: {
        threshold: Math.min(...RELOAD_PREFETCHES),
        message: burstMessage(runId),
        bridge,
        ...(toStream ? {} : { holdTarget: { hold: () => rabbitProxy.holdReplies({ existingOnly: true }), release: () => rabbitProxy.releaseReplies() } }),
        // A JetStream source after kills: what a dead process held stays pending at the consumer until its ack_wait
        // (30 s, the least the bridge creates) runs out, and max_ack_pending (2 × the first prefetch, 1,000) bounds what
        // the next process is given meanwhile: two kills in a row with ~500 each left it 20 for 18–20 s (a 5,000-message
        // run of 2026-12-06). The wait covers an ack_wait.
        ...(toStream ? {} : { timeoutMs: 40_000 }),
      },
      ...(o.breakInjection !== undefined ? { breakInjection: o.breakInjection } : {}),
      log,
    });
    await bridge.stop();
    await sleep(1000);
    for (const e of bridge.unexpectedExits) notes.push(e.slice(0, 500));
    notes.push(bridge.counters.summary(), ...bridge.counters.violations());
    const droppedAtTarget = countLogs(dir, 'duplicate dropped by the target');
    notes.push(`duplicates dropped by the stream itself (PubAck duplicate: true), over all bridge processes: ${droppedAtTarget}`);
    report = analyse({ outcome, path: o.path, seed: o.seed, faults: injected, cacheLossFaults: injected['redis-restart'] ?? 0, record, target: target.messages, deadLetter: deadLetter.messages, durationMs: Date.now() - started, notes });
    if (streamCollector) {
      const stored = await streamCollector.storedCount();
      const ids = new Map<string, number>();
      for (const m of streamCollector.messages) {
        const v = m.headers['Nats-Msg-Id'];
        const id = typeof v === 'string' ? v : '(none)';
        ids.set(id, (ids.get(id) ?? 0) + 1);
      }
      const idsTwice = [...ids.values()].filter((n) => n > 1).length;
      const flaggedInStream = streamCollector.messages.filter((m) => m.headers[POSSIBLE_DUPLICATE_HEADER] === 'true').length;
      notes.push(`stream ${TARGET_STREAM}: ${stored} message(s) stored, ${ids.size} distinct Nats-Msg-Id, ${idsTwice} ID(s) stored twice, ${flaggedInStream} stored copies flagged possible-duplicate`);
      report.strict = { stored, distinctIds: ids.size, idsTwice };
    }
    return report;
  } finally {
    await bridge.stop().catch(() => undefined);
    await Promise.allSettled([publisher.close(), target.stop(), deadLetter.stop()]);
    await Promise.allSettled([natsProxy.stop(), rabbitProxy.stop()]);
    if (report && !process.env.FAULTS_KEEP) {
      await nats.destroy();
      await admin.deleteVhost(vhost);
      await o.redis.cleanup(keyPrefix).catch(() => undefined);
    } else {
      await nats.kill();
      log(`kept: nats store ${nats.dir}, vhost ${vhost}`);
    }
  }
}

/** Log lines whose message starts with `prefix`, over every bridge process of the run (bridge-N.jsonl beside the config). */
function countLogs(dir: string, prefix: string): number {
  let n = 0;
  for (let i = 1; i < 1000; i++) {
    let text: string;
    try {
      text = readFileSync(join(dir, `bridge-${i}.jsonl`), 'utf8');
    } catch {
      break;
    }
    for (const line of text.split('\n')) if (line.includes(`"msg":"${prefix}`)) n += 1;
  }
  return n;
}
