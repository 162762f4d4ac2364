/**
 * MQTT PUBLISH ↔ neutral message (src/mapping/mqtt-mapping.ts; the table is docs/mapping.md#mqtt): MQTT 5 properties
 * and user properties both ways, the neutral properties MQTT has no field for carried as user properties, what an MQTT
 * string cannot carry left out, MQTT 3.1.1 carrying the payload alone; and the topic helpers of
 * src/config/protocols/mqtt-address.ts.
 */
import { describe, expect, it } from 'vitest';
import { fromMqtt, toMqtt } from '../../src/mapping/mqtt-mapping.js';
import { fromAmqp, toAmqp } from '../../src/mapping/amqp-mapping.js';
import type { BridgeMessage } from '../../src/core/message.js';
import { fingerprint } from '../../src/core/duplicate-id.js';
import { swapTopicSeparators, topicFilterProblem, topicMatches, topicNameProblem } from '../../src/config/protocols/mqtt-address.js';

const NOW = 1_800_000_000_000;
const now = () => NOW;

describe('MQTT mapping', () => {
  it('MQTT 5 in: properties, user properties (a repeated one as a list), the topic, QoS as persistence', () => {
    const m = fromMqtt(
      {
        topic: 'sensors/d1/temp',
        payload: Buffer.from([0, 1, 0xff]),
        qos: 1,
        properties: {
          contentType: 'application/cbor',
          responseTopic: 'replies/d1',
          correlationData: Buffer.from('req-9'),
          messageExpiryInterval: 60,
          payloadFormatIndicator: false,
          userProperties: { site: 'plant-4', tag: ['a', 'b'], 'amqp-message-id': 'm-1', priority: '7', timestamp: '1700000000123', type: 't' },
        },
      },
      { version: 5, now },
    );
    expect(m.body).toEqual(Buffer.from([0, 1, 0xff]));
    expect(m.properties).toEqual({
      persistent: true,
      topic: 'sensors/d1/temp',
      contentType: 'application/cbor',
      replyTo: 'replies/d1',
      correlationId: 'req-9',
      expiresAt: NOW + 60_000,
      messageId: 'm-1',
      priority: 7,
      timestamp: 1_700_000_000_123,
      type: 't',
    });
    expect(m.headers).toEqual({ site: 'plant-4', tag: ['a', 'b'] });
  });

  it('MQTT 3.1.1 in: the payload, the topic and QoS are all there is; QoS 0 is not persistent', () => {
    const m = fromMqtt({ topic: 'a/b', payload: Buffer.from('x'), qos: 0, properties: { userProperties: { ignored: 'yes' } } }, { version: 4, topicSeparator: '.' });
    expect(m).toEqual({ body: Buffer.from('x'), properties: { persistent: false, topic: 'a.b' }, headers: {} });
  });

  it('MQTT 5 out: native properties, the others as user properties, typed headers as text, tables as JSON', () => {
    const msg: BridgeMessage = {
      body: Buffer.from('{"t":1}'),
      properties: {
        persistent: true,
        contentType: 'application/json',
        contentEncoding: 'identity',
        correlationId: 'c-1',
        replyTo: 'replies',
        messageId: 'm-1',
        type: 'reading',
        userId: 'alice',
        appId: 'hub',
        priority: 4,
        timestamp: 1_700_000_000_000,
        expiration: '90500',
        topic: 'not/written',
      },
      headers: { n: 42, b: false, big: 12n, when: new Date(5000), tbl: { a: [1] }, bytes: Buffer.from([1, 2]), list: ['x', 'y'], nil: null, _AMQ_DUPL_ID: Buffer.from('id-1') },
    };
    expect(toMqtt(msg, { version: 5, now, duplicateIdHeader: '_AMQ_DUPL_ID' })).toEqual({
      payload: Buffer.from('{"t":1}'),
      properties: {
        contentType: 'application/json',
        responseTopic: 'replies',
        correlationData: Buffer.from('c-1'),
        messageExpiryInterval: 91,
        userProperties: {
          n: '42',
          b: 'false',
          big: '12',
          when: '5000',
          tbl: '{"a":[1]}',
          bytes: '0102',
          list: ['x', 'y'],
          _AMQ_DUPL_ID: 'id-1',
          'content-encoding': 'identity',
          'amqp-message-id': 'm-1',
          type: 'reading',
          'amqp-user-id': 'alice',
          'app-id': 'hub',
          priority: '4',
          timestamp: '1700000000000',
        },
      },
    });
  });

  it('leaves out what an MQTT string cannot carry (a control character: Mosquitto closes the connection on one)', () => {
    const out = toMqtt(
      { body: Buffer.alloc(0), properties: { persistent: true, contentType: 'text/plain\n', replyTo: 'r\u0000' }, headers: { ok: 'fine', bad: 'a\nb', 'x\ty': 'v', list: ['a', 'b\u0007'] } },
      { version: 5 },
    );
    expect(out.properties).toEqual({ userProperties: { ok: 'fine' } });
  });

  it('MQTT 3.1.1 out: the payload alone', () => {
    expect(toMqtt({ body: Buffer.from('p'), properties: { persistent: true, contentType: 'x/y' }, headers: { a: 'b' } }, { version: 4 })).toEqual({ payload: Buffer.from('p') });
  });

  it('correlation data that is not UTF-8 and the payload format indicator travel as headers and come back as they were', () => {
    const m = fromMqtt(
      { topic: 't', payload: Buffer.from('ok'), qos: 1, properties: { correlationData: Buffer.from([0xc3, 0x28]), payloadFormatIndicator: true } },
      { version: 5 },
    );
    expect(m.headers).toEqual({ 'x-mqtt-correlation-data': 'c328', 'x-mqtt-payload-format-indicator': '1' });
    expect(m.properties.correlationId).toBeUndefined();
    expect(toMqtt(m, { version: 5 })).toEqual({ payload: Buffer.from('ok'), properties: { correlationData: Buffer.from([0xc3, 0x28]), payloadFormatIndicator: true } });
    // Never claimed for bytes that are not UTF-8.
    expect(toMqtt({ ...m, body: Buffer.from([0xff]) }, { version: 5 }).properties?.payloadFormatIndicator).toBeUndefined();
  });

  it('AMQP → MQTT 5 → AMQP keeps the properties and headers (typed values as text)', () => {
    const amqp = fromAmqp(
      Buffer.from('b'),
      {
        contentType: 'text/plain',
        contentEncoding: 'utf-8',
        correlationId: 'c',
        replyTo: 'r',
        messageId: 'm',
        type: 't',
        appId: 'a',
        priority: 2,
        timestamp: 1_700_000_000,
        deliveryMode: 2,
        headers: { h: 'v', n: 1 },
      } as never,
      NOW,
    );
    const out = toMqtt(amqp, { version: 5, now });
    const back = fromMqtt({ topic: 't/1', payload: out.payload, qos: 1, properties: out.properties! }, { version: 5, now });
    const published = toAmqp(back, { now: NOW });
    expect(published.content).toEqual(Buffer.from('b'));
    expect(published.options).toEqual({
      contentType: 'text/plain',
      contentEncoding: 'utf-8',
      correlationId: 'c',
      replyTo: 'r',
      messageId: 'm',
      type: 't',
      appId: 'a',
      priority: 2,
      persistent: true,
      timestamp: 1_700_000_000,
      headers: { h: 'v', n: '1' },
    });
  });
});

