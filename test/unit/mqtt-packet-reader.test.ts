/**
 * The MQTT intake (src/endpoints/mqtt/packet-reader.ts): whole packets are cut the same however the bytes are split;
 * a PUBLISH over max-packet-size is read in part (topic, QoS, packet identifier, properties within the limit) and the
 * rest skipped, the next packet read whole; a PUBLISH whose properties are over the limit keeps its payload and drops
 * them; any other packet over the limit ends the reading with a sentence.
 */
import mqttPacket, { type Packet } from 'mqtt-packet';
import { describe, expect, it } from 'vitest';
import { MAX_PROPERTIES_BYTES, PacketReader, type PartialPublish } from '../../src/endpoints/mqtt/packet-reader.js';
import { partialPacket, unreadableOf } from '../../src/endpoints/mqtt/partial-publish.js';

const gen = (p: Packet, version: 4 | 5 = 5): Buffer => mqttPacket.generate(p, { protocolVersion: version });

interface Seen {
  packets: Buffer[];
  partials: PartialPublish[];
  refused: string[];
}

/** Feeds `bytes` to a reader in chunks of `size` (cycling through the sizes given). */
function feed(bytes: Buffer, sizes: number[], maxPacketSize: number, version: 4 | 5 = 5): Seen {
  const seen: Seen = { packets: [], partials: [], refused: [] };
  const reader = new PacketReader(version, maxPacketSize, {
    // The buffer may share the chunk's memory: copy, as the parser does by parsing at once.
    packet: (b) => seen.packets.push(Buffer.from(b)),
    partial: (p) => seen.partials.push(p),
    refuse: (s) => seen.refused.push(s),
  });
  let at = 0;
  for (let i = 0; at < bytes.length; i++) {
    const n = sizes[i % sizes.length]!;
    reader.read(bytes.subarray(at, at + n));
    at += n;
  }
  return seen;
}

const small = [
  gen({ cmd: 'connack', sessionPresent: false, reasonCode: 0, properties: { receiveMaximum: 10, userProperties: { a: 'b' } } }),
  gen({ cmd: 'publish', topic: 'a/b', qos: 1, messageId: 7, dup: false, retain: false, payload: Buffer.from('hello'), properties: { userProperties: { k: ['1', '2'] }, contentType: 'text/plain' } }),
  gen({ cmd: 'puback', messageId: 3, reasonCode: 0 }),
  gen({ cmd: 'pingresp' }),
  gen({ cmd: 'publish', topic: 'q0', qos: 0, dup: false, retain: true, payload: Buffer.alloc(300, 1) }),
];

