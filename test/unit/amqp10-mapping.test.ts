import rhea, { type Message } from 'rhea';
import { describe, expect, it } from 'vitest';
import type { BridgeMessage, HeaderValue } from '../../src/core/message.js';
import { fromAmqp10, toAmqp10, decodeAppPropertiesBlob, BODY_KIND_HEADER, MAX_VALUE_DEPTH } from '../../src/mapping/amqp10-mapping.js';
import { AMQP10_APP_PROPERTIES_HEADER, fromAmqp } from '../../src/mapping/amqp-mapping.js';

const NOW = 1_700_000_000_000;
const DUP = 'x-dup-id';
const opts = { duplicateIdHeader: DUP, now: () => NOW };

/** What a receiver gets: the message through rhea's own encoder and decoder. */
function wire(m: object): Record<string, unknown> {
  return rhea.message.decode(rhea.message.encode(m));
}

/** rhea's typings have two Message types (the sent and the decoded); the mapping takes either shape. */
function msg(m: object): Message {
  return m as unknown as Message;
}

function roundTrip(m: BridgeMessage, o = opts): BridgeMessage {
  return fromAmqp10(msg(wire(toAmqp10(m, o))), o);
}

const full: BridgeMessage = {
  body: Buffer.from([0, 1, 2, 255]),
  properties: {
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
    timestamp: NOW - 5,
  },
  headers: { [DUP]: 'dup-1', 'x-bridge-possible-duplicate': true, s: 'text', n: 42, neg: -5, f: 1.5, yes: false, nil: null, bin: Buffer.from([0, 9]), when: new Date(NOW) },
};

describe('toAmqp10', () => {
  it('writes properties, header fields and one data section', () => {
    const out = toAmqp10(full, opts) as unknown as Record<string, unknown>;
    expect(out).toMatchObject({
      message_id: 'm-1',
      correlation_id: 'c-1',
      content_type: 'application/octet-stream',
      content_encoding: 'gzip',
      reply_to: 'replies',
      subject: 'order.created',
      user_id: Buffer.from('guest'),
      creation_time: new Date(NOW - 5),
      absolute_expiry_time: new Date(NOW + 60000),
      ttl: 60000,
      durable: true,
      priority: 7,
    });
    const decoded = wire(out);
    expect((decoded.body as { typecode: number; content: Buffer }).typecode).toBe(0x75);
    expect((decoded.body as { content: Buffer }).content).toEqual(full.body);
    expect(decoded.application_properties).toMatchObject({ 'app-id': 'shop', [DUP]: 'dup-1', _AMQ_DUPL_ID: 'dup-1', 'x-bridge-possible-duplicate': true });
  });

  it('puts the duplicate ID in three places: its header, _AMQ_DUPL_ID, and message_id when there is none', () => {
    const m: BridgeMessage = { body: Buffer.alloc(0), properties: { persistent: false }, headers: { [DUP]: Buffer.from('dup-bytes') } };
    const out = wire(toAmqp10(m, opts));
    expect(out.message_id).toBe('dup-bytes');
    expect(out.application_properties).toEqual({ [DUP]: 'dup-bytes', _AMQ_DUPL_ID: 'dup-bytes' });
    // The default header name is Artemis's own: one property.
    const artemis = wire(toAmqp10({ ...m, headers: { _AMQ_DUPL_ID: 'a-1' } }, { duplicateIdHeader: '_AMQ_DUPL_ID' }));
    expect(artemis.application_properties).toEqual({ _AMQ_DUPL_ID: 'a-1' });
    expect(artemis.message_id).toBe('a-1');
  });

  it('writes tables and arrays as JSON text, bigint as long, and never throws on odd values', () => {
    const lines: string[] = [];
    const log = { debug: (_o: object, msg: string) => lines.push(msg) } as never;
    let deep: HeaderValue = 'bottom';
    for (let i = 0; i < 5000; i++) deep = { d: deep };
    const m: BridgeMessage = {
      body: Buffer.from('x'),
      properties: { persistent: false, priority: 1000, timestamp: Number.NaN, expiresAt: Number.POSITIVE_INFINITY },
      headers: {
        table: { a: 1, b: [1, 'two'] },
        arr: [1, 2],
        big: 2n ** 60n + 1n,
        huge: 2n ** 70n,
        nan: Number.NaN,
        inf: Number.POSITIVE_INFINITY,
        bad: new Date(Number.NaN),
        undef: undefined,
        ts: { '!': 'timestamp', value: 1_700_000_000 },
        deep,
      },
    };
    const out = wire(toAmqp10(m, { duplicateIdHeader: DUP, log }));
    const props = out.application_properties as Record<string, unknown>;
    expect(props.table).toBe('{"a":1,"b":[1,"two"]}');
    expect(props.arr).toBe('[1,2]');
    expect(props.big).toEqual(Buffer.from('1000000000000001', 'hex')); // rhea reads a long beyond 2^53 as its 8 bytes
    expect(props.huge).toBe((2n ** 70n).toString());
    expect(Number.isNaN(props.nan)).toBe(true);
    expect(props.inf).toBe(Number.POSITIVE_INFINITY);
    expect(props).not.toHaveProperty('bad');
    expect(props).not.toHaveProperty('undef');
    expect(props.ts).toBe('1700000000');
    expect(typeof props.deep).toBe('string');
    expect(out.priority).toBeUndefined();
    expect(lines.some((l) => l.includes("'table'"))).toBe(true);
  });
});