describe('fingerprints of redeliveries (the stamp protocol finds a redelivered message by it)', () => {
  it('two deliveries of one message share a fingerprint though the expiry left was counted down in between', () => {
    const mqtt = (left: number, at: number) =>
      fromMqtt({ topic: 't', payload: Buffer.from('x'), qos: 1, properties: { messageExpiryInterval: left } }, { version: 5, now: () => at });
    expect(fingerprint(mqtt(60, NOW))).toBe(fingerprint(mqtt(57, NOW + 3_200)));
    // AMQP: `expiration` is kept verbatim; the absolute expiry derived from it at delivery is not part of it either.
    const amqp = (at: number) => fromAmqp(Buffer.from('x'), { expiration: '60000', headers: {} } as never, at);
    expect(fingerprint(amqp(NOW))).toBe(fingerprint(amqp(NOW + 5_000)));
    expect(fingerprint(amqp(NOW))).not.toBe(fingerprint(fromAmqp(Buffer.from('x'), { expiration: '70000', headers: {} } as never, NOW)));
  });
});

describe('MQTT topics', () => {
  it('filters and names: what is valid and why not', () => {
    expect(topicFilterProblem('sensors/+/temp')).toBeUndefined();
    expect(topicFilterProblem('#')).toBeUndefined();
    expect(topicFilterProblem('a/b#')).toBe("'#' must be a whole level and the last one (e.g. sensors/#)");
    expect(topicFilterProblem('a+/b')).toBe("'+' must be a whole level (e.g. sensors/+/temp)");
    expect(topicFilterProblem('$share/g/a')).toBe("write the shared subscription's group in shared-group, not in the filter");
    expect(topicNameProblem('a/b')).toBeUndefined();
    expect(topicNameProblem('a/+')).toMatch(/wildcards/);
    expect(topicNameProblem('a\nb')).toMatch(/control character/);
  });

  it('matching, as the broker matches (a leading wildcard does not match a $ topic)', () => {
    expect(topicMatches('sensors/+/temp', 'sensors/d1/temp')).toBe(true);
    expect(topicMatches('sensors/+/temp', 'sensors/d1/hum')).toBe(false);
    expect(topicMatches('sensors/#', 'sensors')).toBe(true);
    expect(topicMatches('sensors/#', 'sensors/a/b')).toBe(true);
    expect(topicMatches('+/x', 'a/x/y')).toBe(false);
    expect(topicMatches('#', '$SYS/broker')).toBe(false);
  });

  it("topic-separator '.': '/' and '.' swapped, as RabbitMQ's MQTT plugin maps topics to routing keys; its own inverse", () => {
    expect(swapTopicSeparators('sensors/v1.2/temp')).toBe('sensors.v1/2.temp');
    expect(swapTopicSeparators(swapTopicSeparators('a/b.c'))).toBe('a/b.c');
  });
});
