/**
 * STOMP frame ↔ neutral message (src/core/message.ts). The table this implements is docs/mapping.md.
 *
 * STOMP header values are strings, so typed values are written as text and come back as strings (a number header
 * 42 arrives as "42"). Tables and arrays are JSON-encoded, never dropped silently; values that cannot be written at
 * all (null, undefined, NUL characters) are left out with a log line. Nothing here throws on odd input.
 *
 * Text or binary: ActiveMQ makes a JMS TextMessage from a SEND without `content-length` and a BytesMessage from one
 * with it. A TextMessage body is decoded as UTF-8 by the broker and a SEND without `content-length` ends at the first
 * NUL byte, so a body goes as text only when its content type says text and its bytes are valid UTF-8 without NUL;
 * every other body goes as binary, with `content-length`. A peer without that distinction (RabbitMQ: every body is
 * bytes) gets `content-length` on every body (`bytesOnly`).
 */
import { isUtf8 } from 'node:buffer';
import type { BridgeMessage, HeaderValue, Headers, MessageProperties } from '../core/message.js';
import type { Logger } from '../shared/log.js';
import { RESERVED_STOMP_HEADERS, STOMP_PROPERTY_HEADERS } from '../shared/stomp-header-names.js';
import { dataRecord } from '../shared/data-record.js';

export { RESERVED_STOMP_HEADERS, STOMP_PROPERTY_HEADERS };

/** STOMP frame headers as this module writes and reads them: strings only. */
export type StompHeaders = Record<string, string>;

const PROPERTY_HEADER_NAMES: ReadonlySet<string> = new Set(Object.values(STOMP_PROPERTY_HEADERS));

export interface ToStompOptions {
  /** Receives one debug line per header that had to be encoded or left out. */
  log?: Logger;
  /**
   * The duplicate-ID header (e.g. `_AMQ_DUPL_ID`). A byte value of it is written as UTF-8 text, the way the session
   * reads such an ID, rather than as hex.
   */
  duplicateIdHeader?: string;
  /** The clock for AMQP's relative `expiration` (tests pin it). Default Date.now. */
  now?: () => number;
  /**
   * The peer has no text/bytes distinction (RabbitMQ): every body goes with `content-length`, whatever its content
   * type. Default false: the text-or-binary rule of this module's header comment.
   */
  bytesOnly?: boolean;
}

export interface FromStompOptions {
  /**
   * The broker's `message-id` names the message, not one delivery (ActiveMQ Classic). Default true. When false
   * (RabbitMQ: a new one per delivery), it is not taken as the message's ID: a redelivery must look the same as the
   * first delivery, or its stamp could not be found again by fingerprint.
   */
  brokerMessageIdStable?: boolean;
}

export interface StompFrameOut {
  headers: StompHeaders;
  body: Buffer;
  /** True when the body goes as text (no `content-length`: ActiveMQ makes a TextMessage). */
  text: boolean;
}

/** The neutral message of a received STOMP MESSAGE frame. `content-length` and protocol headers are consumed. */
export function fromStomp(headers: Readonly<Record<string, string | number>>, body: Buffer, options: FromStompOptions = {}): BridgeMessage {
  const get = (name: string): string | undefined => {
    const v = headers[name];
    return v === undefined ? undefined : String(v);
  };
  const properties: MessageProperties = { persistent: get('persistent') === 'true' };
  const setString = (key: 'contentType' | 'contentEncoding' | 'correlationId' | 'replyTo' | 'type' | 'userId' | 'appId') => {
    const v = get(STOMP_PROPERTY_HEADERS[key]);
    if (v !== undefined) properties[key] = v;
  };
  setString('contentType');
  setString('contentEncoding');
  setString('correlationId');
  setString('replyTo');
  setString('type');
  setString('userId');
  setString('appId');
  // The publisher's ID when a bridge (or RabbitMQ, for an AMQP message) carried one; else the broker's own message-id
  // where it names the message (ActiveMQ Classic).
  const messageId = get(STOMP_PROPERTY_HEADERS.messageId) ?? (options.brokerMessageIdStable === false ? undefined : get('message-id'));
  if (messageId !== undefined) properties.messageId = messageId;
  const priority = parseIntHeader(get('priority'));
  if (priority !== undefined && priority >= 0 && priority <= 9) properties.priority = priority;
  const expires = parseIntHeader(get('expires'));
  if (expires !== undefined && expires > 0) properties.expiresAt = expires;
  const timestamp = parseIntHeader(get('timestamp'));
  if (timestamp !== undefined && timestamp > 0) properties.timestamp = timestamp;

  const custom: Headers = dataRecord();
  for (const [name, value] of Object.entries(headers)) {
    if (RESERVED_STOMP_HEADERS.has(name) || PROPERTY_HEADER_NAMES.has(name)) continue;
    custom[name] = String(value);
  }
  return { body, properties, headers: custom };
}

