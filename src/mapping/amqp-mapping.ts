/**
 * AMQP 0-9-1 basic properties and headers ↔ the neutral BridgeMessage.
 *
 * | AMQP                    | neutral                      | notes                                                       |
 * | ----------------------- | ---------------------------- | ----------------------------------------------------------- |
 * | content-type/-encoding  | contentType/contentEncoding  | as is                                                       |
 * | correlation-id, reply-to, message-id, type, app-id | same names | as is                                   |
 * | user-id                 | userId                       | forwarded only when it equals the publishing user (below)   |
 * | priority                | priority                     | an integer 0..255, otherwise dropped                        |
 * | delivery-mode 2         | persistent: true             | absent or 1 → false; false is published with no delivery-mode |
 * | expiration (relative ms, string) | expiration (verbatim) + expiresAt ≈ now + expiration | see toAmqp  |
 * | timestamp (s)           | timestamp (ms)               | ×1000 in, floor ÷1000 out                                   |
 * | headers (table)         | headers                      | as decoded by amqplib; re-encoded by toAmqp                 |
 *
 * Headers: amqplib decodes tables, arrays, byte arrays (Buffer), booleans, null, strings and numbers, and gives
 * `timestamp` and `decimal` values as `{ '!': 'timestamp' | 'decimal', value }`, which it re-encodes with the same type.
 * What amqplib cannot keep: the width of integers and floats (it picks the smallest signed integer type, or a
 * double, from the value), and 64-bit integers beyond ±2^53 lose precision. Values are kept, wire types may change.
 * `cluster-id` (deprecated, rejected by RabbitMQ when set) is not carried.
 */
import type { MessageProperties as AmqpProperties, Options } from 'amqplib';
import type { BridgeMessage, HeaderValue, Headers, MessageProperties } from '../core/message.js';
import { dataRecord } from '../shared/data-record.js';
import type { Logger } from '../shared/log.js';
import { decodeAppPropertiesBlob } from './amqp10-mapping.js';

/**
 * RabbitMQ's AMQP 1.0 plugin hands a 0-9-1 consumer of a message published over AMQP 1.0 its application properties
 * as this one header, holding the encoded section (docs/mapping.md#amqp-0-9-1-and-amqp-10-through-rabbitmq).
 */
export const AMQP10_APP_PROPERTIES_HEADER = 'x-amqp-1.0-app-properties';

/** The header that keeps a `user-id` that could not be published as the property (see toAmqp). */
export const ORIGINAL_USER_ID_HEADER = 'x-original-user-id';

export interface ToAmqpOptions {
  /**
   * The user the target connection authenticated as. RabbitMQ closes the channel (406 PRECONDITION_FAILED) when a
   * published `user-id` differs from it, which would fail every unconfirmed publish on that channel.
   */
  connectionUser?: string;
  /** Clock for expiresAt → expiration, for tests. Default Date.now(). */
  now?: number;
}

export interface AmqpPublish {
  content: Buffer;
  options: Options.Publish;
}

function str(v: unknown): string | undefined {
  return typeof v === 'string' ? v : undefined;
}

