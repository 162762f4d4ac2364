/**
 * AMQP 1.0 message (rhea's flattened form: header, properties and the body on one object) ↔ neutral message
 * (src/core/message.ts). The table this implements is docs/mapping.md#amqp-10.
 *
 * - Properties with an AMQP 1.0 field go there (`type` as `subject`, the JMS mapping's JMSType and Service Bus's
 *   Label); `appId`, which has none, goes as the application property `app-id` (its STOMP name) and comes back.
 * - Custom headers are application properties, which hold simple values only: tables and arrays go as JSON text
 *   (as on STOMP), bigint as long, Date as timestamp, Buffer as binary; what cannot be written is left out with a debug line.
 *   Headers named `x-opt-*` are message annotations both ways (the annotation namespace of Artemis, Service Bus, Qpid).
 * - The duplicate ID goes under its header name, as `_AMQ_DUPL_ID` (Artemis's duplicate detection) and as `message_id`
 *   when the message has none of its own (Service Bus deduplicates on it).
 * - The body goes as ONE data section, never an amqp-value, so that RabbitMQ's plugin hands a 0-9-1 consumer the bytes.
 *   A body that came as amqp-value or amqp-sequence is made bytes (see bodyOf) and marked `x-amqp10-body`.
 * - `message_id` is always written as a string: RabbitMQ 3.10 closes a 0-9-1 consumer's connection (541) on a message
 *   whose message-id or correlation-id is a ulong (test/integration/amqp10-mapping-plugin.test.ts).
 * Nothing here throws on odd input.
 */
import { isUtf8 } from 'node:buffer';
import rhea, { type Message } from 'rhea';
import { DEFAULT_DUPLICATE_ID_HEADER } from '../core/duplicate-id.js';
import type { BridgeMessage, HeaderValue, Headers, MessageProperties } from '../core/message.js';
import type { Logger } from '../shared/log.js';
import { dataRecord } from '../shared/data-record.js';
import { STOMP_PROPERTY_HEADERS } from '../shared/stomp-header-names.js';
import { encodeHeaderValue } from './stomp-mapping.js';

/** The application property that carries `appId` (no AMQP 1.0 field): its STOMP header name. */
export const APP_ID_PROPERTY = STOMP_PROPERTY_HEADERS.appId;
/** Set on a message whose body did not come as data section(s): `value`, `sequence` or `data-sections` (several). */
export const BODY_KIND_HEADER = 'x-amqp10-body';
/** `group_id` as a header (Service Bus's SessionId, JMSXGroupID): read and written back. */
export const GROUP_ID_HEADER = 'x-amqp10-group-id';
/** Headers with this prefix are message annotations on AMQP 1.0. */
export const ANNOTATION_PREFIX = 'x-opt-';
/** Nesting deeper than this in a decoded value is cut (a deep value must not overflow the stack of a later walk). */
export const MAX_VALUE_DEPTH = 100;

export interface Amqp10MappingOptions {
  duplicateIdHeader: string;
  log?: Logger;
  /** Clock for ttl ↔ expiresAt (tests pin it). Default Date.now. */
  now?: () => number;
}

const MAX_UINT = 0xffff_ffff;
const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;
/** rhea's body section class (not exported): a data section tells it apart from an amqp-value holding binary. */
const Section = (rhea.message.data_section(Buffer.alloc(0)) as object).constructor;
/** rhea's Typed class (its typings declare it, its module does not export it): a described value it did not know. */
const Typed = (rhea.types.wrap_boolean(true) as object).constructor;

