/**
 * MQTT PUBLISH ↔ neutral message (src/core/message.ts). The table this implements is docs/mapping.md#mqtt.
 *
 * MQTT 5 has a few message properties of its own (content type, correlation data, response topic, message expiry
 * interval, payload format indicator) and user properties: string pairs, a name may repeat. The neutral properties MQTT
 * has no field for travel as user properties under the names STOMP uses for them (`amqp-message-id`, `type`,
 * `priority`, …: ../shared/stomp-header-names.ts), so AMQP → MQTT → AMQP keeps them; custom headers are user
 * properties (typed values written as text, tables and arrays as JSON, as on STOMP; an array of strings as a repeated
 * user property). MQTT 3.1.1 has none of this: the payload is all that travels, so a 3.1.1 hop loses every header, the
 * duplicate ID and the possible-duplicate flag included (docs/delivery.md says what the promise is then).
 *
 * Nothing here throws on odd input: what cannot be written is left out with a log line — null, and any string with a
 * control character (U+0000–U+001F, U+007F–U+009F): MQTT forbids NUL and says the others SHOULD NOT be sent, and
 * Mosquitto 2.0 closes the connection on a PUBLISH that has one (checked), which would fail every PUBLISH in flight
 * and, sent again, the next connection too.
 */
import { isUtf8 } from 'node:buffer';
import type { IPublishPacket, UserProperties } from 'mqtt-packet';
import type { BridgeMessage, HeaderValue, Headers, MessageProperties } from '../core/message.js';
import type { Logger } from '../shared/log.js';
import { STOMP_PROPERTY_HEADERS } from '../shared/stomp-header-names.js';
import { encodeHeaderValue } from './stomp-mapping.js';
import { swapTopicSeparators } from '../config/protocols/mqtt-address.js';
import { dataRecord } from '../shared/data-record.js';

/** Correlation data that is not UTF-8 text: carried as hex in this header, and made bytes again on an MQTT 5 target. */
export const CORRELATION_DATA_HEADER = 'x-mqtt-correlation-data';
/** Set (to `1`) on a message whose publisher said its payload is UTF-8 (MQTT 5 payload format indicator). */
export const PAYLOAD_FORMAT_HEADER = 'x-mqtt-payload-format-indicator';

// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

/** The neutral properties without an MQTT 5 field of their own, and the user property each travels in. */
const CARRIED = {
  contentEncoding: STOMP_PROPERTY_HEADERS.contentEncoding,
  messageId: STOMP_PROPERTY_HEADERS.messageId,
  type: STOMP_PROPERTY_HEADERS.type,
  userId: STOMP_PROPERTY_HEADERS.userId,
  appId: STOMP_PROPERTY_HEADERS.appId,
  priority: STOMP_PROPERTY_HEADERS.priority,
  timestamp: STOMP_PROPERTY_HEADERS.timestamp,
} as const;
type CarriedKey = keyof typeof CARRIED;
const CARRIED_NAMES: ReadonlySet<string> = new Set<string>([...Object.values(CARRIED), CORRELATION_DATA_HEADER, PAYLOAD_FORMAT_HEADER]);
/** The neutral property each carried user property names, looked up once per user property of every message. */
const CARRIED_KEYS: ReadonlyMap<string, CarriedKey> = new Map((Object.entries(CARRIED) as [CarriedKey, string][]).map(([key, name]) => [name, key]));

export interface FromMqttOptions {
  version: 4 | 5;
  /** `.`: `properties.topic` with `/` and `.` swapped (the source's `topic-separator`). */
  topicSeparator?: '/' | '.';
  /** The clock of the message expiry interval (tests pin it). */
  now?: () => number;
}

/** The neutral message of a received PUBLISH. */
export function fromMqtt(packet: Pick<IPublishPacket, 'topic' | 'payload' | 'qos' | 'properties'>, options: FromMqttOptions): BridgeMessage {
  const body = typeof packet.payload === 'string' ? Buffer.from(packet.payload, 'utf8') : Buffer.from(packet.payload);
  const properties: MessageProperties = {
    persistent: packet.qos > 0,
    topic: options.topicSeparator === '.' ? swapTopicSeparators(packet.topic) : packet.topic,
  };
  const headers: Headers = dataRecord();
  const p = options.version === 5 ? packet.properties : undefined;
  if (p === undefined) return { body, properties, headers };

  if (p.contentType !== undefined) properties.contentType = p.contentType;
  if (p.responseTopic !== undefined) properties.replyTo = p.responseTopic;
  if (p.correlationData !== undefined) {
    const data = Buffer.from(p.correlationData);
    if (isUtf8(data) && !data.includes(0)) properties.correlationId = data.toString('utf8');
    else headers[CORRELATION_DATA_HEADER] = data.toString('hex');
  }
  if (p.messageExpiryInterval !== undefined) properties.expiresAt = (options.now ?? Date.now)() + p.messageExpiryInterval * 1000;
  if (p.payloadFormatIndicator === true) headers[PAYLOAD_FORMAT_HEADER] = '1';

  const user = p.userProperties ?? {};
  for (const [name, value] of Object.entries(user)) {
    const key = CARRIED_KEYS.get(name);
    if (key !== undefined) {
      const text = Array.isArray(value) ? value[0] : value;
      if (text !== undefined) setCarried(properties, key, text);
      continue;
    }
    if (name === CORRELATION_DATA_HEADER || name === PAYLOAD_FORMAT_HEADER) continue;
    headers[name] = Array.isArray(value) ? [...value] : value;
  }
  return { body, properties, headers };
}

