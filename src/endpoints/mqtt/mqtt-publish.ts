/** An outgoing QoS 1 PUBLISH: what the target hands the session, what the broker answers, and its bytes. */
import mqttPacket, { type IPublishPacket, type Packet } from 'mqtt-packet';
import { MessageRejectedError } from '../../shared/errors.js';

/** A QoS 1 PUBLISH to send; the session sets the packet identifier. */
export interface OutgoingPublish {
  topic: string;
  payload: Buffer;
  retain: boolean;
  properties?: IPublishPacket['properties'];
}

/** The broker's answer to one PUBLISH: its PUBACK's reason code (0 on 3.1.1, which has none) and reason string. */
export interface PublishAck {
  reasonCode: number;
  reasonString?: string;
}

/** MQTT strings and binary data carry a 16-bit length. */
const MAX_STRING_BYTES = 65_535;

/**
 * The PUBLISH as bytes. Refuses (MessageRejectedError, `too-large`) a string MQTT cannot carry (over 65,535 bytes:
 * mqtt-packet would write a broken packet without a word) and a packet over `limit` (the connection's max-packet-size,
 * or the broker's maximum packet size when it announced a smaller one), before anything is written: the message is
 * refused, the connection stays. `what`, `peer`: the session, for the sentences.
 */
export function encodePublish(message: OutgoingPublish, id: number, version: 4 | 5, limit: number, what: string, peer: string): Buffer {
  const tooLong = longString(message);
  if (tooLong !== undefined) throw new MessageRejectedError('too-large', `${tooLong}; an MQTT string is at most ${MAX_STRING_BYTES} bytes`);
  const buffer = mqttPacket.generate(publishPacket(message, id, version), { protocolVersion: version });
  // mqtt-packet reports what it cannot encode by writing less: never send such a packet.
  if (buffer.length < message.payload.length + Buffer.byteLength(message.topic) + 4) {
    throw new MessageRejectedError('unencodable', `${what}: the message cannot be encoded as an MQTT PUBLISH`);
  }
  if (buffer.length > limit) {
    throw new MessageRejectedError('too-large', `the PUBLISH would be ${buffer.length} bytes; at most ${limit} go to ${peer} (max-packet-size, or the broker's maximum packet size)`);
  }
  return buffer;
}

function publishPacket(message: OutgoingPublish, id: number, version: 4 | 5): Packet {
  return {
    cmd: 'publish',
    topic: message.topic,
    payload: message.payload,
    qos: 1,
    retain: message.retain,
    dup: false,
    messageId: id,
    ...(version === 5 && message.properties !== undefined ? { properties: message.properties } : {}),
  };
}

/** Which string of a PUBLISH is longer than MQTT can say (topic, user property, content type, …), or undefined. */
function longString(m: OutgoingPublish): string | undefined {
  const over = (text: string): boolean => text.length > MAX_STRING_BYTES / 3 && Buffer.byteLength(text, 'utf8') > MAX_STRING_BYTES;
  if (over(m.topic)) return `the topic is ${Buffer.byteLength(m.topic)} bytes`;
  const p = m.properties;
  if (p === undefined) return undefined;
  for (const [name, value] of Object.entries(p.userProperties ?? {})) {
    if (over(name)) return `a header name is ${Buffer.byteLength(name)} bytes`;
    for (const v of Array.isArray(value) ? value : [value]) if (over(v)) return `header '${name.slice(0, 64)}' is ${Buffer.byteLength(v)} bytes`;
  }
  if (p.contentType !== undefined && over(p.contentType)) return `the content type is ${Buffer.byteLength(p.contentType)} bytes`;
  if (p.responseTopic !== undefined && over(p.responseTopic)) return `the response topic is ${Buffer.byteLength(p.responseTopic)} bytes`;
  if (p.correlationData !== undefined && p.correlationData.length > MAX_STRING_BYTES) return `the correlation data is ${p.correlationData.length} bytes`;
  return undefined;
}

/**
 * The PUBACKs of these packet identifiers, back to back in one buffer: 4 bytes each, the same on MQTT 3.1.1 and 5 (on
 * 5 a success without properties may leave its reason code and property length out, MQTT 5.0 §3.4.2.1).
 */
export function encodePubacks(messageIds: readonly number[]): Buffer {
  const out = Buffer.allocUnsafe(4 * messageIds.length);
  for (let i = 0; i < messageIds.length; i++) {
    out[4 * i] = 0x40;
    out[4 * i + 1] = 2;
    out.writeUInt16BE(messageIds[i]!, 4 * i + 2);
  }
  return out;
}
