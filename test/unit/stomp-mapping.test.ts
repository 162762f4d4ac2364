import { describe, expect, it } from 'vitest';
import type { BridgeMessage } from '../../src/core/message.js';
import { fromStomp, isTextContentType, sendAsText, toStomp } from '../../src/mapping/stomp-mapping.js';
import { parseStompUrl, stompAddress, stompDestination } from '../../src/config/protocols/stomp-address.js';
import type { StompConnectionConfig } from '../../src/config/protocols/stomp-schema.js';
import { STOMP_READ_LIMITS } from '../../src/config/schema.js';

const NOW = 1_700_000_000_000;

function msg(partial: Omit<Partial<BridgeMessage>, 'properties'> & { properties?: Partial<BridgeMessage['properties']> }): BridgeMessage {
  return {
    body: partial.body ?? Buffer.from('hello'),
    properties: { persistent: true, ...partial.properties },
    headers: partial.headers ?? {},
  };
}

/** What a consumer sees for a SEND as ActiveMQ delivers it: our headers plus the broker's own. */
function delivered(headers: Record<string, string>, extra: Record<string, string> = {}): Record<string, string> {
  return {
    ...headers,
    destination: '/queue/q',
    'message-id': 'ID:broker-1:1:1:1:1',
    subscription: 'sub-1',
    ack: 'ID:ack-1',
    ...extra,
  };
}