/** The rhea message to send for a neutral message. */
export function toAmqp10(message: BridgeMessage, options: Amqp10MappingOptions): Message {
  const { log } = options;
  const p = message.properties;
  // Built as a record: rhea's typings say `user_id` is a string, its codec writes the binary field from a Buffer.
  const out: Record<string, unknown> = { body: rhea.message.data_section(message.body) as unknown };
  const appProps: Record<string, unknown> = dataRecord();
  const annotations: Record<string, unknown> = dataRecord();

  for (const [name, value] of Object.entries(message.headers)) {
    if (name === APP_ID_PROPERTY) {
      log?.debug({ header: name }, `header '${name}' is the AMQP 1.0 name of appId; left out`);
      continue;
    }
    if (name === GROUP_ID_HEADER) {
      if (typeof value === 'string') out.group_id = value;
      continue;
    }
    const typed = toSimple(value, name, log);
    if (typed === undefined) continue;
    if (name.startsWith(ANNOTATION_PREFIX)) annotations[name] = typed;
    else appProps[name] = typed;
  }

  const dupId = duplicateIdText(message.headers[options.duplicateIdHeader]);
  if (dupId !== undefined) {
    appProps[options.duplicateIdHeader] = dupId;
    appProps[DEFAULT_DUPLICATE_ID_HEADER] = dupId;
  }
  if (p.appId !== undefined) appProps[APP_ID_PROPERTY] = p.appId;

  const messageId = p.messageId ?? dupId;
  if (messageId !== undefined) out.message_id = messageId;
  if (p.correlationId !== undefined) out.correlation_id = p.correlationId;
  if (p.contentType !== undefined) out.content_type = p.contentType;
  if (p.contentEncoding !== undefined) out.content_encoding = p.contentEncoding;
  if (p.replyTo !== undefined) out.reply_to = p.replyTo;
  if (p.type !== undefined) out.subject = p.type;
  if (p.userId !== undefined) out.user_id = Buffer.from(p.userId, 'utf8');
  if (p.timestamp !== undefined && Number.isFinite(p.timestamp) && p.timestamp >= 0) out.creation_time = new Date(Math.trunc(p.timestamp));
  if (p.expiresAt !== undefined && Number.isFinite(p.expiresAt) && p.expiresAt > 0) out.absolute_expiry_time = new Date(Math.trunc(p.expiresAt));
  const ttl = ttlOf(p, options.now ?? Date.now);
  if (ttl !== undefined) out.ttl = ttl;
  out.durable = p.persistent;
  if (p.priority !== undefined && Number.isInteger(p.priority) && p.priority >= 0 && p.priority <= 255) out.priority = p.priority;

  if (Object.keys(appProps).length > 0) out.application_properties = appProps;
  if (Object.keys(annotations).length > 0) out.message_annotations = annotations;
  return out as unknown as Message;
}

/** The neutral message of a received rhea message. */
export function fromAmqp10(message: Message, options: Amqp10MappingOptions): BridgeMessage {
  const { log } = options;
  const m = message as unknown as Record<string, unknown>;
  const properties: MessageProperties = { persistent: m.durable === true };
  const headers: Headers = dataRecord();

  const messageId = idText(m.message_id);
  if (messageId !== undefined) properties.messageId = messageId;
  const correlationId = idText(m.correlation_id);
  if (correlationId !== undefined) properties.correlationId = correlationId;
  if (typeof m.content_type === 'string') properties.contentType = m.content_type;
  if (typeof m.content_encoding === 'string') properties.contentEncoding = m.content_encoding;
  if (typeof m.reply_to === 'string') properties.replyTo = m.reply_to;
  if (typeof m.subject === 'string') properties.type = m.subject;
  if (typeof m.user_id === 'string') properties.userId = m.user_id;
  else if (Buffer.isBuffer(m.user_id)) properties.userId = isUtf8(m.user_id) ? m.user_id.toString('utf8') : m.user_id.toString('hex');
  if (typeof m.priority === 'number' && Number.isInteger(m.priority) && m.priority >= 0 && m.priority <= 255) properties.priority = m.priority;
  const created = timeOf(m.creation_time);
  if (created !== undefined) properties.timestamp = created;
  const expiresAt = timeOf(m.absolute_expiry_time);
  if (typeof m.ttl === 'number' && Number.isInteger(m.ttl) && m.ttl >= 0) {
    properties.expiration = String(m.ttl);
    // As on 0-9-1 (./amqp-mapping.ts): an approximation when the publisher gave no absolute time.
    properties.expiresAt = expiresAt ?? (options.now ?? Date.now)() + m.ttl;
  } else if (expiresAt !== undefined) properties.expiresAt = expiresAt;
  if (typeof m.group_id === 'string') headers[GROUP_ID_HEADER] = m.group_id;

  const annotations = plainRecord(m.message_annotations);
  for (const [name, value] of Object.entries(annotations)) {
    if (name.startsWith(ANNOTATION_PREFIX)) headers[name] = toHeaderValue(value, 0, name, log);
  }
  const appProps = plainRecord(m.application_properties);
  for (const [name, value] of Object.entries(appProps)) {
    if (name === APP_ID_PROPERTY) {
      if (typeof value === 'string') properties.appId = value;
      continue;
    }
    headers[name] = toHeaderValue(value, 0, name, log);
  }
  // A message from Artemis names its duplicate ID `_AMQ_DUPL_ID`; the session reads the configured name.
  const artemis = duplicateIdText(headers[DEFAULT_DUPLICATE_ID_HEADER]);
  if (options.duplicateIdHeader !== DEFAULT_DUPLICATE_ID_HEADER && artemis !== undefined) {
    if (!Object.hasOwn(headers, options.duplicateIdHeader)) headers[options.duplicateIdHeader] = artemis;
    // The copy toAmqp10 wrote beside the configured name: folded back, so that a message crossing 1.0 comes back whole.
    else if (headers[options.duplicateIdHeader] === artemis) delete headers[DEFAULT_DUPLICATE_ID_HEADER];
  }

  const body = bodyOf(m.body, log);
  if (body.kind !== undefined) headers[BODY_KIND_HEADER] = body.kind;
  if (body.json && properties.contentType === undefined) properties.contentType = 'application/json';
  if (body.kind === 'value' && !body.json && typeof m.body === 'string' && properties.contentType === undefined) properties.contentType = 'text/plain';
  return { body: body.bytes, properties, headers };
}

