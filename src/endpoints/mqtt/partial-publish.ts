/**
 * A PUBLISH the intake read in part (./packet-reader.ts) as the packet the source maps (src/mapping/mqtt-mapping.ts)
 * and the reason it is unreadable (src/core/message.ts Unreadable): the session dead-letters what was read and the
 * source PUBACKs it, so that the broker does not send it again on every connection (docs/design.md §10.2).
 */
import mqttPacket, { type IPublishPacket, type Packet } from 'mqtt-packet';
import type { Unreadable } from '../../core/message.js';
import { MAX_PROPERTIES_BYTES, type PartialPublish } from './packet-reader.js';

/** The packet of `p`: its payload (empty when skipped) and its properties when they were read. */
export function partialPacket(p: PartialPublish): IPublishPacket {
  const properties = p.properties !== undefined && p.properties.length > 0 ? decodeProperties(p.properties) : undefined;
  return {
    cmd: 'publish',
    topic: p.topic,
    qos: p.qos as IPublishPacket['qos'],
    dup: p.dup,
    retain: p.retain,
    payload: p.payload ?? Buffer.alloc(0),
    length: p.size,
    ...(p.messageId !== undefined ? { messageId: p.messageId } : {}),
    ...(properties !== undefined ? { properties } : {}),
  };
}

/** Why `p` was not read whole, for the dead-letter detail; `what` is the connection (`MQTT connection 'x' (host:port)`). */
export function unreadableOf(p: PartialPublish, maxPacketSize: number, what: string): Unreadable {
  const detail =
    p.dropped === 'body'
      ? `${what} delivered a PUBLISH of ${p.size} bytes, over max-packet-size ${maxPacketSize}; its payload was skipped`
      : `${what} delivered a PUBLISH with ${p.propertiesSize} bytes of MQTT 5 properties, over the ${MAX_PROPERTIES_BYTES} bytes the bridge parses; its properties (headers) were skipped`;
  return { reason: 'too-large', detail, dropped: p.dropped, size: p.size };
}

/**
 * The properties of a PUBLISH, decoded by mqtt-packet from one contiguous buffer (bounded by MAX_PROPERTIES_BYTES, so
 * linear and short): wrapped in a QoS 0 PUBLISH with an empty topic and payload. Undefined when they do not decode
 * (the message is dead-lettered without them).
 */
function decodeProperties(raw: Buffer): IPublishPacket['properties'] {
  const length = varint(raw.length);
  const body = Buffer.concat([Buffer.from([0, 0]), length, raw]);
  const packet = Buffer.concat([Buffer.from([0x30]), varint(body.length), body]);
  const parser = mqttPacket.parser({ protocolVersion: 5 });
  let properties: IPublishPacket['properties'];
  parser.on('packet', (p: Packet) => {
    if (p.cmd === 'publish') properties = p.properties;
  });
  parser.on('error', () => undefined);
  parser.parse(packet);
  return properties;
}

function varint(n: number): Buffer {
  const bytes: number[] = [];
  do {
    let byte = n % 128;
    n = Math.floor(n / 128);
    if (n > 0) byte |= 0x80;
    bytes.push(byte);
  } while (n > 0);
  return Buffer.from(bytes);
}
