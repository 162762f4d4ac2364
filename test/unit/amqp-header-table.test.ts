/**
 * amqplib's field-table decoder as patched here (patches/amqplib+2.3.1.patch, patches/README.md): a header table nested
 * deeper than the limit, or one that cannot be decoded, comes out of amqplib's frame parser as a marked empty table
 * instead of a throw that closes the connection; every ordinary table decodes as amqplib always decoded it (what its
 * encoder wrote, read back the same). Run against the installed amqplib, so it fails where the patch did not apply.
 */
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { headerDepthLimit, undecodableHeaders } from '../../src/endpoints/amqp/header-table.js';
import { fromAmqp } from '../../src/mapping/amqp-mapping.js';

const require = createRequire(import.meta.url);
const lib = join(dirname(require.resolve('amqplib')), 'lib');
const codec = require(join(lib, 'codec.js')) as { encodeTable(buf: Buffer, val: unknown, offset: number): number; decodeFields(slice: Buffer): Record<string, unknown> };
const frame = require(join(lib, 'frame.js')) as {
  parseFrame(bin: Buffer, max: number): { type: number; channel: number; size: number; payload: Buffer; rest: Buffer } | false;
  decodeFrame(f: unknown): { id: number; size: number; fields: Record<string, unknown> };
};

/** The bytes of a headers table `{ deep: { n: { n: … { leaf: 'bottom' } } } }` with `depth` tables under `deep`. */
function deepTableBytes(depth: number): Buffer {
  const leaf = Buffer.concat([Buffer.from([4]), Buffer.from('leaf'), Buffer.from('S'), Buffer.from([0, 0, 0, 6]), Buffer.from('bottom')]);
  // Each level: a short key (length, bytes), the tag F and the nested table's length. Written from the outside in, so
  // that building it does not copy the whole buffer once per level.
  const keys = ['deep', ...Array.from({ length: depth - 1 }, () => 'n')];
  const heads = keys.map((k) => 1 + k.length + 1 + 4);
  const total = heads.reduce((a, b) => a + b, 0) + leaf.length;
  const out = Buffer.alloc(total);
  let offset = 0;
  for (const k of keys) {
    out.writeUInt8(k.length, offset);
    out.write(k, offset + 1, 'latin1');
    out.write('F', offset + 1 + k.length, 'latin1');
    offset += 1 + k.length + 1 + 4;
    out.writeUInt32BE(total - offset, offset - 4);
  }
  leaf.copy(out, offset);
  return out;
}

/** A content header frame (type 2) of basic (class 60) with headers, delivery-mode and message-id. */
function headerFrame(table: Buffer): Buffer {
  const messageId = Buffer.from('m-1');
  const payload = Buffer.alloc(2 + 2 + 8 + 2 + 4 + table.length + 1 + 1 + messageId.length);
  let o = payload.writeUInt16BE(60, 0);
  o = payload.writeUInt16BE(0, o);
  o = payload.writeBigUInt64BE(42n, o);
  o = payload.writeUInt16BE(0x2000 | 0x1000 | 0x0080, o);
  o = payload.writeUInt32BE(table.length, o);
  o += table.copy(payload, o);
  o = payload.writeUInt8(2, o);
  o = payload.writeUInt8(messageId.length, o);
  messageId.copy(payload, o);
  const head = Buffer.alloc(7);
  head.writeUInt8(2, 0);
  head.writeUInt16BE(1, 1);
  head.writeUInt32BE(payload.length, 3);
  return Buffer.concat([head, payload, Buffer.from([0xce])]);
}

function parse(bytes: Buffer): { size: number; fields: Record<string, unknown> } {
  const f = frame.parseFrame(bytes, 0);
  if (f === false) throw new Error('incomplete frame');
  return frame.decodeFrame(f);
}