interface Body {
  bytes: Buffer;
  kind?: 'value' | 'sequence' | 'data-sections';
  /** The bytes are JSON text the mapping wrote. */
  json: boolean;
}

/**
 * The bytes of a body: a data section as is; several data sections concatenated (in the order received); a string
 * amqp-value as UTF-8, a binary one as is, a null one as no bytes; any other amqp-value and an amqp-sequence as JSON
 * text (bytes in it as hex, bigints as strings, timestamps as epoch ms).
 */
function bodyOf(body: unknown, log: Logger | undefined): Body {
  if (body === undefined) return { bytes: Buffer.alloc(0), json: false };
  // rhea sends a message without a body as an amqp-value null.
  if (body === null) return { bytes: Buffer.alloc(0), kind: 'value', json: false };
  if (body instanceof Section) {
    const { typecode, content, multiple } = body as unknown as { typecode: number; content: unknown; multiple?: boolean };
    if (typecode === 0x75) {
      const parts = (multiple === true && Array.isArray(content) ? content : [content]).filter((c): c is Buffer => Buffer.isBuffer(c));
      return multiple === true ? { bytes: Buffer.concat(parts), kind: 'data-sections', json: false } : { bytes: parts[0] ?? Buffer.alloc(0), json: false };
    }
    return { bytes: Buffer.from(jsonText(content, log), 'utf8'), kind: 'sequence', json: true };
  }
  if (typeof body === 'string') return { bytes: Buffer.from(body, 'utf8'), kind: 'value', json: false };
  if (Buffer.isBuffer(body)) return { bytes: body, kind: 'value', json: false };
  return { bytes: Buffer.from(jsonText(body, log), 'utf8'), kind: 'value', json: true };
}

function jsonText(value: unknown, log: Logger | undefined): string {
  const safe = toHeaderValue(value, 0, 'body', log);
  const encoded = encodeHeaderValue(safe, false);
  return encoded.value ?? JSON.stringify(null);
}

/** A header value as an application property value (rhea's typed wrappers where its own guess would be wrong). */
function toSimple(value: HeaderValue, name: string, log: Logger | undefined): unknown {
  if (value === undefined) return undefined;
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return value;
  if (typeof value === 'number') {
    // rhea writes NaN as null and picks an integer type from the value; a non-integer is a double anyway.
    return Number.isSafeInteger(value) ? value : rhea.types.wrap_double(value);
  }
  if (typeof value === 'bigint') {
    if (value >= INT64_MIN && value <= INT64_MAX) {
      const bytes = Buffer.alloc(8);
      bytes.writeBigInt64BE(value);
      return rhea.types.wrap_long(bytes);
    }
    log?.debug({ header: name }, `header '${name}' is an integer beyond 64 bits: written as text`);
    return value.toString();
  }
  if (value instanceof Date) {
    if (Number.isNaN(value.getTime())) {
      log?.debug({ header: name }, `header '${name}' is an invalid date; left out`);
      return undefined;
    }
    return value;
  }
  if (Buffer.isBuffer(value)) return value;
  // Tables, arrays, amqplib's typed values: AMQP 1.0 application properties hold no lists or maps. Cut to the depth
  // limit first: the JSON encoding recurses.
  const encoded = encodeHeaderValue(toHeaderValue(value, 0, name, log), false);
  if (encoded.value === undefined) {
    log?.debug({ header: name }, `header '${name}' ${encoded.note}; left out`);
    return undefined;
  }
  log?.debug({ header: name }, `header '${name}' ${encoded.note}`);
  return encoded.value;
}