/** Maps a consumed AMQP message into the neutral shape. `now` is for tests. */
export function fromAmqp(content: Buffer, properties: AmqpProperties, now: number = Date.now(), log?: Logger): BridgeMessage {
  const p: MessageProperties = { persistent: properties.deliveryMode === 2 };
  const contentType = str(properties.contentType);
  if (contentType !== undefined) p.contentType = contentType;
  const contentEncoding = str(properties.contentEncoding);
  if (contentEncoding !== undefined) p.contentEncoding = contentEncoding;
  const correlationId = str(properties.correlationId);
  if (correlationId !== undefined) p.correlationId = correlationId;
  const replyTo = str(properties.replyTo);
  if (replyTo !== undefined) p.replyTo = replyTo;
  const messageId = str(properties.messageId);
  if (messageId !== undefined) p.messageId = messageId;
  const type = str(properties.type);
  if (type !== undefined) p.type = type;
  const userId = str(properties.userId);
  if (userId !== undefined) p.userId = userId;
  const appId = str(properties.appId);
  if (appId !== undefined) p.appId = appId;
  if (typeof properties.priority === 'number') p.priority = properties.priority;
  const expiration = str(properties.expiration);
  if (expiration !== undefined) {
    p.expiration = expiration;
    const ttl = Number(expiration);
    // An approximation: the time the message already spent in the source queue is unknown.
    if (/^\d+$/.test(expiration) && Number.isSafeInteger(ttl)) p.expiresAt = now + ttl;
  }
  if (typeof properties.timestamp === 'number') p.timestamp = properties.timestamp * 1000;

  const headers: Headers = dataRecord();
  const raw: unknown = properties.headers;
  if (raw !== null && typeof raw === 'object') {
    for (const [k, v] of Object.entries(raw)) headers[k] = decodeValue(v);
  }
  if (Object.hasOwn(headers, AMQP10_APP_PROPERTIES_HEADER)) unfoldAmqp10AppProperties(headers, log);
  return { body: content, properties: p, headers };
}

/**
 * The application properties of the plugin's blob as headers, the blob dropped; the plain headers win a name both
 * have (they are what the broker itself set). Only bytes can be decoded: amqplib hands the plugin's long string as
 * UTF-8 text, which has lost every byte that is not UTF-8 (nearly every encoded map: its 0xc1/0xd1 code), so a text
 * blob, or bytes that do not decode, stay as they are with a debug line. Never throws.
 */
function unfoldAmqp10AppProperties(headers: Headers, log: Logger | undefined): void {
  const blob = headers[AMQP10_APP_PROPERTIES_HEADER];
  if (!Buffer.isBuffer(blob)) {
    log?.debug({ header: AMQP10_APP_PROPERTIES_HEADER }, `header '${AMQP10_APP_PROPERTIES_HEADER}' arrived as text, not bytes: its AMQP 1.0 application properties cannot be decoded; kept as it is`);
    return;
  }
  const decoded = decodeAppPropertiesBlob(blob);
  if (typeof decoded === 'string') {
    log?.debug({ header: AMQP10_APP_PROPERTIES_HEADER }, `header '${AMQP10_APP_PROPERTIES_HEADER}' does not decode (${decoded}); kept as it is`);
    return;
  }
  delete headers[AMQP10_APP_PROPERTIES_HEADER];
  for (const [k, v] of Object.entries(decoded)) if (!Object.hasOwn(headers, k)) headers[k] = v;
}

/** amqplib already decoded the table; this only narrows `any` to HeaderValue (and copies nested containers). */
function decodeValue(v: unknown): HeaderValue {
  if (v === null || v === undefined) return v;
  switch (typeof v) {
    case 'string':
    case 'number':
    case 'boolean':
    case 'bigint':
      return v;
    case 'object':
      if (Buffer.isBuffer(v) || v instanceof Date) return v;
      if (Array.isArray(v)) return v.map(decodeValue);
      return Object.assign(dataRecord<HeaderValue>(), Object.fromEntries(Object.entries(v).map(([k, x]) => [k, decodeValue(x)])));
    default:
      // symbol or function: amqplib's table decoder produces neither.
      return typeof v === 'symbol' ? v.toString() : typeof v;
  }
}

