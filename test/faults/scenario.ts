/**
 * One fault run on one path (AMQP→AMQP, AMQP→STOMP or STOMP→AMQP, the STOMP side ActiveMQ or RabbitMQ's STOMP plugin):
 * the real bridge process between the real brokers, a numbered stream published while faults are injected at seeded
 * random points, then a drain and a count.
 *
 * Layout of a run (all on 127.0.0.1):
 * - RabbitMQ side: a vhost of the run's own, so that the bridge's connections are the vhost's connections that are
 *   not the harness's, and cleanup is one vhost delete. The AMQP target is a headers exchange bound to the target
 *   queue for messages carrying `x-faults-route: ok`: a poison message without it is unroutable (basic.return).
 *   "Too large" = larger than a lowered global max_message_size (RabbitMQ reads it when a channel opens).
 * - Two bridges run in the process, sharing its connections (src/endpoints/connections.ts): each reads a source queue
 *   of its own (the stream is published to them in turns, chunk by chunk), both forward to the one target and dead-letter
 *   destination. A kill, a broker-side connection close and a broker restart reach both; a reload changes the first
 *   one only (the second must stay unchanged: its channels, its session).
 * - The bridges reach their target through a TCP proxy of ours (stalled for a while by one fault).
 * - Redis is the suite's own, with AOF (restarted by one fault), or the local Redis Cluster or Sentinel setup
 *   (./suite-redis.ts): `redis-failover` kills the master holding the bridge's keys, `redis-data-loss` wipes the cache.
 * - Dead letters go to a destination on the other broker where it helps: a too-large message for RabbitMQ is
 *   too large for every RabbitMQ channel, so its dead-letter destination is an ActiveMQ queue.
 * - RabbitMQ's STOMP plugin (paths `stomp-rabbitmq-amqp`, `amqp-stomp-rabbitmq`): the bridge's STOMP connection uses
 *   the run's vhost (`host` header), so the connection-close fault can pick it too; the harness publishes and collects
 *   that queue over AMQP (its connections carry the harness's name and are never closed by a fault, and an AMQP
 *   collector cannot count a redelivery as a second copy, as a STOMP one could with RabbitMQ's per-delivery
 *   message-id). A broker restart restarts RabbitMQ, as on amqp-amqp.
 */
import { resolve } from 'node:path';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import amqp from 'amqplib';
import { TcpProxy } from '../support/tcp-proxy.js';
import { BridgeControl, FAULT_BRIDGE_SETTINGS, writeRunConfig } from './bridge-control.js';
import { AmqpCollector, AmqpPublisher, StompCollector, StompPublisher, type Collector, type Publisher, type Received } from './harness-clients.js';
import { Amqp10Collector, Amqp10Publisher } from './amqp10-clients.js';
import { amqp10NodeAddress } from '../../src/config/protocols/amqp10-address.js';
import { OwnRedis } from './own-redis.js';
import { standaloneRedis, type SuiteRedis } from './suite-redis.js';
import { addressKeys, stampKey } from '../../src/cache/keys.js';
import { sourceAddress, targetAddress } from '../../src/config/protocols/amqp-address.js';
import { stompAddress, stompDestination } from '../../src/config/protocols/stomp-address.js';
import { STOMP_READ_LIMITS } from '../../src/config/schema.js';
import { AMQP10_MAX_MESSAGE_SIZE } from '../../src/config/protocols/amqp10-schema.js';
import { Prng } from './prng.js';
import { HARNESS_CONNECTION_PREFIX, RabbitAdmin } from './rabbit-admin.js';
import { analyse, type FaultRunReport, type Recovery, type SentRecord } from './report.js';
import { ROUTE_HEADER, ROUTE_VALUE, parseBody, planStream, poisonBody, type Outgoing, type PoisonKind } from './stream.js';
import { StreamPublisher, faultsThenDrain } from './stream-run.js';
import { burstMessage } from './in-flight.js';
import { sleep } from '../support/wait.js';
import { RELOAD_PREFETCHES, ReloadFault } from './reload-fault.js';
import { Gate, withVhost } from './run-parts.js';

/** An AMQP 1.0 connection of the run, for the cache addresses (its URL set where used). */
const AMQP10_CONNECTION = { name: 'rabbit10', type: 'amqp10', urls: [], connectTimeout: 10_000, idleTimeout: 30_000, maxMessageSize: AMQP10_MAX_MESSAGE_SIZE } as const;

/** The second bridge's prefetch: neither of RELOAD_PREFETCHES, which the reload fault toggles on the first bridge. */
const SECOND_BRIDGE_PREFETCH = 400;

const execFileP = promisify(execFile);
const ACTIVEMQ_SCRIPT = resolve(import.meta.dirname, '../../scripts/activemq.sh');