describe('MQTT packet reader', () => {
  it('cuts the same whole packets however the bytes are split', () => {
    const all = Buffer.concat(small);
    for (const sizes of [[all.length], [1], [2, 3], [7, 1, 13], [64]]) {
      const seen = feed(all, sizes, 1024 * 1024);
      expect(seen.packets).toEqual(small);
      expect(seen.partials).toEqual([]);
      expect(seen.refused).toEqual([]);
    }
  });

  it('reads the head of a PUBLISH over max-packet-size, skips its body, and reads the next packet whole', () => {
    const big = gen({
      cmd: 'publish',
      topic: 'dev/1',
      qos: 1,
      messageId: 42,
      dup: true,
      retain: false,
      payload: Buffer.alloc(10_000, 0x61),
      properties: { userProperties: { device: 'd1', 'x-dup-id': 'id-1' } },
    });
    const next = gen({ cmd: 'publish', topic: 'dev/2', qos: 1, messageId: 43, dup: false, retain: false, payload: Buffer.from('ok') });
    for (const sizes of [[big.length + next.length], [1], [5, 1000], [4096]]) {
      const seen = feed(Buffer.concat([big, next]), sizes, 1024);
      expect(seen.refused).toEqual([]);
      expect(seen.packets).toEqual([next]);
      expect(seen.partials).toHaveLength(1);
      const p = seen.partials[0]!;
      expect(p).toMatchObject({ topic: 'dev/1', qos: 1, messageId: 42, dup: true, retain: false, dropped: 'body', size: big.length });
      expect(p.payload).toBeUndefined();
      const packet = partialPacket(p);
      expect(packet.properties?.userProperties).toEqual({ device: 'd1', 'x-dup-id': 'id-1' });
      expect(packet.payload).toEqual(Buffer.alloc(0));
      expect(unreadableOf(p, 1024, 'MQTT connection x')).toEqual({
        reason: 'too-large',
        dropped: 'body',
        size: big.length,
        detail: `MQTT connection x delivered a PUBLISH of ${big.length} bytes, over max-packet-size 1024; its payload was skipped`,
      });
    }
  });

  it('MQTT 3.1.1: a PUBLISH over max-packet-size has no properties; QoS 0 has no packet identifier', () => {
    const big = gen({ cmd: 'publish', topic: 't', qos: 0, dup: false, retain: false, payload: Buffer.alloc(5000) }, 4);
    const seen = feed(Buffer.concat([big, gen({ cmd: 'pingresp' }, 4)]), [100], 1024, 4);
    expect(seen.partials).toEqual([{ topic: 't', qos: 0, dup: false, retain: false, dropped: 'body', size: big.length, propertiesSize: 0 }]);
    expect(seen.packets).toHaveLength(1);
  });

  it('drops properties over the limit, never parsing them, and keeps the payload of a PUBLISH within max-packet-size', () => {
    const many: Record<string, string> = {};
    for (let i = 0; i < 6000; i++) many[`name-${i}`] = 'v'.repeat(40);
    const big = gen({ cmd: 'publish', topic: 'p', qos: 1, messageId: 9, dup: false, retain: false, payload: Buffer.from('body'), properties: { userProperties: many } });
    const seen = feed(big, [1500], 4 * 1024 * 1024);
    expect(seen.packets).toEqual([]);
    expect(seen.partials).toHaveLength(1);
    const p = seen.partials[0]!;
    expect(p.propertiesSize).toBeGreaterThan(MAX_PROPERTIES_BYTES);
    expect(p).toMatchObject({ topic: 'p', messageId: 9, dropped: 'headers', size: big.length });
    expect(p.payload).toEqual(Buffer.from('body'));
    expect(partialPacket(p).properties).toBeUndefined();
  });

  it('keeps properties over the limit out of a PUBLISH over max-packet-size too, and reads on', () => {
    const many: Record<string, string> = {};
    for (let i = 0; i < 6000; i++) many[`name-${i}`] = 'v'.repeat(40);
    const big = gen({ cmd: 'publish', topic: 'p', qos: 1, messageId: 9, dup: false, retain: false, payload: Buffer.alloc(100), properties: { userProperties: many } });
    const seen = feed(Buffer.concat([big, small[3]!]), [9000], 64 * 1024);
    expect(seen.partials).toHaveLength(1);
    expect(seen.partials[0]).toMatchObject({ dropped: 'body', messageId: 9 });
    expect(seen.partials[0]!.properties).toBeUndefined();
    expect(seen.packets).toEqual([small[3]]);
  });

  it('ends the reading on another packet over max-packet-size, and on a malformed length', () => {
    const suback = gen({ cmd: 'suback', messageId: 1, granted: [1], properties: { reasonString: 'x'.repeat(3000) } });
    expect(feed(suback, [10], 1024).refused[0]).toMatch(/^a packet of \d+ bytes, over max-packet-size 1024, that is no PUBLISH/);
    expect(feed(Buffer.from([0x30, 0xff, 0xff, 0xff, 0xff, 0x01]), [6], 1024).refused).toEqual(['a packet with a malformed remaining length']);
    // A topic length past the packet's end.
    const bad = Buffer.from([0x32, 0x84, 0x08, 0xff, 0xff, ...Buffer.alloc(1024)]);
    expect(feed(bad, [100], 1024).refused).toEqual(['a PUBLISH whose topic or properties run past its end']);
  });
});
