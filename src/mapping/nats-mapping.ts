/**
 * NATS message ↔ neutral message (src/core/message.ts). The table this implements is docs/mapping.md ("NATS
 * JetStream").
 *
 * NATS has no properties, only headers (`NATS/1.0` header block: names of printable ASCII without ':', values of text
 * without CR or LF, each name with one or more values). The neutral properties travel as the headers the STOMP mapping
 * gives them (`content-type`, `correlation-id`, `amqp-message-id`, `persistent`, `expires`, …), so that a message
 * that crosses NATS comes back with them. Custom headers go as text by the STOMP mapping's rules (numbers and booleans
 * as text, tables as JSON), except that an array of scalars goes as one header with several values and several values
 * come back as an array. What cannot be written is left out with a log line; nothing here throws on odd input.
 *
 * Reserved names: every header whose name starts with `Nats-` (any case) belongs to the server or the client
 * (`Nats-Msg-Id` is the deduplication ID, `Nats-Expected-*` make the publish conditional, `Nats-Rollup` purges the
 * stream). The target never takes one from a message: it sets `Nats-Msg-Id` itself, from the duplicate ID. The source
 * passes them on as custom headers, and adds `Nats-Stream`, `Nats-Subject` and `Nats-Sequence` (the names JetStream's
 * RePublish uses), so an AMQP or STOMP target shows where the message came from and a template may route on its subject.
 */
import type { BridgeMessage, HeaderValue, Headers } from '../core/message.js';
import type { Logger } from '../shared/log.js';
import { encodeHeaderValue, fromStomp, STOMP_PROPERTY_HEADERS, toStomp } from './stomp-mapping.js';
import { dataRecord } from '../shared/data-record.js';

/** Header name and value pairs in order; a name may come more than once (several values). */
export type NatsHeaderList = [name: string, value: string][];

/** What a received JetStream message gives the mapping. */
export interface NatsIncoming {
  subject: string;
  stream: string;
  streamSequence: number;
  /** Each header name with its values, as the client decoded them. */
  headers: Iterable<[name: string, values: readonly string[]]>;
  body: Uint8Array;
}

export const NATS_RESERVED_PREFIX = 'nats-';
export const NATS_MSG_ID = 'Nats-Msg-Id';

const PROPERTY_HEADER_NAMES: ReadonlySet<string> = new Set(Object.values(STOMP_PROPERTY_HEADERS));
// Printable ASCII except ':' (what nats.js accepts as a header name).
const HEADER_NAME = /^[!-9;-~]+$/;
const LINE_BREAK = /[\r\n]/;

export function isReservedNatsHeader(name: string): boolean {
  return name.toLowerCase().startsWith(NATS_RESERVED_PREFIX);
}

export interface ToNatsOptions {
  log?: Logger;
  /** The duplicate-ID header: its byte value goes as UTF-8 text, as the session reads it. */
  duplicateIdHeader?: string;
  now?: () => number;
}

/** The header list and body to publish. `Nats-Msg-Id` is not among them: the target sets it. */
export function toNats(message: BridgeMessage, options: ToNatsOptions = {}): { headers: NatsHeaderList; body: Buffer } {
  const { log } = options;
  const out: NatsHeaderList = [];
  for (const [name, value] of Object.entries(message.headers)) {
    if (!HEADER_NAME.test(name) || isReservedNatsHeader(name) || PROPERTY_HEADER_NAMES.has(name)) {
      log?.debug({ header: name }, `header '${name}' is not a valid NATS header name, or a reserved or property one; left out`);
      continue;
    }
    const values = Array.isArray(value) && value.every(isScalar) ? value : [value];
    for (const v of values) {
      const encoded = encodeHeaderValue(v, name === options.duplicateIdHeader);
      if (encoded.value === undefined || LINE_BREAK.test(encoded.value)) {
        log?.debug({ header: name }, `header '${name}' ${encoded.value === undefined ? encoded.note : 'has a line break'}; left out`);
        continue;
      }
      out.push([name, encoded.value]);
    }
  }
  // The properties, written exactly as on STOMP (a message with no custom headers gives only those).
  const props = toStomp({ ...message, headers: {} }, { bytesOnly: true, ...(options.now ? { now: options.now } : {}) });
  for (const [name, value] of Object.entries(props.headers)) {
    if (name === 'content-length') continue;
    if (LINE_BREAK.test(value)) {
      log?.debug({ header: name }, `property header '${name}' has a line break; left out`);
      continue;
    }
    out.push([name, value]);
  }
  // Written out, since a NATS message without the header reads as persistent (see fromNats).
  if (!message.properties.persistent) out.push(['persistent', 'false']);
  return { headers: out, body: message.body };
}

function isScalar(v: HeaderValue): boolean {
  return typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean' || typeof v === 'bigint';
}

/** The neutral message of a JetStream message. */
export function fromNats(m: NatsIncoming): BridgeMessage {
  const first: Record<string, string> = {};
  const custom: Headers = dataRecord();
  for (const [name, values] of m.headers) {
    if (values.length === 0) continue;
    if (PROPERTY_HEADER_NAMES.has(name)) {
      first[name] = values[0]!;
      continue;
    }
    custom[name] = values.length === 1 ? values[0]! : [...values];
  }
  const body = Buffer.from(m.body.buffer, m.body.byteOffset, m.body.byteLength);
  // Property headers only: fromStomp reads them as it does on STOMP; there is no broker message-id to trust.
  const message = fromStomp(first, body, { brokerMessageIdStable: false });
  // JetStream stores what it acknowledged: a message is persistent unless a bridge wrote `persistent` without `true`.
  message.properties.persistent = first.persistent === undefined || first.persistent === 'true';
  message.headers = { ...custom, 'Nats-Stream': m.stream, 'Nats-Subject': m.subject, 'Nats-Sequence': m.streamSequence };
  return message;
}