describe('fromAmqp10', () => {
  it('round-trips a message with every property and header kind', () => {
    expect(roundTrip(full)).toEqual(full);
  });

  it('round-trips x-opt-* headers as message annotations and the group id', () => {
    const m: BridgeMessage = { body: Buffer.from('b'), properties: { persistent: false }, headers: { 'x-opt-partition-key': 'k', 'x-amqp10-group-id': 'g-1' } };
    const out = toAmqp10(m, opts) as unknown as Record<string, unknown>;
    expect(out.message_annotations).toEqual({ 'x-opt-partition-key': 'k' });
    expect(out.group_id).toBe('g-1');
    expect(roundTrip(m)).toEqual(m);
  });

  it('reads a body sent as amqp-value or amqp-sequence, marking it', () => {
    const read = (body: unknown, extra: object = {}) => fromAmqp10(msg(wire({ body, ...extra })), opts);
    expect(read('héllo')).toMatchObject({ body: Buffer.from('héllo'), properties: { contentType: 'text/plain' }, headers: { [BODY_KIND_HEADER]: 'value' } });
    expect(read('x', { content_type: 'text/csv' }).properties.contentType).toBe('text/csv');
    expect(read(Buffer.from([1, 2]))).toMatchObject({ body: Buffer.from([1, 2]), headers: { [BODY_KIND_HEADER]: 'value' } });
    expect(read({ a: 1, b: [true, null] })).toMatchObject({ body: Buffer.from('{"a":1,"b":[true,null]}'), properties: { contentType: 'application/json' } });
    expect(read(42).body.toString()).toBe('42');
    expect(read(rhea.message.sequence_section([1, 'x']))).toMatchObject({ body: Buffer.from('[1,"x"]'), headers: { [BODY_KIND_HEADER]: 'sequence' } });
    expect(read(rhea.message.data_sections([Buffer.from('ab'), Buffer.from('cd')]))).toMatchObject({ body: Buffer.from('abcd'), headers: { [BODY_KIND_HEADER]: 'data-sections' } });
    expect(read(undefined)).toMatchObject({ body: Buffer.alloc(0), headers: { [BODY_KIND_HEADER]: 'value' } }); // rhea sends no body as a null value
  });

  it('takes _AMQ_DUPL_ID as the duplicate ID when the configured header is absent (a message from Artemis)', () => {
    const m = fromAmqp10(msg(wire({ body: rhea.message.data_section(Buffer.alloc(0)) as unknown, application_properties: { _AMQ_DUPL_ID: Buffer.from('art-1') } })), opts);
    expect(m.headers[DUP]).toBe('art-1');
  });

  it('stringifies message ids deterministically; durable defaults to false', () => {
    const id = (message_id: unknown) => fromAmqp10(msg(wire({ message_id, correlation_id: message_id, body: 'x' })), opts).properties;
    expect(id(7)).toMatchObject({ messageId: '7', correlationId: '7', persistent: false });
    expect(id(rhea.types.wrap_uuid(Buffer.from('00112233445566778899aabbccddeeff', 'hex'))).messageId).toBe('00112233-4455-6677-8899-aabbccddeeff');
    expect(id(rhea.types.wrap_binary(Buffer.from([1, 2, 3]))).messageId).toBe('010203');
  });

  it('cuts values nested deeper than the limit instead of handing them on', () => {
    let deep: unknown = 'bottom';
    for (let i = 0; i < MAX_VALUE_DEPTH + 10; i++) deep = [deep];
    const m = fromAmqp10(msg({ body: 'x', application_properties: { deep } }), opts);
    let v: HeaderValue = m.headers.deep;
    let depth = 0;
    while (Array.isArray(v)) {
      v = v[0];
      depth++;
    }
    expect(depth).toBe(MAX_VALUE_DEPTH);
    expect(v).toBeNull();
  });
});

