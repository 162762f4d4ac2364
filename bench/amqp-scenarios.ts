/**
 * AMQP → AMQP: RabbitMQ's shovel, the plain amqplib forwarder (with and without `mandatory`), and the bridge with
 * detection on (header IDs, stamped IDs) and off, with its end-to-end latency; and the cost of Sentinel's
 * min-replicas-acked.
 */
import { connect } from 'node:net';
import amqp from 'amqplib';
import { BridgeProcess, writeConfig } from '../test/support/bridge-process.js';
import { percentile } from './report.js';
import { BODY, type Scenario, amqpBaseline, amqpBridge, deleteAmqpQueues, deleteCacheKeys, prefillAmqp, shovelBaseline, shovelUnavailable, uniq } from './harness.js';

/** End-to-end latency of single messages through an idle bridge. */
async function amqpLatency(): Promise<{ p50: number; p99: number; count: number }> {
  const src = uniq('lat-src');
  const dst = uniq('lat-dst');
  await prefillAmqp(src, 0, false, dst);
  const keyPrefix = uniq('cache');
  const file = writeConfig(`log-level: info
connections:
  rabbit: { type: amqp, url: "${process.env.AMQP_URL}" }
id-cache: { redis-url: "${process.env.REDIS_URL}", key-prefix: ${keyPrefix} }
bridges:
  - name: latency
    source: { connection: rabbit, queue: "${src}" }
    target: { connection: rabbit, queue: "${dst}" }
`);
  const p = BridgeProcess.start(file);
  const conn = await amqp.connect(process.env.AMQP_URL!);
  const samples: number[] = [];
  try {
    await p.waitForLog((l) => l.msg === 'bridge running');
    const pub = await conn.createConfirmChannel();
    const sub = await conn.createChannel();
    let waiting: ((t: number) => void) | undefined;
    await sub.consume(dst, () => waiting?.(performance.now()), { noAck: true });
    for (let i = 0; i < 300; i++) {
      const arrived = new Promise<number>((r) => (waiting = r));
      const t0 = performance.now();
      pub.sendToQueue(src, BODY, { persistent: true });
      samples.push((await arrived) - t0);
    }
  } finally {
    await conn.close().catch(() => undefined);
    await p.kill('SIGKILL');
    await deleteAmqpQueues(src, dst);
    await deleteCacheKeys(keyPrefix);
  }
  return { p50: percentile(samples, 50), p99: percentile(samples, 99), count: samples.length };
}

const SHOVEL = 'RabbitMQ shovel (on-confirm)';

/**
 * The local Sentinel setup (scripts/redis-sentinel.sh: a master with one replica), for the cost of min-replicas-acked:
 * the same bridge, the same Redis, with and without waiting for the replica after each commit.
 */
const SENTINEL_URLS = (process.env.REDIS_SENTINEL_URLS ?? 'redis://127.0.0.1:26379,redis://127.0.0.1:26380,redis://127.0.0.1:26381').split(',');
const SENTINEL_NAME = process.env.REDIS_SENTINEL_NAME ?? 'mymaster';
const viaSentinel = (acked: number): string[] => [
  `redis-sentinel: { name: ${SENTINEL_NAME}, urls: [${SENTINEL_URLS.map((u) => JSON.stringify(u)).join(', ')}] }`,
  `min-replicas-acked: ${acked}`,
];
async function sentinelUnavailable(): Promise<string | undefined> {
  const u = new URL(SENTINEL_URLS[0]!);
  const open = await new Promise<boolean>((resolve) => {
    const sock = connect(Number(u.port), u.hostname, () => {
      sock.end();
      resolve(true);
    });
    sock.on('error', () => resolve(false));
  });
  return open ? undefined : `no sentinel at ${u.host} (start one with scripts/redis-sentinel.sh start, or set REDIS_SENTINEL_URLS)`;
}
const DEDUPE_OFF = 'bridge, dedupe off';
const REPLICAS_0 = 'bridge, header IDs, Sentinel, min-replicas-acked 0';

export const amqpScenarios: Scenario[] = [
  { group: 'amqp→amqp', name: SHOVEL, run: shovelBaseline, unavailable: shovelUnavailable },
  { group: 'amqp→amqp', name: 'amqplib baseline', versus: SHOVEL, run: amqpBaseline(true) },
  { group: 'amqp→amqp', name: 'amqplib baseline, not mandatory', baseline: 'amqplib baseline', versus: SHOVEL, run: amqpBaseline(false) },
  { group: 'amqp→amqp', name: 'bridge, dedupe on (header IDs)', baseline: 'amqplib baseline', detectionOff: DEDUPE_OFF, versus: SHOVEL, run: amqpBridge(true, true), latency: amqpLatency },
  { group: 'amqp→amqp', name: 'bridge, dedupe on (stamped IDs)', baseline: 'amqplib baseline', detectionOff: DEDUPE_OFF, versus: SHOVEL, run: amqpBridge(true, false) },
  { group: 'amqp→amqp', name: DEDUPE_OFF, baseline: 'amqplib baseline', versus: SHOVEL, run: amqpBridge(false, true) },
];

export const minReplicasScenarios: Scenario[] = [
  // '× dedupe off' here is against the amqp→amqp group's bridge without detection, when that group runs too.
  { group: 'min-replicas', name: REPLICAS_0, detectionOff: DEDUPE_OFF, run: amqpBridge(true, true, viaSentinel(0)), unavailable: sentinelUnavailable },
  {
    group: 'min-replicas',
    name: 'bridge, header IDs, Sentinel, min-replicas-acked 1',
    baseline: REPLICAS_0,
    detectionOff: DEDUPE_OFF,
    run: amqpBridge(true, true, viaSentinel(1)),
    unavailable: sentinelUnavailable,
  },
];
