/**
 * The duplicate-ID cache's script calls on the MQTT → AMQP path stay batched: the reserves of the deliveries one socket
 * read brings, and the commits of the confirms one read brings, go to Redis as one script call each
 * (src/cache/address-batcher.ts), however the MQTT source hands its deliveries over (one per PUBLISH packet, each in a
 * callback of its own). A path that fell back to one call per message would make two per message (a reserve and a
 * commit), at ~40 µs of Redis CPU each.
 *
 * Counted on a Redis of the test's own (INFO commandstats: EVAL and EVALSHA): the machine's Redis is shared with other
 * suites, whose calls would count too — which is how docs/measurements.md once read 0.98 calls per message on this
 * path while the bridge made 0.01. The source is a Mosquitto of the test's own with a window of 500
 * (`max_inflight_messages`, the bridge's prefetch), its session filled while the bridge was away: the backlog a bridge
 * meets after a restart or under load, where batching matters.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OwnMosquitto } from '../faults/own-mosquitto.js';
import { OwnRedis } from '../faults/own-redis.js';
import { copiesById } from '../support/amqp.js';
import { useBridgeFixture } from '../support/bridge-fixture.js';
import { MOSQUITTO_5, dropSession, prepareQueue, publishMqtt, uniqueClientId, uniqueTopic, type MqttPeer } from '../support/mqtt.js';
import { freePort } from '../support/ports.js';
import { services } from '../support/services.js';

const fx = useBridgeFixture();
const WINDOW = 500;
const MESSAGES = 3000;
const mosquitto = new OwnMosquitto('broker-bridge-mqtt-batching-', [`max_inflight_messages ${WINDOW}`]);
let redis: OwnRedis | undefined;

beforeAll(async () => {
  await mosquitto.start();
  redis = new OwnRedis(await freePort(), ['--appendonly', 'no', '--appendfsync', 'no']);
  await redis.start();
}, 30_000);

afterAll(async () => {
  await mosquitto.dispose();
  await redis?.stop();
});

/** The script calls Redis has run so far (a script's first call is an EVAL, the rest EVALSHA). */
async function scriptCalls(url: string): Promise<number> {
  const client = new Redis(url, { maxRetriesPerRequest: 1 });
  try {
    const info = await client.info('commandstats');
    let calls = 0;
    for (const m of info.matchAll(/^cmdstat_(?:eval|evalsha):calls=(\d+)/gm)) calls += Number(m[1]);
    return calls;
  } finally {
    client.disconnect();
  }
}

describe('MQTT → AMQP with header IDs, a backlog of 3,000', () => {
  it('costs the cache well under one script call per ten messages, every message forwarded once', async () => {
    const peer: MqttPeer = { ...MOSQUITTO_5, url: mosquitto.url, queueLimit: MESSAGES };
    const target = await fx.queue('mqtt-batching-out');
    const topic = uniqueTopic('batching');
    const clientId = uniqueClientId('bb');
    const { keyPrefix } = fx.config({ bridges: [] });
    const yaml = [
      'log-level: info',
      'connections:',
      `  rabbit: { type: amqp, url: "${services.amqpUrl}" }`,
      `  mosquitto: { type: mqtt, url: "${mosquitto.url}", client-id: "${clientId}" }`,
      'id-cache:',
      `  redis-url: "${redis!.url}"`,
      `  key-prefix: "${keyPrefix}"`,
      'bridges:',
      '  - name: batching',
      `    source: { connection: mosquitto, topic: "${topic}" }`,
      `    target: { connection: rabbit, queue: "${target}" }`,
      `    prefetch: ${WINDOW}`,
      '',
    ].join('\n');
    // The bridge's source connects as <client-id>-<bridge>-source: its session holds the backlog.
    const session = `${clientId}-batching-source`;
    await prepareQueue(peer, topic, session);
    try {
      const run = 'b' + Date.now().toString(36);
      await publishMqtt(
        peer,
        topic,
        Array.from({ length: MESSAGES }, (_, i) => ({ body: `reading ${i}`, headers: { _AMQ_DUPL_ID: `${run}-${i}` } })),
      );
      const before = await scriptCalls(redis!.url);
      await fx.start(yaml);
      await fx.amqp.waitForCount(target, (n) => n >= MESSAGES, 60_000);
      await fx.amqp.settledCount(target, 1000);
      const calls = (await scriptCalls(redis!.url)) - before;
      await fx.stopAll();

      const got = await fx.amqp.drain(target);
      expect(got).toHaveLength(MESSAGES);
      const { distinct, unflaggedExtras } = copiesById(got);
      expect(distinct).toBe(MESSAGES);
      expect(unflaggedExtras).toEqual([]);
      // A reserve and a commit per message, alone, make 6,003 calls (checked: the batcher's chunk cut to one ID);
      // batched they were 39–42 here (PUBLISHes of ~70 bytes: one socket read brings hundreds). The start-up's own few
      // calls are counted in.
      expect(calls, `${calls} script calls for ${MESSAGES} messages`).toBeLessThan(MESSAGES / 10);
    } finally {
      await fx.stopAll();
      await dropSession(peer, session).catch(() => undefined);
    }
  });
});