/** A decoded AMQP 1.0 value as a header value; nesting beyond MAX_VALUE_DEPTH is cut (null, with a debug line). */
export function toHeaderValue(value: unknown, depth: number, name: string, log: Logger | undefined): HeaderValue {
  if (value === null || value === undefined) return null;
  switch (typeof value) {
    case 'string':
    case 'number':
    case 'boolean':
    case 'bigint':
      return value;
    case 'object':
      break;
    default:
      return typeof value; // symbol or function: no decoder produces either
  }
  if (Buffer.isBuffer(value) || value instanceof Date) return value;
  if (depth >= MAX_VALUE_DEPTH) {
    log?.debug({ header: name }, `header '${name}' nests deeper than ${MAX_VALUE_DEPTH} levels: the rest is left out`);
    return null;
  }
  if (Array.isArray(value)) return value.map((v) => toHeaderValue(v, depth + 1, name, log));
  // A described value rhea did not know (a Typed): its value.
  if (value instanceof Typed) return toHeaderValue((value as { value: unknown }).value, depth + 1, name, log);
  const out: Record<string, HeaderValue> = dataRecord();
  for (const [k, v] of Object.entries(value)) out[k] = toHeaderValue(v, depth + 1, name, log);
  return out;
}

/**
 * A message-id or correlation-id as text: a string as is, a ulong as decimal, a 16-byte uuid in its 8-4-4-4-12 form,
 * other binary as hex (rhea hands uuid and binary both as a Buffer: 16 bytes read as a uuid).
 */
export function idText(id: unknown): string | undefined {
  if (typeof id === 'string') return id;
  if (typeof id === 'number' && Number.isFinite(id)) return String(id);
  if (typeof id === 'bigint') return id.toString();
  if (Buffer.isBuffer(id)) {
    if (id.length === 16) {
      const h = id.toString('hex');
      return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
    }
    // A ulong beyond 2^53 (rhea gives its 8 bytes) is read as binary too: rare, and still deterministic.
    return id.length > 0 ? id.toString('hex') : undefined;
  }
  return undefined;
}

/** The duplicate ID as text, the way the session reads it (src/core/duplicate-id.ts): UTF-8 bytes as text, else hex. */
function duplicateIdText(value: HeaderValue): string | undefined {
  if (typeof value === 'string') return value.length > 0 ? value : undefined;
  if (typeof value === 'number' || typeof value === 'bigint') return String(value);
  if (Buffer.isBuffer(value) && value.length > 0) return isUtf8(value) ? value.toString('utf8') : value.toString('hex');
  return undefined;
}

function ttlOf(p: MessageProperties, now: () => number): number | undefined {
  if (p.expiration !== undefined && /^\d+$/.test(p.expiration)) return Math.min(MAX_UINT, Number(p.expiration));
  if (p.expiresAt !== undefined && Number.isFinite(p.expiresAt)) return Math.min(MAX_UINT, Math.max(1, Math.ceil(p.expiresAt - now())));
  return undefined;
}

function timeOf(v: unknown): number | undefined {
  if (v instanceof Date && Number.isFinite(v.getTime()) && v.getTime() > 0) return v.getTime();
  return undefined;
}

function plainRecord(v: unknown): Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v) && !Buffer.isBuffer(v) ? (v as Record<string, unknown>) : {};
}

/**
 * The application properties of RabbitMQ's `x-amqp-1.0-app-properties` header (the encoded section, as the AMQP 1.0
 * publisher sent it), for the 0-9-1 reading (./amqp-mapping.ts), or a sentence saying why not. A decoder of its own,
 * not rhea's: rhea's recurses without bound and trusts counts (an array of 2^32 nulls in 10 bytes); this one stops at
 * MAX_VALUE_DEPTH, checks every length against the bytes there, and keeps 64-bit integers beyond 2^53 as bigint.
 */
export function decodeAppPropertiesBlob(bytes: Buffer): Headers | string {
  try {
    const c = { buf: bytes, pos: 0 };
    const value = readValue(c, readCode(c, 0), 0);
    if (c.pos !== bytes.length) return `${bytes.length - c.pos} bytes after the map`;
    if (value === null || typeof value !== 'object' || Array.isArray(value) || Buffer.isBuffer(value) || value instanceof Date) return 'not a map';
    return value;
  } catch (e) {
    return e instanceof Error ? e.message : String(e);
  }
}

interface Cursor {
  buf: Buffer;
  pos: number;
}

function take(c: Cursor, n: number): number {
  const at = c.pos;
  if (n < 0 || at + n > c.buf.length) throw new Error(`a length past the end (${n} bytes at ${at})`);
  c.pos += n;
  return at;
}

