/**
 * What a STOMP peer is, told by the `server` header of its CONNECTED frame, and what the bridge may rely on there.
 *
 * STOMP leaves the parts that matter to a bridge to the server: whether `message-id` names the broker's message (the
 * same on every redelivery) or one delivery, which SUBSCRIBE header bounds the in-flight window, what marks a text
 * body, what a NACK does. The source and target read these from one profile chosen once per connection; a server
 * this module does not know gets the cautious answers (no stable identity, both prefetch headers).
 *
 * Checked against ActiveMQ Classic 5.17 and RabbitMQ 3.10's STOMP plugin (docs/mapping.md says what each does); Artemis is named so
 * that logs say what it is, but its behaviour is not checked here, so it gets the cautious answers too.
 */
import type { StompHeaders } from '../../mapping/stomp-mapping.js';

export type StompPeerKind = 'activemq-classic' | 'activemq-artemis' | 'rabbitmq' | 'unknown';

export interface StompPeerProfile {
  readonly kind: StompPeerKind;
  /**
   * True when the peer's `message-id` is the same on every delivery of one message (ActiveMQ Classic: checked). Then it
   * is the source delivery's stable identity; otherwise the source gives none and the session stamps by fingerprint and
   * claims the stamp on a `redelivered:true` delivery, as for an AMQP message without `message-id`.
   */
  readonly stableMessageId: boolean;
  /** The SUBSCRIBE header(s) that bound how many unacked messages the peer hands out. */
  readonly prefetchHeaders: readonly string[];
  /**
   * How the peer tells text from binary bodies. `content-length`: a SEND without it becomes a text message (ActiveMQ:
   * TextMessage, decoded as UTF-8 and cut at the first NUL), with it a bytes message; the target sends a body as text
   * only when its content type says text and its bytes allow it. `bytes`: every body is bytes and `content-type` says
   * the rest (RabbitMQ); the target always sends `content-length`.
   */
  readonly bodyTyping: 'content-length' | 'bytes';
  /**
   * What a NACK does there: `dead-letter` (ActiveMQ: a persistent message goes to ActiveMQ.DLQ at once, a non-persistent
   * one is dropped), `requeue` (RabbitMQ: back to the queue, unless `requeue:false`), `unknown`. The source never NACKs:
   * it leaves a message unacked and reconnects, which returns it on every peer.
   */
  readonly nack: 'dead-letter' | 'requeue' | 'unknown';
  /**
   * The peer applies a JMS message selector given as the SUBSCRIBE header `selector`, so that what it does not select
   * stays in the queue (ActiveMQ Classic: checked, test/integration/selector-agreement.test.ts). False where it has
   * none (RabbitMQ) or where that is not checked (Artemis, unknown servers): the bridge's filter alone decides there.
   */
  readonly selectors: boolean;
  /**
   * The SUBSCRIBE header that makes a subscription the queue's only active consumer (source.exclusive), the others
   * waiting until it goes: ActiveMQ Classic's `activemq.exclusive` (checked: the second subscriber gets nothing until the
   * first disconnects, and is not told it waits). Undefined where the peer has none the bridge can use: RabbitMQ's STOMP
   * plugin reads `exclusive` as the queue's exclusivity, not the consumer's; Artemis and unknown servers are not checked.
   */
  readonly exclusiveHeader: string | undefined;
  /**
   * The bridges of a process may share one connection to this peer (src/endpoints/stomp/shared-session.ts): it takes
   * many subscriptions on one connection, gives back a subscription's unacked messages on UNSUBSCRIBE, and answers a
   * refused request with an ERROR that names its receipt and leaves the connection open, so that one bridge's refusal
   * stays that bridge's (ActiveMQ Classic: checked, test/integration/stomp-endpoints.test.ts, the endpoint contract with
   * the process's connections). False where a refusal closes the connection (RabbitMQ's STOMP plugin answers a SEND to a
   * missing exchange with an ERROR naming no receipt and closes: checked there too; the same for an ACK of a subscription
   * it no longer has, and an UNSUBSCRIBE leaves its messages unacked until the connection closes) or where that is not
   * checked (Artemis, unknown servers): there each endpoint keeps a connection of its own.
   */
  readonly sharedConnection: boolean;
}

const ACTIVEMQ_CLASSIC: StompPeerProfile = {
  kind: 'activemq-classic',
  stableMessageId: true,
  prefetchHeaders: ['activemq.prefetchSize'],
  bodyTyping: 'content-length',
  nack: 'dead-letter',
  selectors: true,
  exclusiveHeader: 'activemq.exclusive',
  sharedConnection: true,
};

const ACTIVEMQ_ARTEMIS: StompPeerProfile = {
  kind: 'activemq-artemis',
  stableMessageId: false,
  prefetchHeaders: ['activemq.prefetchSize', 'prefetch-count'],
  bodyTyping: 'content-length',
  nack: 'unknown',
  selectors: false,
  exclusiveHeader: undefined,
  sharedConnection: false,
};

const RABBITMQ: StompPeerProfile = {
  kind: 'rabbitmq',
  // `T_<subscription>@@session-<id>@@<n>`: a new one on every delivery (checked).
  stableMessageId: false,
  prefetchHeaders: ['prefetch-count'],
  bodyTyping: 'bytes',
  nack: 'requeue',
  selectors: false,
  exclusiveHeader: undefined,
  sharedConnection: false,
};

const UNKNOWN: StompPeerProfile = {
  kind: 'unknown',
  stableMessageId: false,
  prefetchHeaders: ['activemq.prefetchSize', 'prefetch-count'],
  // The stricter rule: a body that may go as text on ActiveMQ goes as text anywhere else too.
  bodyTyping: 'content-length',
  nack: 'unknown',
  selectors: false,
  exclusiveHeader: undefined,
  sharedConnection: false,
};

/**
 * The profile of the server that sent `server` in CONNECTED (`ActiveMQ/5.17.2`, `ActiveMQ-Artemis/2.31.2 …`,
 * `RabbitMQ/3.10.8`); `unknown` for anything else, a missing header included (STOMP 1.0 servers need not send one).
 */
export function stompPeerProfile(server: string | undefined): StompPeerProfile {
  const product = (server ?? '').trim().split('/', 1)[0]?.trim().toLowerCase() ?? '';
  if (product === 'activemq') return ACTIVEMQ_CLASSIC;
  if (product === 'activemq-artemis' || product === 'artemis') return ACTIVEMQ_ARTEMIS;
  if (product === 'rabbitmq') return RABBITMQ;
  return UNKNOWN;
}

/** The SUBSCRIBE headers that set a prefetch of `prefetch` messages on this peer. */
export function prefetchHeaders(profile: StompPeerProfile, prefetch: number): StompHeaders {
  const headers: StompHeaders = {};
  for (const name of profile.prefetchHeaders) headers[name] = String(prefetch);
  return headers;
}

/** The profile as log fields (once per connection). */
export function profileFields(profile: StompPeerProfile): Record<string, unknown> {
  return {
    peerKind: profile.kind,
    stableMessageId: profile.stableMessageId,
    prefetchHeader: profile.prefetchHeaders.join(','),
    bodyTyping: profile.bodyTyping,
    nack: profile.nack,
    selectors: profile.selectors,
    exclusive: profile.exclusiveHeader !== undefined,
    sharedConnection: profile.sharedConnection,
  };
}
