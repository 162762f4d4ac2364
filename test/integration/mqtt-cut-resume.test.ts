/**
 * An MQTT source whose connection is cut with a window in flight goes on forwarding once the network is back (the
 * fault suite's mqtt-amqp path, 2026-12-06: a cut while the source held its receive maximum unacknowledged, then a
 * resumed session whose broker re-sends those PUBLISHes with DUP set while its in-flight window towards the bridge
 * stays full until they are PUBACKed).
 *
 * A bridge MQTT 5 → RabbitMQ, Mosquitto of the test's own behind a TCP proxy, RabbitMQ behind another; a device
 * publishes at a steady pace straight to Mosquitto. RabbitMQ's confirmations are held until the bridge holds its
 * prefetch (300) in flight, then the MQTT proxy is cut for 1 s and resumed: the target queue must grow by more than a
 * window within 5 s, the bridge must take a full window again (answers held once more), and every published message
 * arrive (none lost; extra copies flagged as possible duplicates). The second case first kills a bridge of prefetch
 * 500 with its window full, as a reload from 500 to 300 before the cut did in the fault run.
 *
 * A source that never PUBACKs the re-sent (DUP) PUBLISHes of a resumed session fails it (checked once): Mosquitto's
 * window stays full of them, nothing more comes, and the bridge reads 0 in flight.
 */
import mqtt from 'mqtt';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OwnMosquitto } from '../faults/own-mosquitto.js';
import { copiesById } from '../support/amqp.js';
import { useBridgeFixture } from '../support/bridge-fixture.js';
import type { BridgeProcess } from '../support/bridge-process.js';
import { dropSession, MOSQUITTO_5, uniqueClientId, uniqueTopic } from '../support/mqtt.js';
import { services } from '../support/services.js';
import { sleep, untilValue } from '../support/wait.js';

const fx = useBridgeFixture();
const mosquitto = new OwnMosquitto('broker-bridge-mqtt-cut-resume-');
const PREFETCH = 300;

beforeAll(async () => {
  await mosquitto.start();
}, 20_000);

afterAll(async () => {
  await mosquitto.dispose();
});

async function inFlight(bridge: BridgeProcess): Promise<number> {
  const port = bridge.logs.find((l) => l.component === 'http' && typeof l.port === 'number')?.port as number;
  const body = (await (await fetch(`http://127.0.0.1:${port}/bridges`)).json()) as { bridges: { inFlight: number }[] };
  return body.bridges[0]?.inFlight ?? 0;
}

/** Publishes `perTick` QoS 1 messages every `tickMs` (each with a duplicate ID) until stopped; counts what was PUBACKed. */
class SteadyDevice {
  sent = 0;
  private running = true;
  private done?: Promise<void>;

  constructor(
    private readonly client: mqtt.MqttClient,
    private readonly topic: string,
    private readonly run: string,
  ) {}

  start(perTick: number, tickMs: number): void {
    this.done = (async () => {
      while (this.running) {
        const batch: Promise<unknown>[] = [];
        for (let i = 0; i < perTick; i++) {
          const seq = this.sent++;
          batch.push(this.client.publishAsync(this.topic, Buffer.from(`m-${seq}`), { qos: 1, properties: { userProperties: { _AMQ_DUPL_ID: `${this.run}-${seq}` } } }));
        }
        await Promise.all([Promise.all(batch), sleep(tickMs)]);
      }
    })();
  }

  async stop(): Promise<number> {
    this.running = false;
    await this.done;
    return this.sent;
  }
}

