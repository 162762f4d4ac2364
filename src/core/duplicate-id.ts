/**
 * Reading and stamping duplicate IDs (docs/design.md §3.1).
 *
 * Strategy, in order:
 * 1. The message carries the configured header (or the HornetQ name `_HQ_DUPL_ID`): use it as is.
 * 2. The source gives a stable identity (ActiveMQ's STOMP `message-id`, an AMQP `message-id` set by the publisher):
 *    use it, so every redelivery gets the same ID with no bookkeeping.
 * 3. Otherwise (RabbitMQ without `message-id`): a first delivery gets a fresh random ID, recorded against a fingerprint
 *    of the message (body + properties + headers) together with its reservation; a redelivery (`redelivered` flag)
 *    claims a recorded ID for its fingerprint. See the IdCache port for the claim protocol and docs/delivery.md for its limits.
 */
import { createHash, randomUUID } from 'node:crypto';
import type { BridgeMessage, HeaderValue } from './message.js';

export const DEFAULT_DUPLICATE_ID_HEADER = '_AMQ_DUPL_ID';
/** The name HornetQ (Artemis's ancestor) used; recognised on input only. */
export const LEGACY_DUPLICATE_ID_HEADER = '_HQ_DUPL_ID';
/**
 * Set to `true` on a copy that the target may already hold (the bridge took over a reservation of a crashed owner,
 * or a send's outcome was unknown). Consumers or Artemis (by `_AMQ_DUPL_ID`) can drop it.
 */
export const POSSIBLE_DUPLICATE_HEADER = 'x-bridge-possible-duplicate';

/** Prefix of IDs the bridge stamps, so an operator can tell them from publisher-provided ones. */
const STAMP_PREFIX = 'bb-';

/**
 * The duplicate ID carried by a message, as a string, or undefined. Strings are used as is; byte arrays are read as
 * UTF-8 when they decode cleanly, else as hex; numbers and bigints are stringified. Empty values count as absent.
 */
export function readDuplicateId(message: BridgeMessage, headerName: string): string | undefined {
  const names = headerName === DEFAULT_DUPLICATE_ID_HEADER ? [headerName, LEGACY_DUPLICATE_ID_HEADER] : [headerName];
  for (const name of names) {
    const id = Object.hasOwn(message.headers, name) ? headerValueToId(message.headers[name]) : undefined;
    if (id !== undefined) return id;
  }
  return undefined;
}

function headerValueToId(value: HeaderValue): string | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value === 'string') return value.length > 0 ? value : undefined;
  if (typeof value === 'number' || typeof value === 'bigint') return String(value);
  if (Buffer.isBuffer(value)) {
    if (value.length === 0) return undefined;
    const text = value.toString('utf8');
    return Buffer.from(text, 'utf8').equals(value) ? text : value.toString('hex');
  }
  return undefined;
}

export function newStampedId(): string {
  return `${STAMP_PREFIX}${randomUUID()}`;
}

/**
 * Writes `id` (and the possible-duplicate flag when asked) into `copy` itself: for a message the caller made for this
 * one send and owns (./session/forward-copy.ts makes one per message), rather than a second copy of its headers and of
 * the message, per message. Returns `copy`.
 */
export function setDuplicateId(copy: BridgeMessage, headerName: string, id: string, possibleDuplicate: boolean): BridgeMessage {
  copy.headers[headerName] = id;
  if (possibleDuplicate) copy.headers[POSSIBLE_DUPLICATE_HEADER] = true;
  return copy;
}

/** A copy of the message flagged as a possible duplicate (it may have been delivered already). */
export function withPossibleDuplicateFlag(message: BridgeMessage): BridgeMessage {
  return { ...message, headers: { ...message.headers, [POSSIBLE_DUPLICATE_HEADER]: true } };
}

/**
 * A digest of everything that identifies a message's content. Two deliveries of the same source message have the same
 * fingerprint; two different messages with identical content do too, which is why stamps are claimed one per delivery.
 *
 * `expiresAt` is left out: it is derived at delivery from what the broker says is left (AMQP `expiration` + now, an
 * MQTT 5 message expiry interval the broker counts down), so it differs between two deliveries of one message, whose
 * redelivery would then never find its stamp and go out under a second ID. What it comes from stays in where it is
 * stable (AMQP's verbatim `expiration`).
 */
export function fingerprint(message: BridgeMessage): string {
  const h = createHash('sha256');
  const { expiresAt: _derived, ...properties } = message.properties;
  h.update(canonical(properties));
  h.update('\u0000');
  h.update(canonical(message.headers));
  h.update('\u0000');
  h.update(message.body);
  return h.digest('base64url');
}

function canonical(value: HeaderValue): string {
  if (value === undefined) return 'u';
  if (value === null) return 'n';
  if (Buffer.isBuffer(value)) return `b${value.toString('hex')}`;
  if (value instanceof Date) return `d${value.getTime()}`;
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (typeof value === 'object') {
    const keys = Object.keys(value).sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonical(value[k])}`).join(',')}}`;
  }
  return `${typeof value}:${String(value)}`;
}
