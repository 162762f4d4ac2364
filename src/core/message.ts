/**
 * The protocol-neutral message every endpoint reads into and writes from.
 * AMQP, STOMP, NATS and MQTT adapters map to and from this shape (see src/mapping/); the session never sees a protocol
 * frame.
 */

/** A header value as a protocol decoded it. AMQP tables can nest; STOMP values are always strings. */
export type HeaderValue =
  | string
  | number
  | boolean
  | bigint
  | null
  | undefined
  | Date
  | Buffer
  | HeaderValue[]
  | { [key: string]: HeaderValue };

export type Headers = Record<string, HeaderValue>;

/** The standard properties both protocols know. All optional except persistence. */
export interface MessageProperties {
  contentType?: string;
  contentEncoding?: string;
  correlationId?: string;
  replyTo?: string;
  messageId?: string;
  type?: string;
  userId?: string;
  appId?: string;
  priority?: number;
  /** AMQP delivery-mode 2 / STOMP `persistent:true`. */
  persistent: boolean;
  /**
   * AMQP `expiration` as the publisher wrote it (relative ms, a string). Kept verbatim so that
   * AMQP→AMQP forwards it unchanged.
   */
  expiration?: string;
  /** Absolute expiry in epoch ms (STOMP/JMS `expires`). */
  expiresAt?: number;
  /** Creation time in epoch ms (AMQP carries seconds; STOMP/JMS `timestamp` carries ms). */
  timestamp?: number;
  /**
   * The MQTT topic the message was published to (an MQTT source), for address templates (`${property.topic}`); no
   * other protocol carries it, and no target writes it (src/mapping/mqtt-mapping.ts).
   */
  topic?: string;
}

export interface BridgeMessage {
  /** The body, byte for byte. */
  body: Buffer;
  properties: MessageProperties;
  /** Application headers (AMQP `headers` table, STOMP non-standard frame headers). */
  headers: Headers;
}

/** A message as a source hands it to the session (./session.ts). */
export interface SourceDelivery {
  message: BridgeMessage;
  /** The broker says it delivered this message before (AMQP `redelivered`, STOMP `redelivered:true`). */
  redelivered: boolean;
  /**
   * An identity of this source message that is the same on every redelivery, when the protocol gives one
   * (ActiveMQ's STOMP `message-id`, an AMQP `message-id` property set by the publisher). Undefined otherwise.
   */
  stableId?: string;
  /**
   * When the broker stored the message, epoch ms, where the source knows it (JetStream's stored time): its own time for
   * the lag figures (../core/session/held.ts ownTime), taken before the publisher's `timestamp`. Never forwarded.
   */
  storedAt?: number;
  /** Monotonic per source session; the session uses it for logs and ordering only. */
  seq: number;
  /**
   * Set when the source could not read this message whole (docs/design.md §10.2): `message` then holds only what was
   * read within the limits. The session settles it alone, never sends it to the target and never asks the cache about
   * it (./session/unreadable.ts).
   */
  unreadable?: Unreadable;
}

/**
 * Why a delivery could not be read whole, and what of it is missing. A source that keeps its connection after such a
 * frame (it skipped the rest in linear time) hands the delivery on with this, so that the one message is settled and
 * the ones after it flow: the broker would redeliver a message the bridge never settles, forever.
 */
export interface Unreadable {
  /** The dead-letter reason: `too-large` (over a size limit of the connection), `malformed-headers` (not decodable). */
  reason: 'too-large' | 'malformed-headers';
  /** A sentence for the dead-letter detail and the log: which limit or what could not be decoded, and the peer. */
  detail: string;
  /** What `message` lacks: its body (over a size limit: not buffered), or its application headers (not decodable). */
  dropped: 'body' | 'headers';
  /** Size of the frame or packet in bytes as the peer announced or the reader counted it, when known. */
  size?: number;
  /**
   * The source asks for it to be handed to the broker's own dead-letter path (SourceEndpoint.reject) instead of the
   * bridge's: an ActiveMQ persistent message NACKed moves whole to ActiveMQ's DLQ. Ignored by a source without reject.
   */
  handBack?: boolean;
}
