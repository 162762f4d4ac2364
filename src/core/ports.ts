/**
 * The contract between the core (session, supervisor) and the protocol adapters (src/endpoints/*).
 *
 * Adapters only connect, read, write and close. They never reconnect by themselves and never retry:
 * the supervisor owns reconnects with backoff, the session (./session.ts) owns retries and dead-lettering.
 * One endpoint object lives for one session: `open` once (a second call throws TypeError), `close` once. After a
 * loss, the supervisor builds new endpoint objects. A handler that throws is logged by the adapter and goes no further
 * (a delivery whose handler threw stays unacked).
 *
 * A session may be on a connection the endpoints of other bridges share (src/endpoints/connections.ts): `onLost` then
 * comes for a loss of the endpoint's own (its channel closed by the broker, its consumer cancelled, a confirm that never
 * came) and for a loss of the connection, which every endpoint on it hears; `close` ends the endpoint's part only.
 */
import type { BridgeMessage, SourceDelivery } from './message.js';
import type { TransientError } from '../shared/errors.js';
import type { BatchMemberResult } from './batch-result.js';

export type { BatchMemberResult } from './batch-result.js';

export interface SourceHandlers {
  /** Called for every delivered message, in broker order. The session must call `ack` for it exactly once, or never. */
  onDelivery(delivery: SourceDelivery): void;
  /** Called at most once, when the connection or channel is lost after `open` resolved. Unacked messages go back to the broker. */
  onLost(error: TransientError): void;
  /**
   * Optional: the source dropped `count` messages on purpose before handing them on, for `reason` (MQTT: QoS 0 messages
   * over its intake bound, `qos0-overflow`); the session counts them in bridge_messages_dropped_total{reason}. Only for
   * messages the protocol lets a receiver drop (nothing acked is ever dropped).
   */
  onDropped?(reason: DropReason, count: number): void;
}

/** Why a message was dropped on purpose (bridge_messages_dropped_total{reason}): the one list of deliberate drops. `loop`:
 * counted by the session, never by a source (src/core/session/loop-guard.ts). */
export type DropReason = 'qos0-overflow' | 'loop';

export interface SourceEndpoint {
  /** For logs, without credentials: e.g. `amqp rabbit queue 'orders'`. */
  readonly description: string;
  /**
   * A stable name of the source queue (broker + queue), used to key stamp records
   * (see src/core/duplicate-id.ts). Two bridges reading the same queue must produce the same address.
   */
  readonly address: string;
  /**
   * Connects and starts consuming with manual acknowledgement and the configured prefetch.
   * Rejects with TransientError when the broker is unreachable, FatalBridgeError / ConfigError when it never can work
   * (e.g. the queue does not exist and cannot be declared).
   */
  open(handlers: SourceHandlers): Promise<void>;
  /** Acknowledges one delivery. Never throws: an ack on a lost connection is a no-op (the broker redelivers). */
  ack(delivery: SourceDelivery): void;
  /**
   * Optional: settles one delivery by handing it to the broker's own dead-letter path instead of acking it (ActiveMQ
   * STOMP: NACK, which moves a persistent message whole to ActiveMQ.DLQ). Called by the session, once, only for a delivery
   * the source marked `unreadable.handBack`. Never throws, like ack.
   */
  reject?(delivery: SourceDelivery): void;
  /**
   * Resolves once every ack issued so far has been processed by the broker (AMQP: a synchronous method on the same
   * channel after the acks; STOMP: a receipt on the last ACK; MQTT: a PINGRESP after the last PUBACK, which with
   * `acksInOrder` waits until the acks held back are written). Rejects with TransientError if the connection is lost.
   */
  ackBarrier(): Promise<void>;
  /**
   * Stops new deliveries (used when draining on shutdown, by pause, and by the max-in-flight-bytes bound). In-flight
   * deliveries can still be acked, and stay with this consumer (not handed to another one) until acked or closed.
   * Deliveries already on their way may still arrive after it resolved; the session takes them.
   */
  stopConsuming(): Promise<void>;
  /**
   * Optional: starts delivering again after `stopConsuming`, on the same connection (resume after a pause, and below
   * the max-in-flight-bytes bound). Rejects with TransientError when the connection is lost. Without it, the
   * supervisor resumes by starting a new session, and the session never stops the source for the byte bound (it is
   * bounded by its prefetch alone). STOMP has none: a stopped subscription keeps its prefetched messages unacked until
   * the connection closes, and UNSUBSCRIBE is no way back (see ../endpoints/stomp/stomp-source.ts).
   */
  resumeConsuming?(): Promise<void>;
  /**
   * Optional: caps the deliveries unacked at once on this source at `messages` (at most its prefetch), from now on,
   * for every consumer of the session (AMQP: basic.qos with global=true; the broker holds back further deliveries
   * until acks bring the count below it). The source opens with deliveryWindow(max-in-flight-bytes, prefetch) of
   * ./session/byte-bound.ts; the session asks for other windows as it sees the bodies' sizes. Rejects with
   * TransientError when the connection is lost.
   */
  setWindow?(messages: number): Promise<void>;
  /**
   * Optional: the number of messages ready in the source queue, as the broker tells it (AMQP: a passive declare on a
   * channel of its own, so that a failure never touches the consuming channel). Called by the supervisor every few
   * seconds; rejects when the broker cannot be asked. Absent where the protocol cannot tell (STOMP).
   */
  depth?(): Promise<number>;
  /**
   * Optional: true when an ack takes effect at the broker only once every earlier delivery of the session is acked
   * (MQTT: PUBACKs go in the order the PUBLISHes came, MQTT section 4.6). A delivery never acked then holds back the
   * acks after it, and after close those deliveries come back with it, redelivered: a message acked and forwarded may
   * thus come again, which the duplicate-ID cache drops (a stamp is claimed back). Absent or false: each ack stands
   * alone (AMQP, STOMP client-individual).
   */
  readonly acksInOrder?: boolean;
  /**
   * Optional: true when the broker applies the bridge's filter to what it delivers (an ActiveMQ Classic STOMP
   * subscription with a `selector`), so that messages it does not select stay in the queue; read after `open`
   * resolved. The session still evaluates the filter on every delivery; a miss from such a source means the broker and
   * the bridge disagree (logged). Absent or false: every message is delivered, and the session's filter-miss applies.
   */
  readonly brokerSelects?: boolean;
  /**
   * Optional: the name of the connection this endpoint's session is on (AMQP: its `connection_name`, as the broker lists
   * it), shared with the endpoints of other bridges on it; undefined before open() resolved. Read for GET /bridges.
   */
  readonly connectionName?: string;
  /**
   * Ends the session: whatever was not acked is redelivered by the broker. Its channel or subscription goes; the
   * connection goes too unless other bridges' endpoints are on it. Never throws.
   */
  close(): Promise<void>;
}