/** A constructor's type code; a described type's descriptor is read and dropped (the section's 0x74 included). */
function readCode(c: Cursor, depth: number): number {
  let code = c.buf[take(c, 1)]!;
  while (code === 0x00) {
    if (depth > MAX_VALUE_DEPTH) throw new Error(`nested deeper than ${MAX_VALUE_DEPTH} levels`);
    readValue(c, readCode(c, depth + 1), depth + 1);
    code = c.buf[take(c, 1)]!;
  }
  return code;
}

function int64(v: bigint): number | bigint {
  return v >= BigInt(Number.MIN_SAFE_INTEGER) && v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : v;
}

function readValue(c: Cursor, code: number, depth: number): HeaderValue {
  if (depth > MAX_VALUE_DEPTH) throw new Error(`nested deeper than ${MAX_VALUE_DEPTH} levels`);
  const b = c.buf;
  switch (code) {
    case 0x40: return null;
    case 0x41: return true;
    case 0x42: return false;
    case 0x43: case 0x44: return 0;
    case 0x45: return [];
    case 0x56: return b[take(c, 1)] !== 0;
    case 0x50: case 0x52: case 0x53: return b.readUInt8(take(c, 1));
    case 0x51: case 0x54: case 0x55: return b.readInt8(take(c, 1));
    case 0x60: return b.readUInt16BE(take(c, 2));
    case 0x61: return b.readInt16BE(take(c, 2));
    case 0x70: return b.readUInt32BE(take(c, 4));
    case 0x71: return b.readInt32BE(take(c, 4));
    case 0x72: return b.readFloatBE(take(c, 4));
    case 0x73: { const cp = b.readUInt32BE(take(c, 4)); return cp <= 0x10ffff ? String.fromCodePoint(cp) : '\ufffd'; }
    case 0x80: return int64(b.readBigUInt64BE(take(c, 8)));
    case 0x81: return int64(b.readBigInt64BE(take(c, 8)));
    case 0x82: return b.readDoubleBE(take(c, 8));
    case 0x83: return new Date(Number(b.readBigInt64BE(take(c, 8))));
    case 0x74: return Buffer.from(b.subarray(take(c, 4), c.pos));
    case 0x84: return Buffer.from(b.subarray(take(c, 8), c.pos));
    case 0x94: case 0x98: return Buffer.from(b.subarray(take(c, 16), c.pos));
    case 0xa0: case 0xb0: return Buffer.from(b.subarray(take(c, readLength(c, code)), c.pos));
    case 0xa1: case 0xb1: case 0xa3: case 0xb3: return b.toString('utf8', take(c, readLength(c, code)), c.pos);
    case 0xc0: case 0xd0: case 0xc1: case 0xd1: case 0xe0: case 0xf0: return readCompound(c, code, depth);
    default: throw new Error(`unknown type code 0x${code.toString(16)} at ${c.pos - 1}`);
  }
}

/** The length of a variable-width value or compound: one byte for the 0xa*, 0xc*, 0xe* codes, four otherwise. */
function readLength(c: Cursor, code: number): number {
  return (code & 0x10) === 0 ? c.buf.readUInt8(take(c, 1)) : c.buf.readUInt32BE(take(c, 4));
}

function readCompound(c: Cursor, code: number, depth: number): HeaderValue {
  const size = readLength(c, code);
  const end = c.pos + size;
  if (end > c.buf.length) throw new Error(`a length past the end (${size} bytes at ${c.pos})`);
  const count = readLength(c, code);
  // Every element takes at least one byte, or (an array of a zero-width type) is bounded by the declared size too.
  if (count > size) throw new Error(`${count} elements in ${size} bytes`);
  const items: HeaderValue[] = [];
  const elementCode = code >= 0xe0 ? readCode(c, depth + 1) : undefined;
  for (let i = 0; i < count; i++) items.push(readValue(c, elementCode ?? readCode(c, depth + 1), depth + 1));
  if (c.pos !== end) throw new Error(`a compound of ${size} bytes held ${c.pos - end + size}`);
  if (code !== 0xc1 && code !== 0xd1) return items;
  const map: Record<string, HeaderValue> = dataRecord();
  for (let i = 0; i + 1 < items.length; i += 2) map[keyText(items[i])] = items[i + 1];
  return map;
}

/** A map key as a header name: AMQP 1.0 application-property keys are strings; any other key as text. */
function keyText(key: HeaderValue): string {
  if (typeof key === 'string') return key;
  return encodeHeaderValue(key, false).value ?? 'null';
}
