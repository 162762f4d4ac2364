/**
 * Header names `__proto__`, `constructor` and `prototype` arrive at the target as headers of that name, through the
 * bridge process on the real brokers (docs/security.md#secrets, src/shared/data-record.ts): an MQTT 5 message with such
 * user properties goes to NATS JetStream (stored with such headers) and from there back to MQTT (read with such user
 * properties). AMQP and STOMP are carried the same way by their mappings (test/unit/header-names-as-data.test.ts); on
 * AMQP amqplib's own table decoder must keep a `__proto__` key too, which the header-table patch of issue 42 item 1 does.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { useBridgeFixture } from '../support/bridge-fixture.js';
import { MOSQUITTO_5, dropSession, prepareQueue, publishMqtt, readMqtt, uniqueClientId, uniqueTopic } from '../support/mqtt.js';
import { NatsTestClient } from '../support/nats.js';
import { secondName } from '../support/configs.js';
import { services, uniqueName } from '../support/services.js';
import { untilValue } from '../support/wait.js';

const fx = useBridgeFixture();
const nats = new NatsTestClient();
afterAll(() => nats.cleanup());

/** Own keys named like Object.prototype's, as a decoder that keeps them gives them (JSON.parse defines keys). */
const NAMED = JSON.parse('{"__proto__":"p","constructor":"c","prototype":"q","x-plain":"x"}') as Record<string, string>;

describe('header names with a meaning in JavaScript, through the bridge', () => {
  it('MQTT → NATS JetStream → MQTT: __proto__, constructor and prototype arrive by name at each target', async () => {
    expect(Object.keys(NAMED)).toEqual(['__proto__', 'constructor', 'prototype', 'x-plain']);
    const stream = await nats.stream(uniqueName('HDR').replace(/[^A-Za-z0-9_-]/g, '_'));
    const subject = `${stream.toLowerCase()}.in`;
    const base = uniqueTopic('hdr');
    const reader = uniqueClientId('bbr');
    await prepareQueue(MOSQUITTO_5, `${base}/out`, reader);
    const { keyPrefix } = fx.config({ bridges: [] });
    const yaml = [
      'log-level: info',
      'connections:',
      `  mosquitto: { type: mqtt, url: "${services.mosquittoUrl}", client-id: "${uniqueClientId('bb')}" }`,
      `  nats: { type: nats, url: "${process.env.NATS_URL ?? 'nats://127.0.0.1:4222'}" }`,
      // The way back into the same Mosquitto under a second name of it: a copy is never forwarded to a broker already
      // on its x-bridge-path (loop prevention, docs/delivery.md "Loops").
      `  mosquitto-back: { type: mqtt, url: "${secondName(services.mosquittoUrl)}", client-id: "${uniqueClientId('bb')}" }`,
      'id-cache:',
      `  redis-url: "${services.redisUrl}"`,
      `  key-prefix: "${keyPrefix}"`,
      'bridges:',
      '  - name: m2n',
      `    source: { connection: mosquitto, topic: "${base}/in" }`,
      `    target: { connection: nats, subject: "${subject}" }`,
      '  - name: n2m',
      `    source: { connection: nats, stream: "${stream}", consumer: bridge }`,
      `    target: { connection: mosquitto-back, topic: "${base}/out" }`,
      '',
    ].join('\n');
    try {
      await fx.start(yaml, 2);
      await publishMqtt(MOSQUITTO_5, `${base}/in`, [{ body: 'named', headers: NAMED }]);
      await untilValue('stored in the stream', () => nats.count(stream), (n) => n >= 1, { timeoutMs: 30_000 });
      const [stored] = await nats.stored(stream);
      for (const [name, value] of Object.entries(NAMED)) {
        expect(Object.hasOwn(stored!.headers, name), `NATS header ${name}`).toBe(true);
        expect(Object.getOwnPropertyDescriptor(stored!.headers, name)?.value, name).toEqual([value]);
      }

      const [back] = await readMqtt(MOSQUITTO_5, reader, { atLeast: 1, quietMs: 500 });
      expect(back?.body.toString()).toBe('named');
      for (const [name, value] of Object.entries(NAMED)) {
        expect(Object.hasOwn(back!.headers, name), `MQTT user property ${name}`).toBe(true);
        expect(Object.getOwnPropertyDescriptor(back!.headers, name)?.value, name).toBe(value);
      }
    } finally {
      await fx.stopAll();
      await dropSession(MOSQUITTO_5, reader).catch(() => undefined);
    }
  });
});