function setCarried(p: MessageProperties, key: CarriedKey, text: string): void {
  if (key === 'priority' || key === 'timestamp') {
    if (!/^\d+$/.test(text)) return;
    const n = Number(text);
    if (!Number.isSafeInteger(n)) return;
    if (key === 'priority') {
      if (n <= 255) p.priority = n;
    } else if (n > 0) p.timestamp = n;
    return;
  }
  p[key] = text;
}

export interface ToMqttOptions {
  version: 4 | 5;
  log?: Logger;
  /** The duplicate-ID header: a byte value of it is written as UTF-8 text, the way the session reads it. */
  duplicateIdHeader?: string;
  /** The clock for the message expiry interval (tests pin it). */
  now?: () => number;
}

/** What a PUBLISH carries: the payload and, on MQTT 5, its properties (none on 3.1.1). */
export interface MqttMessageOut {
  payload: Buffer;
  properties?: NonNullable<IPublishPacket['properties']>;
}

/** The PUBLISH payload and properties of a neutral message; topic, QoS and retain are the target's. */
export function toMqtt(message: BridgeMessage, options: ToMqttOptions): MqttMessageOut {
  if (options.version !== 5) return { payload: message.body };
  const { log } = options;
  const p = message.properties;
  const props: NonNullable<IPublishPacket['properties']> = {};
  const user: UserProperties = dataRecord();
  const put = (name: string, value: string | string[]): void => {
    const values = Array.isArray(value) ? value : [value];
    if (CONTROL.test(name) || values.some((v) => CONTROL.test(v))) {
      log?.debug({ header: name }, `header '${name}' has a control character, which an MQTT string may not carry; left out`);
      return;
    }
    user[name] = value;
  };

  // Custom headers first, so that no property's user property can be overridden by one.
  for (const [name, value] of Object.entries(message.headers)) {
    if (name === '' || CARRIED_NAMES.has(name)) continue;
    const encoded = encodeUserProperty(value, name === options.duplicateIdHeader);
    if (encoded.value === undefined) {
      log?.debug({ header: name }, `header '${name}' ${encoded.note}; left out`);
      continue;
    }
    if (encoded.note) log?.debug({ header: name }, `header '${name}' ${encoded.note}`);
    put(name, encoded.value);
  }
  for (const [key, name] of Object.entries(CARRIED) as [CarriedKey, string][]) {
    const v = p[key];
    if (v === undefined) continue;
    if (typeof v === 'number') {
      if (Number.isFinite(v) && v >= 0) put(name, String(Math.trunc(v)));
    } else put(name, v);
  }

  const text = (name: string, v: string | undefined): string | undefined => {
    if (v === undefined || !CONTROL.test(v)) return v;
    log?.debug({ property: name }, `${name} has a control character, which an MQTT string may not carry; left out`);
    return undefined;
  };
  const contentType = text('content type', p.contentType);
  if (contentType !== undefined) props.contentType = contentType;
  const responseTopic = text('reply-to (response topic)', p.replyTo);
  if (responseTopic !== undefined) props.responseTopic = responseTopic;
  const hexData = message.headers[CORRELATION_DATA_HEADER];
  if (p.correlationId !== undefined) props.correlationData = Buffer.from(p.correlationId, 'utf8');
  else if (typeof hexData === 'string' && /^(?:[0-9a-f]{2})+$/i.test(hexData)) props.correlationData = Buffer.from(hexData, 'hex');
  const expiry = expirySeconds(p, (options.now ?? Date.now)());
  if (expiry !== undefined) props.messageExpiryInterval = expiry;
  // Only when the publisher said so (never inferred from the content type): the broker may check the bytes.
  const format = message.headers[PAYLOAD_FORMAT_HEADER];
  if ((format === '1' || format === 1) && isUtf8(message.body)) {
    props.payloadFormatIndicator = true;
  }
  if (Object.keys(user).length > 0) props.userProperties = user;
  return Object.keys(props).length > 0 ? { payload: message.body, properties: props } : { payload: message.body };
}

/** Whole seconds left: from the absolute expiry, else AMQP's relative `expiration` (ms); at least 1 (0 means "none"). */
function expirySeconds(p: MessageProperties, now: number): number | undefined {
  let ms: number | undefined;
  if (p.expiresAt !== undefined && Number.isFinite(p.expiresAt)) ms = p.expiresAt - now;
  else if (p.expiration !== undefined && /^\d+$/.test(p.expiration)) ms = Number(p.expiration);
  if (ms === undefined) return undefined;
  return Math.min(0xffff_ffff, Math.max(1, Math.ceil(ms / 1000)));
}

/** As a STOMP header value (./stomp-mapping.ts), except that an array of strings is a repeated user property. */
function encodeUserProperty(value: HeaderValue, utf8Bytes: boolean): { value: string | string[] | undefined; note: string } {
  if (Array.isArray(value) && value.length > 0 && value.every((v) => typeof v === 'string')) {
    return value.some((v) => v.includes('\0')) ? { value: undefined, note: 'contains a NUL character' } : { value, note: '' };
  }
  return encodeHeaderValue(value, utf8Bytes);
}
