import type { MessageProperties as AmqpProperties } from 'amqplib';
import { describe, expect, it } from 'vitest';
import type { BridgeMessage } from '../../src/core/message.js';
import { ORIGINAL_USER_ID_HEADER, fromAmqp, toAmqp } from '../../src/mapping/amqp-mapping.js';

const NOW = 1_700_000_000_000;

/** What amqplib hands a consumer: every property present, undefined when not set. */
function props(p: Partial<AmqpProperties>): AmqpProperties {
  return {
    contentType: undefined,
    contentEncoding: undefined,
    headers: {},
    deliveryMode: undefined,
    priority: undefined,
    correlationId: undefined,
    replyTo: undefined,
    expiration: undefined,
    messageId: undefined,
    timestamp: undefined,
    type: undefined,
    userId: undefined,
    appId: undefined,
    clusterId: undefined,
    ...p,
  };
}

describe('fromAmqp', () => {
  it('maps every standard property and keeps the body as is', () => {
    const body = Buffer.from([0, 1, 2, 0, 255]);
    const m = fromAmqp(
      body,
      props({
        contentType: 'application/octet-stream',
        contentEncoding: 'gzip',
        correlationId: 'c-1',
        replyTo: 'replies',
        messageId: 'm-1',
        type: 'order.created',
        userId: 'guest',
        appId: 'shop',
        priority: 7,
        deliveryMode: 2,
        expiration: '60000',
        timestamp: 1_700_000_000,
        headers: { a: 'x' },
      }),
      NOW,
    );
    expect(m.body).toBe(body);
    expect(m.properties).toEqual({
      contentType: 'application/octet-stream',
      contentEncoding: 'gzip',
      correlationId: 'c-1',
      replyTo: 'replies',
      messageId: 'm-1',
      type: 'order.created',
      userId: 'guest',
      appId: 'shop',
      priority: 7,
      persistent: true,
      expiration: '60000',
      expiresAt: NOW + 60000,
      timestamp: 1_700_000_000_000,
    });
    expect(m.headers).toEqual({ a: 'x' });
  });

  it('treats a message without delivery-mode, or with 1, as not persistent', () => {
    expect(fromAmqp(Buffer.alloc(0), props({}), NOW).properties).toEqual({ persistent: false });
    expect(fromAmqp(Buffer.alloc(0), props({ deliveryMode: 1 }), NOW).properties.persistent).toBe(false);
  });

  it('keeps nested tables, arrays, byte arrays and typed values of the headers', () => {
    const headers = {
      n: 5,
      f: 1.5,
      b: true,
      nil: null,
      bytes: Buffer.from([0, 9]),
      arr: [1, 'two', [3], { four: 4 }],
      table: { inner: { deep: 'yes' } },
      ts: { '!': 'timestamp', value: 1_700_000_000 },
      dec: { '!': 'decimal', value: { places: 2, digits: 1234 } },
    };
    expect(fromAmqp(Buffer.alloc(0), props({ headers }), NOW).headers).toEqual(headers);
  });
});