export type PathName = 'amqp-amqp' | 'amqp-stomp' | 'stomp-amqp' | 'stomp-rabbitmq-amqp' | 'amqp-stomp-rabbitmq' | 'amqp10-amqp' | 'amqp-amqp10';
export const PATHS: readonly PathName[] = ['amqp-amqp', 'amqp-stomp', 'stomp-amqp', 'stomp-rabbitmq-amqp', 'amqp-stomp-rabbitmq', 'amqp10-amqp', 'amqp-amqp10'];
/** Paths through RabbitMQ's AMQP 1.0 plugin (on the AMQP port, beside 0-9-1). */
export const AMQP10_PATHS: readonly PathName[] = ['amqp10-amqp', 'amqp-amqp10'];
/** Paths through RabbitMQ's STOMP plugin (RABBITMQ_STOMP_URL). */
export const RABBITMQ_STOMP_PATHS: readonly PathName[] = ['stomp-rabbitmq-amqp', 'amqp-stomp-rabbitmq'];
/** Paths through ActiveMQ (STOMP_URL). */
export const ACTIVEMQ_PATHS: readonly PathName[] = ['amqp-stomp', 'stomp-amqp'];

/** Faults of the Redis topology (cluster, sentinel) and of cache loss; optional in a FaultCounts (default 0). */
export type RedisFaultKind = 'redis-failover' | 'redis-data-loss';

export type FaultKind =
  | 'sigkill'
  | 'sigstop'
  | 'connection-close'
  | 'broker-restart'
  | 'target-stall'
  | 'redis-restart'
  | 'poison-unroutable'
  | 'poison-too-large'
  | 'reload'
  | RedisFaultKind;

/** Optional in a FaultCounts (default 0): the Redis topology's faults, and reloads. */
type OptionalFaultKind = RedisFaultKind | 'reload' | 'sigstop';

export type FaultCounts = Record<Exclude<FaultKind, OptionalFaultKind>, number> & Partial<Record<OptionalFaultKind, number>>;

export const FULL_FAULTS: FaultCounts = {
  sigkill: 5,
  // The bridge frozen (SIGSTOP) for 3-6 s, longer than its liveness key lives, then woken (docs/design.md §10.3).
  sigstop: 1,
  'connection-close': 5,
  'broker-restart': 1,
  'target-stall': 1,
  'redis-restart': 1,
  'poison-unroutable': 2,
  'poison-too-large': 2,
  // Reloads (SIGHUP or POST /reload; the file unchanged or one setting changed) evenly over the stream, on their own
  // schedule beside the other faults (./reload-fault.ts): about one every 5 s of a 90 s stream.
  reload: 15,
  // On cluster and sentinel (standalone has no replica). A data loss is asked for (--redis-data-losses): it can make a
  // re-sent ID pass, which a run without one must not show.
  'redis-failover': 1,
  'redis-data-loss': 0,
};

export interface ScenarioOptions {
  path: PathName;
  messages: number;
  seed: number;
  faults: FaultCounts;
  /** Publishing is paced to take about this long, so that faults happen while messages flow. */
  publishSeconds: number;
  stallMs: number;
  amqpUrl: string;
  stompUrl?: string;
  /** RabbitMQ's STOMP plugin, for the `*-stomp-rabbitmq*` paths (its vhost is the run's own). */
  rabbitStompUrl?: string;
  /** The cache's Redis: the suite's own standalone one, or a SuiteRedis of any mode. */
  redis: OwnRedis | SuiteRedis;
  admin: RabbitAdmin;
  /** After publishing and faults, how long the target may stay quiet before the run stops waiting. */
  quietMs?: number;
  /** Hard bound of the drain phase. */
  drainTimeoutMs?: number;
  /** Size of a too-large poison message, and the limit set on RabbitMQ. */
  tooLargeBytes?: number;
  maxMessageSize?: number;
  /** The bridge's reservation-lease (ms): how long a SIGKILLed owner's reservations block redeliveries. Default 30 s. */
  reservationLeaseMs?: number;
  /** A fault kind whose injection fails on purpose (--break-injection): the run must FAIL and name it. */
  breakInjection?: string;
  log?: (line: string) => void;
}

interface FaultEvent {
  kind: FaultKind;
  /** Fraction of the stream published before the fault fires. */
  at: number;
}

/** Seeded schedule: poison early (before a broker restart can re-open the harness's channels), Redis faults mid-stream, the rest anywhere. */
export function planFaults(counts: FaultCounts, prng: Prng): FaultEvent[] {
  const events: FaultEvent[] = [];
  for (const [kind, n] of Object.entries(counts) as [FaultKind, number][]) {
    // Reloads have their own schedule and PRNG (./reload-fault.ts): a seed replays the other faults as before.
    if (kind === 'reload') continue;
    for (let i = 0; i < (n ?? 0); i++) {
      let lo = 0.05;
      let hi = 0.9;
      if (kind.startsWith('poison')) [lo, hi] = [0.05, 0.45];
      if (kind === 'broker-restart') [lo, hi] = [0.5, 0.85];
      // While messages flow (a 30 s target stall late in the stream could push them past the end of publishing).
      if (kind === 'redis-failover' || kind === 'redis-data-loss') [lo, hi] = [0.2, 0.7];
      events.push({ kind, at: lo + prng.next() * (hi - lo) });
    }
  }
  return events.sort((a, b) => a.at - b.at);
}