describe("the 0-9-1 reading of RabbitMQ's x-amqp-1.0-app-properties", () => {
  /** The encoded application-properties section alone, as the plugin puts it in the header (rhea writes no other API for it). */
  const section = (props: Record<string, unknown>): Buffer => {
    const without = rhea.message.encode({});
    const full = rhea.message.encode({ application_properties: props });
    const bodyLength = 4; // the null amqp-value section rhea always writes last: 00 53 77 40
    return full.subarray(without.length - bodyLength, full.length - bodyLength);
  };
  const props = (headers: Record<string, unknown>) => ({ headers }) as never;

  it('decodes the blob into headers, the plain headers winning, and drops it', () => {
    const blob = section({ [DUP]: 'dup-1', 'x-bridge-possible-duplicate': true, n: 42, big: rhea.types.wrap_long(Buffer.from('1000000000000001', 'hex')), ts: new Date(NOW), bin: Buffer.from([0, 255]), sym: rhea.types.wrap_symbol('sy'), plain: 'from-blob' });
    const m = fromAmqp(Buffer.from('b'), props({ [AMQP10_APP_PROPERTIES_HEADER]: blob, plain: 'from-broker' }), NOW);
    expect(m.headers).toEqual({ [DUP]: 'dup-1', 'x-bridge-possible-duplicate': true, n: 42, big: 2n ** 60n + 1n, ts: new Date(NOW), bin: Buffer.from([0, 255]), sym: 'sy', plain: 'from-broker' });
  });

  it('keeps a blob that arrived as text (amqplib decodes a long string as UTF-8) or does not decode, and never throws', () => {
    const text = section({ a: 'b' }).toString('utf8');
    expect(fromAmqp(Buffer.alloc(0), props({ [AMQP10_APP_PROPERTIES_HEADER]: text }), NOW).headers).toEqual({ [AMQP10_APP_PROPERTIES_HEADER]: text });
    const good = section({ a: 'b' });
    const cases: Buffer[] = [Buffer.alloc(0), good.subarray(0, good.length - 1), Buffer.concat([good, Buffer.from([0x40])]), Buffer.from([0x00, 0x53, 0x74, 0xa1, 0x01, 0x61]), Buffer.from([0xff])];
    // An array of 2^32-1 nulls declared in a few bytes, and a list nested far deeper than the limit.
    cases.push(Buffer.from([0xf0, 0, 0, 0, 5, 0xff, 0xff, 0xff, 0xff, 0x40]));
    cases.push(Buffer.concat([Buffer.alloc(100_000, 0x00), Buffer.from([0x40])]));
    const nested = Buffer.alloc(3 * 10_000);
    for (let i = 0; i < 10_000; i++) nested.set([0xc0, 0xff, 0x01], 3 * i);
    cases.push(nested);
    for (const blob of cases) {
      expect(typeof decodeAppPropertiesBlob(blob)).toBe('string');
      expect(fromAmqp(Buffer.alloc(0), props({ [AMQP10_APP_PROPERTIES_HEADER]: blob }), NOW).headers[AMQP10_APP_PROPERTIES_HEADER]).toBe(blob);
    }
  });

  it('decodes nested lists and maps within the limit', () => {
    expect(decodeAppPropertiesBlob(section({ l: [1, 'two', { three: 3 }], e: [] }))).toEqual({ l: [1, 'two', { three: 3 }], e: [] });
  });
});