export interface TargetHandlers {
  /** Called at most once, when the connection is lost after `open` resolved. */
  onLost(error: TransientError): void;
  /** Flow control from the broker (AMQP `connection.blocked`): while blocked, the session sends nothing. */
  onBlocked?(blocked: boolean, reason?: string): void;
  /**
   * A target that deduplicates by ID itself (NATS JetStream: `Nats-Msg-Id` within the stream's duplicate window) says
   * that it already held the message of a send it confirmed: that send resolved (the message is there once), and the
   * copy was dropped at the target. Counted as `bridge_duplicates_dropped_total{where="target"}`. Absent where the
   * target cannot tell (AMQP, STOMP).
   */
  onDuplicate?(duplicateId: string): void;
}

export interface TargetEndpoint {
  readonly description: string;
  /**
   * The target address whose duplicate-ID cache this endpoint uses: broker (host, port, vhost) + destination,
   * without credentials. Two bridges forwarding to the same destination produce the same address.
   */
  readonly address: string;
  open(handlers: TargetHandlers): Promise<void>;
  /**
   * Sends one message and resolves when the broker confirmed it (AMQP publisher confirm with no basic.return;
   * STOMP RECEIPT). Rejects with MessageRejectedError when the broker refused this message (its outcome is known:
   * not delivered), or TransientError when the outcome is unknown or the connection was lost.
   * Calls may overlap: many sends are in flight at once, and the target keeps their order on the wire.
   * `route`: where this message goes instead of the target's fixed address, for a templated target (the resolved
   * routing key on the target's exchange, AMQP; the resolved destination, STOMP); undefined: the fixed address.
   */
  send(message: BridgeMessage, route?: string): Promise<void>;
  /**
   * Sends several messages at once and resolves, never rejects, with one result per message, in order, once every one
   * is settled (see BatchMemberResult). A batch is not all-or-nothing unless the target says so: AMQP confirms are
   * per message, so some members may be confirmed and others refused or lost; a STOMP transaction gives every
   * member the transaction's outcome (all confirmed, or none delivered). Optional: when absent, the session sends
   * one by one. `routes`: each member's `route`, as for send; members of one batch may go to different addresses.
   */
  sendBatch?(messages: BridgeMessage[], routes?: readonly (string | undefined)[]): Promise<BatchMemberResult[]>;
  /** Optional: as SourceEndpoint.connectionName. */
  readonly connectionName?: string;
  /** Ends the session (its channel; the connection too unless other bridges' endpoints are on it). Never throws. */
  close(): Promise<void>;
}