describe('toStomp / fromStomp', () => {
  it('round-trips every standard property', () => {
    const m = msg({
      body: Buffer.from('{"a":1}'),
      properties: {
        contentType: 'application/json',
        contentEncoding: 'identity',
        correlationId: 'corr-1',
        replyTo: '/queue/replies',
        messageId: 'm-1',
        type: 'order.created',
        userId: 'alice',
        appId: 'shop',
        priority: 7,
        persistent: true,
        expiresAt: NOW + 60_000,
        timestamp: NOW - 5,
      },
    });
    const out = toStomp(m, { now: () => NOW });
    expect(out.headers).toEqual({
      'content-type': 'application/json',
      'content-encoding': 'identity',
      'correlation-id': 'corr-1',
      'reply-to': '/queue/replies',
      'amqp-message-id': 'm-1',
      type: 'order.created',
      'amqp-user-id': 'alice',
      'app-id': 'shop',
      priority: '7',
      persistent: 'true',
      expires: String(NOW + 60_000),
      timestamp: String(NOW - 5),
    });
    expect(out.text).toBe(true);
    const back = fromStomp(delivered(out.headers), out.body);
    expect(back.properties).toEqual(m.properties);
    expect(back.headers).toEqual({});
    expect(back.body.equals(m.body)).toBe(true);
  });

  it('takes the broker message-id as messageId when no amqp-message-id was carried', () => {
    const back = fromStomp(delivered({}, { priority: '4', expires: '0', timestamp: String(NOW) }), Buffer.alloc(0));
    expect(back.properties).toEqual({ persistent: false, messageId: 'ID:broker-1:1:1:1:1', priority: 4, timestamp: NOW });
  });

  it('omits persistent for a non-persistent message and reads its absence as non-persistent', () => {
    const out = toStomp(msg({ properties: { persistent: false } }));
    expect(out.headers.persistent).toBeUndefined();
    expect(fromStomp(delivered(out.headers), out.body).properties.persistent).toBe(false);
  });

  it('turns an AMQP relative expiration into an absolute expires', () => {
    const out = toStomp(msg({ properties: { expiration: '30000' } }), { now: () => NOW });
    expect(out.headers.expires).toBe(String(NOW + 30_000));
    expect(toStomp(msg({ properties: { expiration: 'soon' } })).headers.expires).toBeUndefined();
  });

  it('clamps an AMQP priority above 9 to 9', () => {
    expect(toStomp(msg({ properties: { priority: 200 } })).headers.priority).toBe('9');
  });

  it('writes typed custom headers as strings, and they come back as strings', () => {
    const m = msg({
      headers: {
        s: 'text: with colon\nand newline \\ backslash',
        n: 42,
        f: 1.5,
        neg: -3,
        big: 12345678901234567890n,
        t: true,
        no: false,
        d: new Date(NOW),
        bin: Buffer.from([0, 1, 0xfe, 0xff]),
        tbl: { a: 1, nested: { b: [true, 'x'] }, bytes: Buffer.from('hi'), when: new Date(NOW), big: 5n },
        arr: [1, 'two', null, [3]],
        nothing: null,
        undef: undefined,
        ts: { '!': 'timestamp', value: 1_700_000_000 },
        dec: { '!': 'decimal', value: { places: 2, digits: 1234 } },
        _AMQ_DUPL_ID: 'dup-1',
      },
    });
    const out = toStomp(m);
    const back = fromStomp(delivered(out.headers), out.body);
    expect(back.headers).toEqual({
      s: 'text: with colon\nand newline \\ backslash',
      n: '42',
      f: '1.5',
      neg: '-3',
      big: '12345678901234567890',
      t: 'true',
      no: 'false',
      d: String(NOW),
      bin: '0001feff',
      tbl: JSON.stringify({ a: 1, nested: { b: [true, 'x'] }, bytes: '6869', when: NOW, big: '5' }),
      arr: JSON.stringify([1, 'two', null, [3]]),
      ts: '1700000000',
      dec: '12.34',
      _AMQ_DUPL_ID: 'dup-1',
    });
  });

  it('writes a byte duplicate-ID header as UTF-8 text when asked to', () => {
    const out = toStomp(msg({ headers: { _AMQ_DUPL_ID: Buffer.from('id-1') } }), { duplicateIdHeader: '_AMQ_DUPL_ID' });
    expect(out.headers._AMQ_DUPL_ID).toBe('id-1');
  });

  it('never takes protocol or property headers from custom headers', () => {
    const m = msg({
      properties: { persistent: false },
      headers: {
        destination: '/queue/elsewhere',
        'message-id': 'forged',
        subscription: 'x',
        ack: 'x',
        receipt: 'x',
        transaction: 'tx',
        'content-length': '1',
        redelivered: 'true',
        expires: '1',
        priority: '9',
        persistent: 'true',
        timestamp: '1',
        'content-type': 'text/evil',
        'amqp-message-id': 'forged',
        '': 'empty name',
        'nul-value': 'a\0b',
        ok: 'kept',
      },
    });
    const out = toStomp(m);
    expect(out.headers).toEqual({ ok: 'kept', 'content-length': '5' });
  });

  it('NaN and ±Infinity (which RabbitMQ refuses in a header, but a STOMP or another source may carry) are written as Java writes them', () => {
    const out = toStomp(msg({ headers: { nan: Number.NaN, inf: Number.POSITIVE_INFINITY, ninf: Number.NEGATIVE_INFINITY, nested: { n: Number.NaN } } }));
    expect(out.headers).toMatchObject({ nan: 'NaN', inf: 'Infinity', ninf: '-Infinity', nested: '{"n":null}' });
  });

  it('does not crash on odd values', () => {
    const circularFree = { deep: { deeper: { deepest: [new Date(NaN)] } } };
    expect(() => toStomp(msg({ headers: { bad: new Date(NaN), odd: circularFree } }))).not.toThrow();
    expect(toStomp(msg({ headers: { bad: new Date(NaN) } })).headers.bad).toBeUndefined();
  });

  it('passes unknown broker headers through and drops protocol ones', () => {
    const back = fromStomp(
      delivered({ 'original-destination': '/queue/x', JMSXGroupID: 'g', 'content-length': '3', redelivered: 'true', transformation: 'jms-byte' }),
      Buffer.from('abc'),
    );
    expect(back.headers).toEqual({ 'original-destination': '/queue/x', JMSXGroupID: 'g' });
  });

  it('accepts stompit-style numeric content-length', () => {
    const back = fromStomp({ 'content-length': 3, 'message-id': 'ID:1' }, Buffer.from('abc'));
    expect(back.headers).toEqual({});
  });
});