describe("amqplib's header-table decoder, as patched", () => {
  it('is installed with its depth limit (the patch applied)', () => {
    expect(headerDepthLimit()).toBe(100);
  });

  it('a table nested 8,000 deep comes out of the frame parser as a marked empty table, with the other properties', () => {
    const bytes = headerFrame(deepTableBytes(8000));
    const started = process.cpuUsage();
    const decoded = parse(bytes);
    const used = process.cpuUsage(started);
    expect((used.user + used.system) / 1000, 'ms of CPU').toBeLessThan(100);
    expect(decoded.size).toBe(42);
    expect(decoded.fields.deliveryMode).toBe(2);
    expect(decoded.fields.messageId).toBe('m-1');
    const headers = decoded.fields.headers;
    expect(Object.keys(headers as object)).toEqual([]);
    expect(undecodableHeaders(headers)).toEqual({ reason: 'too-deep', message: 'the table nests tables or arrays deeper than 100 levels', size: deepTableBytes(8000).length });
    // The mapping sees no header at all (the mark is a symbol).
    expect(fromAmqp(Buffer.from('body'), decoded.fields as never).headers).toEqual({});
  });

  it('nested exactly to the limit decodes; one level more is marked', () => {
    // The headers table is level 1, `deep` level 2: depth 99 under it makes 100 tables open at once.
    const ok = codec.decodeFields(deepTableBytes(99));
    expect(undecodableHeaders(ok)).toBeUndefined();
    let t: unknown = ok.deep;
    for (let i = 1; i < 99; i++) t = (t as Record<string, unknown>).n;
    expect(t).toEqual({ leaf: 'bottom' });
    expect(undecodableHeaders(codec.decodeFields(deepTableBytes(100)))?.reason).toBe('too-deep');
  });

  it('arrays count toward the depth as tables do', () => {
    let v: unknown = 'x';
    for (let i = 0; i < 150; i++) v = [v];
    const buf = Buffer.alloc(4096);
    // 150 levels encode on the default stack (the encoder recurses; ~3,000 would not).
    const n = codec.encodeTable(buf, { a: v }, 0);
    expect(undecodableHeaders(codec.decodeFields(buf.subarray(4, n)))?.reason).toBe('too-deep');
  });

  it('an unknown type tag or a length past the end of its table is marked malformed, never thrown', () => {
    const unknownTag = Buffer.concat([Buffer.from([1]), Buffer.from('k'), Buffer.from('Z')]);
    expect(undecodableHeaders(codec.decodeFields(unknownTag))).toEqual({ reason: 'malformed', message: 'Unexpected type tag "Z" at byte 2', size: 3 });
    const pastEnd = Buffer.concat([Buffer.from([1]), Buffer.from('k'), Buffer.from('S'), Buffer.from([0, 0, 1, 0]), Buffer.from('short')]);
    expect(undecodableHeaders(codec.decodeFields(pastEnd))?.reason).toBe('malformed');
    const truncatedInt = Buffer.concat([Buffer.from([1]), Buffer.from('k'), Buffer.from('I'), Buffer.from([0, 0])]);
    expect(undecodableHeaders(codec.decodeFields(truncatedInt))?.reason).toBe('malformed');
    // Through the frame parser as well: the frame decodes, its headers marked.
    expect(undecodableHeaders(parse(headerFrame(unknownTag)).fields.headers)?.reason).toBe('malformed');
  });

  it('a key named __proto__ is kept as data, not as the prototype of the table', () => {
    const buf = Buffer.alloc(256);
    const key = Buffer.from('__proto__');
    const bytes = Buffer.concat([Buffer.from([key.length]), key, Buffer.from('F'), Buffer.from([0, 0, 0, 8]), Buffer.from([1]), Buffer.from('x'), Buffer.from('S'), Buffer.from([0, 0, 0, 1]), Buffer.from('y')]);
    bytes.copy(buf);
    const decoded = codec.decodeFields(bytes);
    expect(Object.getPrototypeOf(decoded)).toBe(Object.prototype);
    expect(Object.keys(decoded)).toEqual(['__proto__']);
    expect(Object.getOwnPropertyDescriptor(decoded, '__proto__')?.value).toEqual({ x: 'y' });
    expect((decoded as { x?: unknown }).x).toBeUndefined();
  });

  it('a long string that is not UTF-8 comes as its bytes; a valid one as text, as before', () => {
    // What RabbitMQ's AMQP 1.0 plugin puts in x-amqp-1.0-app-properties: an encoded section, not text.
    const blob = Buffer.from([0x00, 0x53, 0x74, 0xc1, 0x05, 0x02, 0xa1, 0x01, 0x6b, 0xff]);
    const field = (key: string, value: Buffer) => {
      const len = Buffer.alloc(4);
      len.writeUInt32BE(value.length);
      return Buffer.concat([Buffer.from([key.length]), Buffer.from(key), Buffer.from('S'), len, value]);
    };
    const decoded = codec.decodeFields(Buffer.concat([field('blob', blob), field('text', Buffer.from('grüße'))]));
    expect(Buffer.isBuffer(decoded.blob)).toBe(true);
    expect(Buffer.from(decoded.blob as Buffer)).toEqual(blob);
    expect(decoded.text).toBe('grüße');
  });

  it('ordinary tables decode as amqplib always did: what its encoder wrote comes back the same', () => {
    const scalar = fc.oneof(
      fc.string(),
      fc.boolean(),
      fc.constant(null),
      fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }),
      fc.maxSafeInteger(),
      // amqplib's encoder writes a number of 2^50 or more as an int64 (BigInt of a fraction throws): such doubles cannot be written.
      fc.double({ noNaN: true, noDefaultInfinity: true, min: -(2 ** 50), max: 2 ** 50 }).filter((d) => !Number.isInteger(d)),
      fc.uint8Array({ maxLength: 16 }).map((a) => Buffer.from(a)),
      fc.nat({ max: 2 ** 40 }).map((v) => ({ '!': 'timestamp', value: v })),
      fc.record({ places: fc.nat({ max: 255 }), digits: fc.nat({ max: 2 ** 32 - 1 }) }).map((v) => ({ '!': 'decimal', value: v })),
    );
    const key = fc.string({ minLength: 1, maxLength: 20 }).filter((k) => Buffer.byteLength(k) < 256 && k !== '__proto__' && k !== '!');
    const { table } = fc.letrec((tie) => ({
      value: fc.oneof({ depthSize: 'small', withCrossShrink: true }, scalar, tie('array'), tie('table')),
      array: fc.array(tie('value'), { maxLength: 5 }),
      table: fc.dictionary(key, tie('value'), { maxKeys: 5 }),
    }));
    fc.assert(
      fc.property(table, (t) => {
        const buf = Buffer.alloc(1 << 20);
        const n = codec.encodeTable(buf, t, 0);
        const decoded = codec.decodeFields(buf.subarray(4, n));
        expect(undecodableHeaders(decoded)).toBeUndefined();
        expect(decoded).toEqual(t);
      }),
      { numRuns: 300 },
    );
  });

  it('decoding is linear in the table size: a frame-sized table (128 KiB) well within 200 ms, an array 8× longer in about 8× the time', () => {
    const encoded = (value: Record<string, unknown>, size: number) => {
      const buf = Buffer.alloc(size);
      return buf.subarray(4, codec.encodeTable(buf, value, 0));
    };
    // CPU time, the least of a few runs: the machine is shared (its load is the other processes' wall-clock time, not
    // this one's CPU), and only the decoder's own cost is wanted.
    const fastest = (bytes: Buffer) =>
      Math.min(
        ...Array.from({ length: 5 }, () => {
          const started = process.cpuUsage();
          codec.decodeFields(bytes);
          const used = process.cpuUsage(started);
          return (used.user + used.system) / 1000;
        }),
      );
    // The largest table a content header frame carries (RabbitMQ's frame_max, 128 KiB), of small nested tables.
    const frame = encoded(Object.fromEntries(Array.from({ length: 3100 }, (_, i) => [`key-${i}`, { v: i, s: 'value', a: [i, true] }])), 256 * 1024);
    expect(frame.length).toBeGreaterThan(128 * 1024);
    expect(fastest(frame)).toBeLessThan(200);
    expect(codec.decodeFields(frame)['key-3099']).toEqual({ v: 3099, s: 'value', a: [3099, true] });
    // Linear: about 8×; a decoder that rescanned what it read would take 64×. (Arrays: no object grows to 40,000 keys,
    // whose cost is V8's, upstream's decoder's as much as this one's. Both warmed up first.)
    const array = (n: number) => encoded({ a: Array.from({ length: n }, (_, i) => `v${i}`) }, n * 16 + 64);
    const [smallBytes, largeBytes] = [array(40_000), array(320_000)];
    codec.decodeFields(smallBytes);
    codec.decodeFields(largeBytes);
    const small = fastest(smallBytes);
    const large = fastest(largeBytes);
    expect(large / small).toBeLessThan(24);
  });
});