export async function runScenario(o: ScenarioOptions): Promise<FaultRunReport> {
  const started = Date.now();
  const t = () => `${((Date.now() - started) / 1000).toFixed(1).padStart(6)}s`;
  const log = (line: string) => (o.log ?? console.log)(`[${o.path} ${t()}] ${line}`);
  const prng = new Prng(o.seed);
  const runId = `${o.path}-${o.seed}-${Date.now().toString(36)}`;
  const rabbitStomp = RABBITMQ_STOMP_PATHS.includes(o.path);
  const sourceIsStomp = o.path === 'stomp-amqp' || o.path === 'stomp-rabbitmq-amqp';
  const targetIsStomp = o.path === 'amqp-stomp' || o.path === 'amqp-stomp-rabbitmq';
  // AMQP 1.0 through RabbitMQ's plugin: the harness publishes (amqp10-amqp) or collects (amqp-amqp10) over 1.0 too, so
  // that the stream's headers pass as application properties (a 0-9-1 client sees them as one blob: docs/mapping.md).
  const sourceIs10 = o.path === 'amqp10-amqp';
  const targetIs10 = o.path === 'amqp-amqp10';
  // The STOMP side is ActiveMQ: it is restarted by the broker-restart fault, and its queues are read over STOMP.
  const needsStomp = (sourceIsStomp || targetIsStomp) && !rabbitStomp;
  if (needsStomp && !o.stompUrl) throw new Error(`path ${o.path} needs ActiveMQ: set STOMP_URL`);
  if (rabbitStomp && !o.rabbitStompUrl) throw new Error(`path ${o.path} needs RabbitMQ's STOMP plugin: set RABBITMQ_STOMP_URL`);
  // Where the harness publishes and reads over AMQP: RabbitMQ queues, whichever protocol the bridge uses on them.
  const sourceOnRabbit = !sourceIsStomp || rabbitStomp;
  const targetOnRabbit = !targetIsStomp || rabbitStomp;
  const faults: FaultCounts = { 'redis-failover': 0, 'redis-data-loss': 0, reload: 0, sigstop: 0, ...o.faults };
  const notes: string[] = [];
  const redis: SuiteRedis = o.redis instanceof OwnRedis ? standaloneRedis(o.redis) : o.redis;
  if (!redis.failover && (faults['redis-failover'] ?? 0) > 0) {
    notes.push(`redis-failover left out: ${redis.mode} Redis has no replica to promote (use --redis cluster or sentinel)`);
    faults['redis-failover'] = 0;
  }
  if (!redis.restart && faults['redis-restart'] > 0) {
    notes.push(`redis-restart left out: on ${redis.mode}, a master that stops is failed over (that is redis-failover)`);
    faults['redis-restart'] = 0;
  }

  // Unroutable exists only on an AMQP exchange: ActiveMQ creates any destination it is sent to.
  // Too large: RabbitMQ refuses a message over max_message_size; ActiveMQ 5.17 answers a frame over one of its STOMP
  // limits (header line 10 KiB, 1000 headers, body 100 MiB, wireFormat.maxFrameSize) with an ERROR without receipt-id
  // and closes the connection: no per-message rejection. The bridge checks those limits before sending, so for an
  // ActiveMQ target the too-large poison is a message with an 11 KiB header, refused by the bridge itself.
  if (targetIsStomp && faults['poison-unroutable'] > 0) {
    notes.push(`unroutable poison left out: a STOMP target (${rabbitStomp ? "RabbitMQ's /queue/" : 'ActiveMQ'}) routes every destination`);
    faults['poison-unroutable'] = 0;
  }
  if (sourceIs10 && faults['poison-too-large'] > 0) {
    // Tried: the plugin reads max_message_size at each 1.0 transfer (over it, it ends the session), so the poison must
    // go in while the limit is raised, and the bridge reads it within milliseconds, before rabbitmqctl has lowered the
    // limit again (about a second): its target's reopened channel then takes the poison. A too-large message to an
    // AMQP 1.0 target is amqp-amqp10's; one to an AMQP target, amqp-amqp's.
    notes.push("too-large poison left out: over AMQP 1.0 the harness cannot put a message over RabbitMQ's limit into the source without the bridge's target seeing the limit raised");
    faults['poison-too-large'] = 0;
  }
  if (targetIs10 && faults['poison-unroutable'] > 0) {
    // The plugin hands a headers exchange the application properties as one blob, which no binding matches.
    notes.push('unroutable poison left out: the AMQP 1.0 target sends to the queue (/amq/queue/tgt), which takes every message');
    faults['poison-unroutable'] = 0;
  }
  if (!targetIsStomp && !o.stompUrl && faults['poison-too-large'] > 0) {
    // A message too large for RabbitMQ is too large for every RabbitMQ channel, the dead-letter one included.
    notes.push('too-large poison left out: its dead letter needs ActiveMQ (STOMP_URL)');
    faults['poison-too-large'] = 0;
  }

  const vhost = `faults-${runId}`;
  const admin = o.admin;
  await admin.createVhost(vhost);
  const rabbitUrl = withVhost(o.amqpUrl, vhost);
  const stompSideUrl = rabbitStomp ? o.rabbitStompUrl : o.stompUrl;
  const targetProxy = await TcpProxy.forUrl(targetIsStomp ? stompSideUrl! : o.amqpUrl).start();
  const rabbitTargetUrl = withVhost(targetProxy.rewrite(o.amqpUrl), vhost);
  // The broker-side close finds the bridge's connections by the name each gives itself (rabbit-admin.ts); RabbitMQ 3.10
  // showed the bridge's AMQP 1.0 connections with no such name in a first try here, so they go through a proxy of ours,
  // whose cut() resets them as a broker close would. The target's is the target proxy already; the source's gets one.
  const sourceProxy10 = sourceIs10 ? await TcpProxy.forUrl(o.amqpUrl).start() : undefined;
  // The URL's path names the vhost (the endpoint sends it as `vhost:<name>` in the open frame, as RabbitMQ's plugin reads it).
  const amqp10Url = (base: string) => `${base.replace(/\/+$/, '')}/${encodeURIComponent(vhost)}`;
  const rabbit10SourceUrl = sourceProxy10 ? amqp10Url(sourceProxy10.rewrite(o.amqpUrl)) : undefined;
  const rabbit10TargetUrl = amqp10Url(targetProxy.rewrite(o.amqpUrl));
  const stompTargetUrl = targetIsStomp ? targetProxy.rewrite(stompSideUrl!) : undefined;

  const srcQueue = sourceOnRabbit ? 'src' : `faults-src-${runId}`;
  // The second bridge's source, on the same connection as the first's.
  const srcQueue2 = sourceOnRabbit ? 'src2' : `faults-src2-${runId}`;
  const tgtQueue = targetOnRabbit ? 'tgt' : `faults-tgt-${runId}`;
  const exchange = 'faults.target';
  // Dead letters: on ActiveMQ when the target is RabbitMQ and STOMP is available (too-large messages), else RabbitMQ.
  const dlOnStomp = !targetIsStomp && o.stompUrl !== undefined;
  const dlQueue = dlOnStomp ? `faults-dl-${runId}` : 'dl';

  // Harness setup on RabbitMQ (queues in the run's vhost).
  {
    const conn = await amqp.connect(rabbitUrl, { clientProperties: { connection_name: `${HARNESS_CONNECTION_PREFIX} setup` } });
    const ch = await conn.createChannel();
    if (sourceOnRabbit) await ch.assertQueue(srcQueue, { durable: true });
    if (sourceOnRabbit) await ch.assertQueue(srcQueue2, { durable: true });
    // Durable and without arguments, as RabbitMQ's STOMP plugin declares a `/queue/` destination itself.
    if (targetIsStomp && rabbitStomp) await ch.assertQueue(tgtQueue, { durable: true });
    if (targetIs10) {
      await ch.assertQueue(tgtQueue, { durable: true });
    } else if (!targetIsStomp) {
      await ch.assertExchange(exchange, 'headers', { durable: true });
      await ch.assertQueue(tgtQueue, { durable: true });
      await ch.bindQueue(tgtQueue, exchange, '', { 'x-match': 'all', [ROUTE_HEADER]: ROUTE_VALUE });
    }
    if (!dlOnStomp) await ch.assertQueue(dlQueue, { durable: true });
    await conn.close();
  }

  const publisherOf = (queue: string): Publisher =>
    sourceIs10 ? new Amqp10Publisher(o.amqpUrl, vhost, queue) : sourceOnRabbit ? new AmqpPublisher(rabbitUrl, queue) : new StompPublisher(o.stompUrl!, queue);
  const publisher = publisherOf(srcQueue);
  const publisher2 = publisherOf(srcQueue2);
  const publishers = [publisher, publisher2];
  const target: Collector = targetIs10 ? new Amqp10Collector(o.amqpUrl, vhost, tgtQueue) : targetOnRabbit ? new AmqpCollector(rabbitUrl, tgtQueue) : new StompCollector(o.stompUrl!, tgtQueue);
  const deadLetter: Collector = dlOnStomp ? new StompCollector(o.stompUrl!, dlQueue) : new AmqpCollector(rabbitUrl, dlQueue);
  const tooLargeBytes = o.tooLargeBytes ?? 3 * 1024 * 1024;
  const maxMessageSize = o.maxMessageSize ?? 2 * 1024 * 1024;
  let originalMaxSize: number | undefined;
  // Read before the harness's publishers open their channels (RabbitMQ reads the limit when a channel opens): a limit
  // already below the poison, left by an interrupted or concurrent run, would refuse the harness's own publish of it
  // and the injection would fail (as the verdict then says). Such a leftover is unset: the node's default, after too.
  if (faults['poison-too-large'] > 0 && !targetIsStomp) {
    originalMaxSize = await admin.getMaxMessageSize();
    if (originalMaxSize !== undefined && originalMaxSize <= tooLargeBytes) {
      log(`RabbitMQ max_message_size is ${originalMaxSize}, not above this run's too-large poison: a leftover of an interrupted or concurrent run, unset (the node's default) for this run and after it`);
      originalMaxSize = undefined;
      await admin.setMaxMessageSize(undefined);
    }
  }
  await publisher.open();
  await publisher2.open();
  await target.start();
  await deadLetter.start();

  let lowered = false;
  // An interrupted run (Ctrl-C, kill) must not leave the shared broker's limit lowered: restore it, then exit.
  const restoreOnSignal = (signal: NodeJS.Signals): void => {
    void admin
      .setMaxMessageSize(originalMaxSize)
      .catch(() => undefined)
      .finally(() => process.exit(signal === 'SIGINT' ? 130 : 143));
  };
  const lowerLimit = async () => {
    await admin.setMaxMessageSize(maxMessageSize);
    if (!lowered) {
      process.once('SIGINT', restoreOnSignal);
      process.once('SIGTERM', restoreOnSignal);
    }
    lowered = true;
  };
  if (faults['poison-too-large'] > 0 && !targetIsStomp) {
    await lowerLimit();
    log(`RabbitMQ max_message_size lowered from ${originalMaxSize ?? 'default'} to ${maxMessageSize} (restored at the end)`);
  }

  // The cache keys of the bridge (src/cache/keys.ts): the target address's IDs and the source's stamp records. Their
  // hash tags pick the cluster master a redis-failover or a redis-data-loss goes for.
  const keyPrefix = `faults-${runId}`;
  // (A RabbitMQ STOMP connection carries the run's vhost as `host`, which is part of its address.)
  const cacheKeys = [
    addressKeys(
      keyPrefix,
      targetIs10
        ? amqp10NodeAddress({ ...AMQP10_CONNECTION, urls: [rabbit10TargetUrl] }, `/amq/queue/${tgtQueue}`)
        : targetIsStomp
        ? stompAddress({ name: 'stomp-target', type: 'stomp', urls: [stompTargetUrl!], heartBeat: [10_000, 10_000], connectTimeout: 10_000, ...STOMP_READ_LIMITS, ...(rabbitStomp ? { host: vhost } : {}) }, stompDestination(tgtQueue))
        : targetAddress({ name: 'rabbit-target', type: 'amqp', urls: [rabbitTargetUrl], heartbeat: 10, connectTimeout: 10_000 }, { exchange, routingKey: '' }),
    ).ids,
    stampKey(
      keyPrefix,
      sourceIs10
        ? amqp10NodeAddress({ ...AMQP10_CONNECTION, urls: [rabbit10SourceUrl!] }, `/amq/queue/${srcQueue}`)
        : sourceIsStomp
        ? stompAddress({ name: 'stomp-source', type: 'stomp', urls: [stompSideUrl!], heartBeat: [10_000, 10_000], connectTimeout: 10_000, ...STOMP_READ_LIMITS, ...(rabbitStomp ? { host: vhost } : {}) }, stompDestination(srcQueue))
        : sourceAddress({ name: 'rabbit', type: 'amqp', urls: [rabbitUrl], heartbeat: 10, connectTimeout: 10_000 }, srcQueue),
      'fingerprint',
    ),
    stampKey(
      keyPrefix,
      sourceIs10
        ? amqp10NodeAddress({ ...AMQP10_CONNECTION, urls: [rabbit10SourceUrl!] }, `/amq/queue/${srcQueue2}`)
        : sourceIsStomp
        ? stompAddress({ name: 'stomp-source', type: 'stomp', urls: [stompSideUrl!], heartBeat: [10_000, 10_000], connectTimeout: 10_000, ...STOMP_READ_LIMITS, ...(rabbitStomp ? { host: vhost } : {}) }, stompDestination(srcQueue2))
        : sourceAddress({ name: 'rabbit', type: 'amqp', urls: [rabbitUrl], heartbeat: 10, connectTimeout: 10_000 }, srcQueue2),
      'fingerprint',
    ),
  ];

  // The bridge's configuration.
  const conns: string[] = [];
  const connUsed = new Set<string>();
  const srcConn = sourceIs10 ? 'rabbit10' : !sourceIsStomp ? 'rabbit' : rabbitStomp ? 'rabbitstomp' : 'activemq';
  const srcOf = (queue: string) => (sourceIs10 ? `{ connection: ${srcConn}, address: "/amq/queue/${queue}" }` : `{ connection: ${srcConn}, queue: "${queue}" }`);
  const src = srcOf(srcQueue);
  const src2 = srcOf(srcQueue2);
  connUsed.add(srcConn);
  const tgtConn = targetIs10 ? 'rabbit10-target' : !targetIsStomp ? 'rabbit-target' : rabbitStomp ? 'rabbitstomp-target' : 'activemq-target';
  const tgt = targetIs10
    ? `{ connection: ${tgtConn}, address: "/amq/queue/${tgtQueue}" }`
    : targetIsStomp
      ? `{ connection: ${tgtConn}, queue: "${tgtQueue}" }`
      : `{ connection: ${tgtConn}, exchange: "${exchange}", routing-key: "" }`;
  connUsed.add(tgtConn);
  const dl = dlOnStomp ? `{ connection: activemq, queue: "${dlQueue}" }` : `{ connection: rabbit, queue: "${dlQueue}" }`;
  connUsed.add(dlOnStomp ? 'activemq' : 'rabbit');
  if (connUsed.has('rabbit')) conns.push(`  rabbit: { type: amqp, url: "${rabbitUrl}" }`);
  if (connUsed.has('rabbit-target')) conns.push(`  rabbit-target: { type: amqp, url: "${rabbitTargetUrl}" }`);
  if (connUsed.has('rabbit10')) conns.push(`  rabbit10: { type: amqp10, url: "${rabbit10SourceUrl}" }`);
  // RabbitMQ's plugin ends the session for a message over max_message_size, without an outcome: the bridge is told the
  // lowered limit, as an operator would set it, and refuses the too-large poison itself.
  const maxSize10 = faults['poison-too-large'] > 0 ? `, max-message-size: ${maxMessageSize}` : '';
  if (connUsed.has('rabbit10-target')) conns.push(`  rabbit10-target: { type: amqp10, url: "${rabbit10TargetUrl}"${maxSize10} }`);
  if (connUsed.has('activemq')) conns.push(`  activemq: { type: stomp, url: "${o.stompUrl}" }`);
  if (connUsed.has('activemq-target')) conns.push(`  activemq-target: { type: stomp, url: "${stompTargetUrl}" }`);
  // RabbitMQ's STOMP plugin reads the `host` header as the vhost: the run's own.
  if (connUsed.has('rabbitstomp')) conns.push(`  rabbitstomp: { type: stomp, url: "${o.rabbitStompUrl}", host: "${vhost}" }`);
  if (connUsed.has('rabbitstomp-target')) conns.push(`  rabbitstomp-target: { type: stomp, url: "${stompTargetUrl}", host: "${vhost}" }`);
  const adminToken = `faults-${runId}`;
  const yaml = [
    'log-level: info',
    'shutdown-timeout: 10000',
    // The HTTP API for the reload fault's POST /reload (port 0: each process logs the one it got).
    'http-port: 0',
    `admin-token: "${adminToken}"`,
    'connections:',
    ...conns,
    'id-cache:',
    ...redis.idCacheLines(),
    `  key-prefix: "${keyPrefix}"`,
    '  id-cache-size: 50000',
    ...(o.reservationLeaseMs ? [`  reservation-lease: ${o.reservationLeaseMs}`] : []),
    'bridges:',
    `  - name: faults-${o.path}`,
    `    source: ${src}`,
    `    target: ${tgt}`,
    `    dead-letter: ${dl}`,
    `    prefetch: ${RELOAD_PREFETCHES[0]}`,
    ...FAULT_BRIDGE_SETTINGS,
    // The second bridge: the same connections (so the same shared ones), its own source; a prefetch the reload fault
    // never writes, so that a changed reload changes the first bridge only.
    `  - name: faults-${o.path}-2`,
    `    source: ${src2}`,
    `    target: ${tgt}`,
    `    dead-letter: ${dl}`,
    `    prefetch: ${SECOND_BRIDGE_PREFETCH}`,
    ...FAULT_BRIDGE_SETTINGS,
    '',
  ].join('\n');
  const { configFile } = writeRunConfig(yaml);
  const bridge = new BridgeControl(configFile, log, {}, 2);
  const reloads = new ReloadFault(configFile, `faults-${o.path}`, adminToken, bridge, o.seed, log, [`faults-${o.path}-2`]);

  const record: SentRecord = { sent: new Map(), resends: new Map(), poison: new Map(), uncertain: new Set(), identical: { sent: 0, uncertain: 0 } };
  /** Each SIGKILL, and the messages waiting (published, not at the target) at it. */
  const kills: { at: number; waiting: number[] }[] = [];
  const injected: Record<string, number> = Object.fromEntries(Object.keys(faults).map((k) => [k, 0]));
  const gate = new Gate();
  let report: FaultRunReport | undefined;
  let leftAtSource: number | undefined;

  try {
    log(`seed ${o.seed}; vhost ${vhost}; config ${configFile}`);
    if (!(await bridge.start())) throw new Error('the bridge did not start');

    // ---- the stream and its publisher ----
    const plan = planStream(o.messages, prng, runId);
    const events = planFaults(faults, prng);
    log(`faults planned: ${events.map((e) => `${e.kind}@${Math.round(e.at * 100)}%`).join(', ')}`);
    let poisonNo = 0;
    const total = plan.messages.length;
    // In turns to the two bridges' sources, chunk by chunk (a chunk that failed goes again where it went; poison rides
    // with whichever chunk it joins).
    let turn = 0;
    const sendChunk = async (batch: Outgoing[]): Promise<void> => {
      await gate.hold(() => publishers[turn % 2]!.publish(batch));
      turn += 1;
    };
    const reopen = () => Promise.all(publishers.map((p) => p.open())).then(() => undefined);
    const stream = new StreamPublisher(plan.messages, record, o.publishSeconds, sendChunk, reopen, log);
    const publishLoop = stream.start();

    const injectPoison = async (kind: PoisonKind) => {
      poisonNo += 1;
      const n = poisonNo;
      const size = kind === 'too-large' && !targetIsStomp ? tooLargeBytes : 0;
      const m: Outgoing & { type: 'poison' } = {
        type: 'poison',
        poison: n,
        kind,
        body: poisonBody(n, kind, runId, size),
        ...(n % 2 === 0 ? { id: `faults-${runId}-poison-${n}` } : {}),
        ...(kind === 'too-large' && targetIsStomp ? { bigHeader: 11 * 1024 } : {}),
      };
      if (kind === 'too-large' && sourceOnRabbit && !targetIsStomp) {
        // The harness's publisher channel must not have the lowered limit: open one while the limit is the original.
        await gate.hold(async () => {
          await admin.setMaxMessageSize(originalMaxSize);
          const big = new AmqpPublisher(rabbitUrl, srcQueue);
          try {
            await big.open();
            await lowerLimit();
            await big.publish([m]);
          } finally {
            await lowerLimit();
            await big.close();
          }
        });
        record.poison.set(n, kind);
      } else {
        await stream.poison(m);
      }
    };

    const inject = async (kind: FaultKind, fired: () => void): Promise<boolean> => {
      switch (kind) {
        case 'sigkill': {
          // What waits then: every message published and not yet at the target (its last one's arrival is the recovery).
          const arrived = seqsAt(target.messages);
          const waiting = [...record.sent.keys()].filter((seq) => !arrived.has(seq));
          await bridge.sigkill();
          fired();
          kills.push({ at: Date.now(), waiting });
          await sleep(prng.int(0, 1000));
          await bridge.start();
          return true;
        }
        case 'sigstop': {
          const ms = prng.int(3000, 6000);
          log(`freezing the bridge for ${ms} ms (SIGSTOP, then SIGCONT)`);
          await bridge.freeze(ms);
          return true;
        }
        case 'connection-close': {
          // An AMQP 1.0 side: one time in two its proxy resets its connections (the broker's list does not name them).
          const proxy10 = sourceProxy10 ?? (targetIs10 ? targetProxy : undefined);
          if (proxy10 !== undefined && prng.next() < 0.5) {
            // Reset what is open, then take new connections again (a broker's close, not an outage).
            proxy10.cut();
            proxy10.resume();
            fired();
            log(`reset the bridge's AMQP 1.0 ${sourceIs10 ? 'source' : 'target'} connections (their proxy)`);
            return true;
          }
          const deadline = Date.now() + 20_000;
          for (;;) {
            const list = await admin.bridgeConnections(vhost, bridge.pid).catch(() => []);
            if (list.length > 0) {
              const victim = prng.pick(list);
              const ok = await admin.closeConnection(victim.name);
              fired();
              log(`closed RabbitMQ connection '${victim.clientName || victim.name}': ${ok ? 'ok' : 'failed'}`);
              return ok;
            }
            if (Date.now() > deadline) {
              log('no bridge connection to close on RabbitMQ within 20 s');
              return false;
            }
            await sleep(500);
          }
        }
        case 'broker-restart': {
          const downMs = prng.int(2000, 5000);
          await gate.hold(async () => {
            if (needsStomp) {
              await execFileP('bash', [ACTIVEMQ_SCRIPT, 'stop'], { timeout: 120_000 });
              await sleep(downMs);
              await execFileP('bash', [ACTIVEMQ_SCRIPT, 'start'], { timeout: 120_000 });
            } else {
              await admin.restartBroker(downMs);
              if (lowered) await lowerLimit();
            }
            await Promise.all(publishers.map((p) => p.open().catch(() => undefined)));
          });
          return true;
        }
        case 'target-stall': {
          targetProxy.stall();
          await sleep(o.stallMs);
          // Bytes swallowed during the stall leave half frames behind: reset those connections, as a network would.
          targetProxy.cut();
          targetProxy.resume();
          return true;
        }
        case 'redis-restart': {
          log(await redis.restart!(prng.int(1000, 5000)));
          return true;
        }
        case 'redis-failover': {
          log(await redis.failover!(cacheKeys, injected['redis-failover']! + 1));
          return true;
        }
        case 'redis-data-loss': {
          log(await redis.dataLoss(cacheKeys, injected['redis-data-loss']! + 1));
          return true;
        }
        case 'poison-unroutable':
          await injectPoison('unroutable');
          return true;
        case 'poison-too-large':
          await injectPoison('too-large');
          return true;
        case 'reload':
          // Not planned here (they run on their own schedule, reloadLoop); a single one when asked.
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
      reloadCount: faults.reload ?? 0,
      bridge,
      drain: { record, target, deadLetter, quietMs: o.quietMs ?? 45_000, timeoutMs: o.drainTimeoutMs ?? 300_000, settleMs: 3000 },
      // A prefetch's worth: the smallest window of the two bridges (bursts go to both sources, in turns).
      inFlight: {
        threshold: Math.min(...RELOAD_PREFETCHES, SECOND_BRIDGE_PREFETCH),
        message: burstMessage(runId),
        bridge,
        holdTarget: { hold: () => targetProxy.holdReplies(), release: () => targetProxy.releaseReplies() },
      },
      ...(o.breakInjection !== undefined ? { breakInjection: o.breakInjection } : {}),
      log,
    });
    if (sourceOnRabbit) {
      const conn = await amqp.connect(rabbitUrl, { clientProperties: { connection_name: `${HARNESS_CONNECTION_PREFIX} check` } });
      const ch = await conn.createChannel();
      leftAtSource = (await ch.checkQueue(srcQueue)).messageCount + (await ch.checkQueue(srcQueue2)).messageCount;
      await conn.close();
    }
    await bridge.stop();
    await sleep(1000);
    for (const e of bridge.unexpectedExits) notes.push(e.slice(0, 500));
    notes.push(bridge.counters.summary(), ...bridge.counters.violations());
    report = analyse({
      recovery: recoverySeconds(kills, target.messages),
      outcome,
      path: o.path,
      seed: o.seed,
      faults: injected,
      cacheLossFaults: (injected['redis-data-loss'] ?? 0) + (injected['redis-failover'] ?? 0),
      record,
      target: target.messages,
      deadLetter: deadLetter.messages,
      durationMs: Date.now() - started,
      ...(leftAtSource === undefined ? {} : { leftAtSource }),
      notes,
    });
    return report;
  } finally {
    await bridge.stop().catch(() => undefined);
    await Promise.allSettled([publisher.close(), publisher2.close(), target.stop(), deadLetter.stop()]);
    await targetProxy.stop().catch(() => undefined);
    await sourceProxy10?.stop().catch(() => undefined);
    if (lowered) {
      process.off('SIGINT', restoreOnSignal);
      process.off('SIGTERM', restoreOnSignal);
      await admin.setMaxMessageSize(originalMaxSize).catch((err: unknown) => log(`could not restore max_message_size: ${String(err)}`));
      log(`RabbitMQ max_message_size restored to ${originalMaxSize ?? 'default'}`);
    }
    if (report && !process.env.FAULTS_KEEP) {
      await admin.deleteVhost(vhost);
      await redis.cleanup(keyPrefix).catch((err: unknown) => log(`could not delete the run's Redis keys: ${String(err)}`));
    }
  }
}

/** The seqs of the stream's messages a collector holds so far. */
function seqsAt(messages: readonly Received[]): Set<number> {
  const out = new Set<number>();
  for (const m of messages) {
    const p = parseBody(m.body);
    if (p !== undefined && 'seq' in p) out.add(p.seq);
  }
  return out;
}

/**
 * For each kill: the seconds until the last message waiting at it (published, not yet at the target) arrived — the
 * bridge's recovery, the in-flight messages the dead process held included (docs/delivery.md).
 */
function recoverySeconds(kills: readonly { at: number; waiting: readonly number[] }[], messages: readonly Received[]): Recovery[] {
  const firstAt = new Map<number, number>();
  for (const m of messages) {
    const p = parseBody(m.body);
    if (p !== undefined && 'seq' in p && m.at !== undefined && !firstAt.has(p.seq)) firstAt.set(p.seq, m.at);
  }
  return kills.map((k) => {
    let last = k.at;
    for (const seq of k.waiting) last = Math.max(last, firstAt.get(seq) ?? last);
    return { waiting: k.waiting.length, seconds: Math.round((last - k.at) / 100) / 10 };
  });
}