describe('text or binary', () => {
  it('sends text bodies without content-length', () => {
    const out = toStomp(msg({ body: Buffer.from('grüße ✓\r\nline 2'), properties: { contentType: 'text/plain; charset=utf-8' } }));
    expect(out.text).toBe(true);
    expect(out.headers['content-length']).toBeUndefined();
  });

  it('sends text with 4-byte UTF-8 sequences (emoji) as bytes: ActiveMQ Java clients cannot decode them from a TextMessage', () => {
    const out = toStomp(msg({ body: Buffer.from('party 🎉'), properties: { contentType: 'text/plain; charset=utf-8' } }));
    expect(out.text).toBe(false);
    expect(out.headers['content-length']).toBe(String(Buffer.byteLength('party 🎉')));
  });

  it('sends bytes with content-length: NUL bytes, invalid UTF-8, binary or missing content types', () => {
    const cases: Array<[string | undefined, Buffer]> = [
      ['text/plain', Buffer.from([0x61, 0x00, 0x62])],
      ['text/plain', Buffer.from([0xc3, 0x28])],
      ['application/octet-stream', Buffer.from('plain ascii')],
      [undefined, Buffer.from('plain ascii')],
      ['text/plain; charset=iso-8859-1', Buffer.from('abc')],
    ];
    for (const [contentType, body] of cases) {
      const out = toStomp(msg({ body, properties: contentType ? { contentType } : {} }));
      expect(out.text, `${contentType} ${body.toString('hex')}`).toBe(false);
      expect(out.headers['content-length']).toBe(String(body.length));
      expect(fromStomp(delivered(out.headers), out.body).body.equals(body)).toBe(true);
    }
  });

  it('sends compressed bodies as bytes whatever the content type', () => {
    expect(sendAsText('application/json', 'gzip', Buffer.from('{}'))).toBe(false);
    expect(sendAsText('application/json', undefined, Buffer.from('{}'))).toBe(true);
  });

  it('recognises text content types', () => {
    for (const t of ['text/plain', 'TEXT/HTML', 'application/json', 'application/vnd.api+json', 'application/xml', 'image/svg+xml', 'application/octet-stream; charset=utf-8']) {
      expect(isTextContentType(t), t).toBe(true);
    }
    for (const t of [undefined, '', 'application/octet-stream', 'image/png', 'text/plain; charset=windows-1252']) {
      expect(isTextContentType(t), String(t)).toBe(false);
    }
  });

  it('keeps an empty text body', () => {
    const out = toStomp(msg({ body: Buffer.alloc(0), properties: { contentType: 'text/plain' } }));
    expect(out.text).toBe(true);
  });
});

describe('STOMP addresses', () => {
  const conn = (urls: string[], host?: string): StompConnectionConfig => ({
    name: 'amq',
    type: 'stomp',
    urls,
    heartBeat: [0, 0],
    connectTimeout: 1000,
    ...STOMP_READ_LIMITS,
    ...(host ? { host } : {}),
  });

  it('maps queue names to destinations', () => {
    expect(stompDestination('orders')).toBe('/queue/orders');
    expect(stompDestination('/topic/x')).toBe('/topic/x');
  });

  it('builds the address from the first URL without credentials', () => {
    expect(stompAddress(conn(['stomp://user:secret@broker-a:61613', 'stomp://broker-b']), '/queue/orders')).toBe(
      'stomp://broker-a:61613/queue/orders',
    );
    expect(stompAddress(conn(['stomp://broker-a'], 'vh'), '/queue/o')).toBe('stomp://broker-a:61613/queue/o?host=vh');
  });

  it('parses credentials and TLS', () => {
    expect(parseStompUrl('stomp+ssl://u%40x:p%3Aw@h')).toEqual({ host: 'h', port: 61614, tls: true, login: 'u@x', passcode: 'p:w' });
    expect(parseStompUrl('tcp://127.0.0.1:1234')).toEqual({ host: '127.0.0.1', port: 1234, tls: false });
  });
});