/**
 * Maps a neutral message to an amqplib publish. Never throws on odd values: what AMQP cannot carry is dropped or
 * converted, as documented here. (amqplib itself may still throw on publish for a header table over 64 KiB or a
 * short string over 255 bytes; the target turns that into a rejection of that one message.)
 *
 * - `expiration`: the verbatim AMQP value when it is a valid one (digits), so AMQP→AMQP keeps it unchanged.
 *   Otherwise, from `expiresAt` (STOMP/JMS absolute expiry): `max(1, expiresAt - now)` ms. A message whose
 *   `expiresAt` is already past is published with expiration '1', so RabbitMQ expires it at once (it is not dropped
 *   by the bridge: the broker's dead-lettering, if any, applies).
 * - `user-id`: forwarded as the property only when it equals `connectionUser` (RabbitMQ's validated user-id);
 *   otherwise it moves to the header `x-original-user-id` (overwriting one already there) and the property is left
 *   out. Publishing it as is would make RabbitMQ close the channel (PRECONDITION_FAILED) and fail every message in
 *   flight on it.
 * - non-persistent messages carry no delivery-mode (AMQP's default, non-persistent).
 * - headers: bigint → signed 64-bit, Date → AMQP timestamp (seconds), NaN/±Infinity → double, undefined → left
 *   out (null inside arrays); `{ '!': type, value }` objects pass through (amqplib's typed-value notation).
 */
export function toAmqp(msg: BridgeMessage, opts: ToAmqpOptions = {}): AmqpPublish {
  const p = msg.properties;
  const o: Options.Publish = {};
  if (p.contentType !== undefined) o.contentType = p.contentType;
  if (p.contentEncoding !== undefined) o.contentEncoding = p.contentEncoding;
  if (p.correlationId !== undefined) o.correlationId = p.correlationId;
  if (p.replyTo !== undefined) o.replyTo = p.replyTo;
  if (p.messageId !== undefined) o.messageId = p.messageId;
  if (p.type !== undefined) o.type = p.type;
  if (p.appId !== undefined) o.appId = p.appId;
  if (p.priority !== undefined && Number.isInteger(p.priority) && p.priority >= 0 && p.priority <= 255) {
    o.priority = p.priority;
  }
  if (p.persistent) o.persistent = true;
  const expiration = amqpExpiration(p, opts.now ?? Date.now());
  if (expiration !== undefined) o.expiration = expiration;
  if (p.timestamp !== undefined && Number.isFinite(p.timestamp) && p.timestamp >= 0) {
    o.timestamp = Math.floor(p.timestamp / 1000);
  }

  const headers: Record<string, unknown> = dataRecord();
  for (const [k, v] of Object.entries(msg.headers)) {
    if (v !== undefined) headers[k] = encodeValue(v);
  }
  if (p.userId !== undefined) {
    if (opts.connectionUser !== undefined && p.userId === opts.connectionUser) o.userId = p.userId;
    else headers[ORIGINAL_USER_ID_HEADER] = p.userId;
  }
  o.headers = headers;
  return { content: msg.body, options: o };
}

function amqpExpiration(p: MessageProperties, now: number): string | undefined {
  if (p.expiration !== undefined && /^\d+$/.test(p.expiration)) return p.expiration;
  if (p.expiresAt !== undefined && Number.isFinite(p.expiresAt)) {
    return String(Math.max(1, Math.ceil(p.expiresAt - now)));
  }
  return undefined;
}

/** A value in amqplib's encodable form. */
function encodeValue(v: HeaderValue): unknown {
  if (v === null || v === undefined) return null;
  switch (typeof v) {
    case 'string':
    case 'boolean':
      return v;
    case 'number':
      return Number.isFinite(v) ? v : { '!': 'double', value: v };
    case 'bigint':
      return { '!': 'int64', value: v };
    default:
      break;
  }
  if (Buffer.isBuffer(v)) return v;
  if (v instanceof Date) return { '!': 'timestamp', value: Math.floor(v.getTime() / 1000) };
  if (Array.isArray(v)) return v.map(encodeValue);
  if (isTypedValue(v)) return v;
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v)) {
    if (x !== undefined) out[k] = encodeValue(x);
  }
  return out;
}

/** amqplib's `{ '!': type, value }` notation, as it decodes timestamps and decimals. */
export function isTypedValue(v: object): v is { '!': string; value: HeaderValue } {
  return Object.hasOwn(v, '!') && typeof (v as Record<string, unknown>)['!'] === 'string' && Object.hasOwn(v, 'value');
}