describe('an MQTT source cut with its window in flight', () => {
  it.each([
    { before: 'none', firstPrefetch: undefined },
    { before: 'a bridge with prefetch 500 killed with its window full', firstPrefetch: 500 },
  ])('forwards again within 5 s of the network coming back, and every message arrives (before: $before)', async ({ firstPrefetch }) => {
    const target = await fx.queue('mqtt-cut-resume');
    const mqttProxy = await fx.proxy(mosquitto.url);
    const rabbitProxy = await fx.proxy(services.amqpUrl);
    const { keyPrefix } = fx.config({ bridges: [] });
    const clientId = uniqueClientId('bbcut');
    const topic = uniqueTopic('cut-resume');
    const run = keyPrefix.slice(-12);
    const yamlOf = (prefetch: number): string => [
      `log-level: ${process.env.CUT_RESUME_LOG_LEVEL ?? 'info'}`,
      'http-port: 0',
      'connections:',
      `  rabbit: { type: amqp, url: "${rabbitProxy.rewrite(services.amqpUrl)}" }`,
      `  devices: { type: mqtt, url: "${mqttProxy.rewrite(mosquitto.url)}", client-id: "${clientId}", keepalive: 10 }`,
      'id-cache:',
      `  redis-url: "${services.redisUrl}"`,
      `  key-prefix: "${keyPrefix}"`,
      'bridges:',
      '  - name: cut-resume',
      `    source: { connection: devices, topic: "${topic}/+" }`,
      `    target: { connection: rabbit, queue: "${target}" }`,
      `    prefetch: ${prefetch}`,
      '    retry-interval: 200',
      '',
    ].join('\n');
    const client = await mqtt.connectAsync(mosquitto.url, { protocolVersion: 5, clientId: uniqueClientId('bbdev'), reconnectPeriod: 0 });
    client.on('error', () => undefined);
    const device = new SteadyDevice(client, `${topic}/dev1`, run);
    let bridge: BridgeProcess | undefined;
    try {
      if (firstPrefetch !== undefined) {
        const first = await fx.start(yamlOf(firstPrefetch));
        await first.waitForLog((l) => l.component === 'http' && typeof l.port === 'number', 10_000);
        device.start(20, 50);
        await fx.amqp.waitForCount(target, (n) => n >= 300, 30_000);
        rabbitProxy.holdReplies();
        const full = await untilValue('the first window', () => inFlight(first), (n) => n >= firstPrefetch - 10, { timeoutMs: 15_000, everyMs: 25 });
        await first.kill('SIGKILL');
        rabbitProxy.releaseReplies();
        console.log(`first bridge killed with ${full} in flight`);
      }
      const running = await fx.start(yamlOf(PREFETCH));
      bridge = running;
      await running.waitForLog((l) => l.component === 'http' && typeof l.port === 'number', 10_000);
      if (firstPrefetch === undefined) device.start(20, 50);
      const base = await fx.amqp.count(target);
      await fx.amqp.waitForCount(target, (n) => n >= base + 500, 30_000);

      rabbitProxy.holdReplies();
      const held = await untilValue('the window in flight', () => inFlight(running), (n) => n >= PREFETCH - 10, { timeoutMs: 15_000, everyMs: 25 });
      mqttProxy.cut();
      rabbitProxy.releaseReplies();
      await sleep(1000);
      const atResume = await fx.amqp.count(target);
      mqttProxy.resume();
      const resumedAt = Date.now();
      const grown = await untilValue('the target growing again', () => fx.amqp.count(target), (n) => n > atResume + PREFETCH, { timeoutMs: 20_000, everyMs: 50 }).catch(() => undefined);
      const resumeMs = Date.now() - resumedAt;
      console.log(`in flight at the cut ${held}; target ${atResume} at resume, ${grown ?? 'no growth'} after ${resumeMs} ms`);

      // The window again: with the answers held, the bridge must take its prefetch once more (the fault suite read 0
      // for 20 s after such a cut).
      rabbitProxy.holdReplies();
      const again = await untilValue('the window in flight after the resume', () => inFlight(running), (n) => n >= PREFETCH - 10, { timeoutMs: 10_000, everyMs: 25 }).catch((err: Error) => err.message);
      rabbitProxy.releaseReplies();
      console.log(`in flight after the resume, answers held: ${again}`);

      await sleep(3000);
      const sent = await device.stop();
      await fx.amqp.waitForCount(target, (n) => n >= sent, 60_000).catch(() => undefined);
      await fx.amqp.settledCount(target, 2000);
      const got = await fx.amqp.drain(target);
      const { distinct, unflaggedExtras } = copiesById(got);
      console.log(`sent ${sent}, arrived ${got.length} (${distinct} distinct)`);
      expect(grown, 'the target grew by more than a window within 20 s of the resume').toBeDefined();
      expect(resumeMs).toBeLessThan(5000);
      expect(distinct).toBe(sent);
      expect(unflaggedExtras).toEqual([]);
      expect(again).toBeGreaterThanOrEqual(PREFETCH - 10);
    } finally {
      await device.stop();
      await client.endAsync(true);
      await bridge?.stop();
      await dropSession({ ...MOSQUITTO_5, url: mosquitto.url }, `${clientId}-cut-resume-source`).catch(() => undefined);
    }
  }, 120_000);
});