/**
 * The SEND headers and body of a neutral message, without `destination`, `receipt` or `transaction` (the target adds
 * those). Sets `persistent:true` for a persistent message and `content-length` for a binary body.
 */
export function toStomp(message: BridgeMessage, options: ToStompOptions = {}): StompFrameOut {
  const { log } = options;
  const p = message.properties;
  const headers: StompHeaders = dataRecord();

  // Custom headers first, so that no property or protocol header can be overridden by one.
  for (const [name, value] of Object.entries(message.headers)) {
    if (name === '' || RESERVED_STOMP_HEADERS.has(name) || PROPERTY_HEADER_NAMES.has(name)) {
      log?.debug({ header: name }, `header '${name}' is a STOMP protocol or property header name; left out`);
      continue;
    }
    const encoded = encodeHeaderValue(value, name === options.duplicateIdHeader);
    if (encoded.value === undefined) {
      log?.debug({ header: name }, `header '${name}' ${encoded.note}; left out`);
      continue;
    }
    if (encoded.note) log?.debug({ header: name }, `header '${name}' ${encoded.note}`);
    headers[name] = encoded.value;
  }

  const put = (name: string, value: string | undefined): void => {
    if (value === undefined) return;
    if (value.includes('\0')) {
      log?.debug({ header: name }, `property header '${name}' contains a NUL character; left out`);
      return;
    }
    headers[name] = value;
  };
  put(STOMP_PROPERTY_HEADERS.contentType, p.contentType);
  put(STOMP_PROPERTY_HEADERS.contentEncoding, p.contentEncoding);
  put(STOMP_PROPERTY_HEADERS.correlationId, p.correlationId);
  put(STOMP_PROPERTY_HEADERS.replyTo, p.replyTo);
  put(STOMP_PROPERTY_HEADERS.messageId, p.messageId);
  put(STOMP_PROPERTY_HEADERS.type, p.type);
  put(STOMP_PROPERTY_HEADERS.userId, p.userId);
  put(STOMP_PROPERTY_HEADERS.appId, p.appId);
  if (p.priority !== undefined && Number.isFinite(p.priority)) {
    // JMS priorities are 0..9; AMQP allows up to 255, which JMS reads as "highest".
    headers.priority = String(Math.min(9, Math.max(0, Math.trunc(p.priority))));
  }
  if (p.persistent) headers.persistent = 'true';
  const expiresAt = p.expiresAt ?? relativeExpiry(p.expiration, options.now ?? Date.now);
  if (expiresAt !== undefined && expiresAt > 0) headers.expires = String(Math.trunc(expiresAt));
  if (p.timestamp !== undefined && Number.isFinite(p.timestamp) && p.timestamp > 0) {
    headers.timestamp = String(Math.trunc(p.timestamp));
  }

  const text = options.bytesOnly !== true && sendAsText(p.contentType, p.contentEncoding, message.body);
  if (!text) headers['content-length'] = String(message.body.length);
  return { headers, body: message.body, text };
}

/** The text-or-binary rule of this module's header comment. */
export function sendAsText(contentType: string | undefined, contentEncoding: string | undefined, body: Buffer): boolean {
  if (contentEncoding !== undefined && contentEncoding !== '' && !/^(identity|utf-?8)$/i.test(contentEncoding)) {
    return false; // gzip and friends: bytes, whatever the content type says
  }
  if (!isTextContentType(contentType)) return false;
  return !body.includes(0) && !hasFourByteSequence(body) && isUtf8(body);
}

/**
 * ActiveMQ's Java client reads a TextMessage with modified UTF-8 and cannot decode 4-byte sequences (emoji and other
 * characters outside the Basic Multilingual Plane): getText() throws UTFDataFormatException. Such bodies go as
 * BytesMessage, byte for byte.
 */
function hasFourByteSequence(body: Buffer): boolean {
  for (let i = 0; i < body.length; i++) if (body[i]! >= 0xf0) return true;
  return false;
}