describe('toAmqp', () => {
  const base: BridgeMessage = { body: Buffer.from('hi'), properties: { persistent: true }, headers: {} };

  it('maps every standard property; timestamp in seconds, persistent as delivery-mode 2', () => {
    const { content, options } = toAmqp(
      {
        body: base.body,
        headers: { h: 'v' },
        properties: {
          contentType: 'text/plain',
          contentEncoding: 'utf-8',
          correlationId: 'c',
          replyTo: 'r',
          messageId: 'm',
          type: 't',
          appId: 'a',
          priority: 3,
          persistent: true,
          expiration: '5000',
          expiresAt: NOW + 99,
          timestamp: 1_700_000_000_999,
        },
      },
      { now: NOW },
    );
    expect(content).toBe(base.body);
    expect(options).toEqual({
      contentType: 'text/plain',
      contentEncoding: 'utf-8',
      correlationId: 'c',
      replyTo: 'r',
      messageId: 'm',
      type: 't',
      appId: 'a',
      priority: 3,
      persistent: true,
      expiration: '5000', // verbatim wins over expiresAt
      timestamp: 1_700_000_000,
      headers: { h: 'v' },
    });
  });

  it('publishes a non-persistent message with no delivery-mode', () => {
    const { options } = toAmqp({ ...base, properties: { persistent: false } });
    expect(options.persistent).toBeUndefined();
    expect(options.deliveryMode).toBeUndefined();
  });

  it('derives expiration from expiresAt when there is none; a past expiry gives 1 ms', () => {
    expect(toAmqp({ ...base, properties: { persistent: true, expiresAt: NOW + 1500 } }, { now: NOW }).options.expiration).toBe('1500');
    expect(toAmqp({ ...base, properties: { persistent: true, expiresAt: NOW - 10 } }, { now: NOW }).options.expiration).toBe('1');
    expect(toAmqp({ ...base, properties: { persistent: true, expiresAt: NOW } }, { now: NOW }).options.expiration).toBe('1');
  });

  it('drops an expiration RabbitMQ would refuse, and an out-of-range priority', () => {
    const { options } = toAmqp({ ...base, properties: { persistent: true, expiration: '-5', priority: 300 } });
    expect(options.expiration).toBeUndefined();
    expect(options.priority).toBeUndefined();
  });

  it('forwards user-id only when it is the publishing user, otherwise moves it to x-original-user-id', () => {
    const msg: BridgeMessage = { ...base, properties: { persistent: true, userId: 'alice' } };
    const same = toAmqp(msg, { connectionUser: 'alice' }).options;
    expect(same.userId).toBe('alice');
    expect(same.headers).toEqual({});
    const other = toAmqp(msg, { connectionUser: 'bridge' }).options;
    expect(other.userId).toBeUndefined();
    expect(other.headers).toEqual({ [ORIGINAL_USER_ID_HEADER]: 'alice' });
    const unknown = toAmqp(msg).options;
    expect(unknown.userId).toBeUndefined();
    expect(unknown.headers).toEqual({ [ORIGINAL_USER_ID_HEADER]: 'alice' });
  });

  it('encodes header values amqplib cannot take as they are', () => {
    const when = new Date(1_700_000_000_500);
    const { options } = toAmqp({
      ...base,
      headers: { big: 2n ** 60n, when, gone: undefined, inf: Infinity, arr: [undefined, 1], t: { x: undefined, y: 'y' } },
    });
    expect(options.headers).toEqual({
      big: { '!': 'int64', value: 2n ** 60n },
      when: { '!': 'timestamp', value: 1_700_000_000 },
      inf: { '!': 'double', value: Infinity },
      arr: [null, 1],
      t: { y: 'y' },
    });
  });
});

describe('round trips', () => {
  it('AMQP → neutral → AMQP keeps every property and header', () => {
    const headers = {
      _AMQ_DUPL_ID: 'id-1',
      n: -70000,
      arr: ['a', 1, true, null],
      table: { k: Buffer.from([0, 0, 1]) },
      ts: { '!': 'timestamp', value: 1_700_000_000 },
    };
    const original = props({
      contentType: 'application/json',
      correlationId: 'c',
      messageId: 'm',
      userId: 'guest',
      priority: 0,
      deliveryMode: 2,
      expiration: '0',
      timestamp: 1_700_000_001,
      headers,
    });
    const { options } = toAmqp(fromAmqp(Buffer.from('{}'), original, NOW), { connectionUser: 'guest', now: NOW + 5000 });
    expect(options).toEqual({
      contentType: 'application/json',
      correlationId: 'c',
      messageId: 'm',
      userId: 'guest',
      priority: 0,
      persistent: true,
      expiration: '0',
      timestamp: 1_700_000_001,
      headers,
    });
  });

  it('neutral → AMQP → neutral keeps the neutral message (timestamp to the second)', () => {
    const msg: BridgeMessage = {
      body: Buffer.from([0, 0xff, 0]),
      properties: { persistent: false, type: 't', timestamp: 1_700_000_000_000, expiresAt: NOW + 2000 },
      headers: { s: 'x', n: 1, b: false },
    };
    const { content, options } = toAmqp(msg, { now: NOW });
    const back = fromAmqp(content, props({ ...options, deliveryMode: options.persistent ? 2 : undefined, headers: options.headers as AmqpProperties['headers'] }), NOW);
    expect(back.body.equals(msg.body)).toBe(true);
    expect(back.headers).toEqual(msg.headers);
    expect(back.properties).toEqual({ ...msg.properties, expiration: '2000' });
  });
});