/** text/*, JSON, XML (also `+json`/`+xml` suffixes), or any type whose charset is UTF-8; never another charset. */
export function isTextContentType(contentType: string | undefined): boolean {
  if (contentType === undefined) return false;
  const [mediaType = '', ...params] = contentType.toLowerCase().split(';').map((s) => s.trim());
  const charset = params.find((s) => s.startsWith('charset='))?.slice('charset='.length).replace(/^"|"$/g, '');
  if (charset !== undefined) return charset === 'utf-8' || charset === 'utf8' || charset === 'us-ascii';
  return (
    mediaType.startsWith('text/') ||
    mediaType === 'application/json' ||
    mediaType === 'application/xml' ||
    mediaType.endsWith('+json') ||
    mediaType.endsWith('+xml')
  );
}

export interface EncodedValue {
  value: string | undefined;
  /** Why the value was encoded or left out, for the log; '' when it went as it was. */
  note: string;
}

/**
 * A header value as text, the way STOMP (and NATS headers, MQTT 5 user properties: ./nats-mapping.ts,
 * ./mqtt-mapping.ts) carry it: see the header comment and docs/mapping.md#custom-headers. `utf8Bytes`: bytes are read
 * as UTF-8 when valid (the duplicate-ID header).
 */
export function encodeHeaderValue(value: HeaderValue, utf8Bytes: boolean): EncodedValue {
  let out: EncodedValue;
  if (typeof value === 'string') out = { value, note: '' };
  else if (typeof value === 'number' || typeof value === 'bigint' || typeof value === 'boolean') {
    out = { value: String(value), note: '' };
  } else if (value === null || value === undefined) out = { value: undefined, note: 'has no value' };
  else if (value instanceof Date) {
    const ms = value.getTime();
    out = Number.isNaN(ms) ? { value: undefined, note: 'is an invalid date' } : { value: String(ms), note: 'is a date: written as epoch ms' };
  } else if (Buffer.isBuffer(value)) {
    out =
      utf8Bytes && isUtf8(value)
        ? { value: value.toString('utf8'), note: 'is bytes: written as UTF-8' }
        : { value: value.toString('hex'), note: 'is bytes: written as hex' };
  } else if (!Array.isArray(value) && typedAmqpValue(value) !== undefined) {
    const kind = value['!'];
    out = { value: typedAmqpValue(value), note: `is an AMQP ${typeof kind === 'string' ? kind : 'typed value'}: written as its value` };
  } else {
    out = { value: JSON.stringify(toJsonSafe(value)), note: `is ${Array.isArray(value) ? 'an array' : 'a table'}: written as JSON` };
  }
  if (out.value !== undefined && out.value.includes('\0')) return { value: undefined, note: 'contains a NUL character' };
  return out;
}

/**
 * amqplib's typed values `{ '!': 'timestamp', value: seconds }` and `{ '!': 'decimal', value: { places, digits } }`
 * as plain text (`1700000000`, `12.34`); undefined for anything else.
 */
function typedAmqpValue(value: { [key: string]: HeaderValue }): string | undefined {
  const v = value.value;
  if (value['!'] === 'timestamp' && (typeof v === 'number' || typeof v === 'bigint')) return String(v);
  if (value['!'] === 'decimal' && v !== null && typeof v === 'object' && !Array.isArray(v) && !(v instanceof Date) && !Buffer.isBuffer(v)) {
    const places = Number(v.places);
    const digits = Number(v.digits);
    if (Number.isInteger(places) && places >= 0 && places <= 20 && Number.isFinite(digits)) return (digits / 10 ** places).toFixed(places);
  }
  return undefined;
}

/** A JSON-serialisable copy: bigints as strings, Buffers as hex, Dates as epoch ms (JSON.stringify throws on bigint). */
function toJsonSafe(value: HeaderValue): unknown {
  if (typeof value === 'bigint') return value.toString();
  if (value instanceof Date) return value.getTime();
  if (Buffer.isBuffer(value)) return value.toString('hex');
  if (Array.isArray(value)) return value.map(toJsonSafe);
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = toJsonSafe(v);
    return out;
  }
  return value;
}

function parseIntHeader(value: string | undefined): number | undefined {
  if (value === undefined || !/^\s*-?\d+\s*$/.test(value)) return undefined;
  const n = Number(value);
  return Number.isSafeInteger(n) ? n : undefined;
}

/** AMQP's relative `expiration` (ms, as a string) as an absolute time; undefined when absent or not a number. */
function relativeExpiry(expiration: string | undefined, now: () => number): number | undefined {
  if (expiration === undefined || !/^\s*\d+\s*$/.test(expiration)) return undefined;
  // An AMQP expiration of 0 means "expire unless deliverable now"; 1 ms ahead is the closest STOMP can say.
  return now() + Math.max(1, Number(expiration));
}
