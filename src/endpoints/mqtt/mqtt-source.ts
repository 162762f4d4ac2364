/**
 * MQTT source: a persistent session (clean start off; on MQTT 5 a session expiry that outlasts a restart) subscribed
 * to one topic filter at QoS 1, so that QoS 1 messages published while the bridge is away wait at the broker. The
 * PUBACK of a message is written only once the session acked it (the target confirmed it, or it was a duplicate, or it
 * was dead-lettered), and in the order the PUBLISHes came (./puback-order.ts); the window in flight is the receive
 * maximum the source announces (its prefetch, MQTT 5) or the broker's own limit (3.1.1).
 *
 * Identity: MQTT has no message identity (a packet identifier names one delivery of one session), so a message
 * without the duplicate-ID user property — every message on 3.1.1 — has no stableId and is stamped by fingerprint,
 * exactly as a RabbitMQ STOMP message; a redelivery (a resumed session's unacked PUBLISH, sent again with DUP set) is
 * `redelivered` and claims its stamp back.
 *
 * Bounded intake (docs/design.md §10.2): a QoS 1 message waits at the broker beyond the receive maximum, but a QoS 0
 * message comes at QoS 0 on a QoS 1 subscription, whatever the window, as fast as the publishers send it. Once the
 * deliveries the session holds (QoS 0 and 1, not settled yet) reach `prefetch`, a QoS 0 message is dropped, counted
 * (SourceHandlers.onDropped, `qos0-overflow`) and logged at most once per DROP_LOG_INTERVAL_MS. Dropping, rather than
 * pausing the socket, keeps the connection read: PINGRESP (keep-alive, the ack barrier) and the QoS 1 messages behind
 * the flood still come, and QoS 0 is at most once by its publisher's choice — the broker would drop it too.
 *
 * Unreadable messages: a PUBLISH over a limit of the connection (./packet-reader.ts) is handed on with what was read
 * and `unreadable` set; the session dead-letters it and acks it, and its PUBACK goes in order like any other.
 *
 * Stopping: MQTT has no way to pause a subscription short of not acknowledging, so stopConsuming makes the source
 * drop what arrives from then on, unacknowledged (the broker sends it again on the next session), as the STOMP source
 * does; there is no resumeConsuming.
 *
 * Retained messages: the copy a broker sends when a subscription is made (retain flag set) is acknowledged and not
 * forwarded, unless `forward-retained: true`. On MQTT 5 the subscription asks for none (retain handling 2), or with
 * forward-retained only when the subscription is new (1); on 3.1.1 every SUBSCRIBE gets them, so with forward-retained
 * a resumed session does not subscribe again (its subscription is still there).
 */
import type { MqttConnectionConfig } from '../../config/protocols/mqtt-schema.js';
import { ConfigError, TransientError } from '../../shared/errors.js';
import type { SourceDelivery } from '../../core/message.js';
import type { SourceEndpoint, SourceHandlers } from '../../core/ports.js';
import type { Logger } from '../../shared/log.js';
import { fromMqtt } from '../../mapping/mqtt-mapping.js';
import { mqttSubscriptionAddress, subscriptionFilter } from '../../config/protocols/mqtt-address.js';
import { deliver } from '../endpoint-handlers.js';
import { MqttEndpoint } from './mqtt-endpoint.js';
import type { MqttSession } from './mqtt-session.js';
import { PubackOrder, type PubackEntry } from './puback-order.js';
import type { IPublishPacket } from 'mqtt-packet';
import type { Unreadable } from '../../core/message.js';

/** At most one log line per this interval about QoS 0 messages dropped over the intake bound. */
const DROP_LOG_INTERVAL_MS = 10_000;

/** What a source subscribes to and how, every default applied. */
export interface MqttSourceSettings {
  topic: string;
  clientId: string;
  sharedGroup?: string;
  forwardRetained: boolean;
  topicSeparator: '/' | '.';
  /** Announced as the receive maximum (MQTT 5): QoS 1 messages the broker may have unacknowledged towards us. */
  prefetch: number;
}

export class MqttSource extends MqttEndpoint implements SourceEndpoint {
  /** Acks take effect in delivery order (see ../../core/ports.ts). */
  readonly acksInOrder = true;
  private consuming = true;
  private seq = 0;
  /**
   * Deliveries handed to the session and not acked yet (QoS 0 and 1), by their seq, with the PUBACK entry of a QoS 1
   * one: the intake bound compares their number with prefetch. A Map of numbers rather than a WeakMap and a WeakSet
   * of deliveries: five ephemeron-table operations per message, and the collector's ephemeron work, for nothing (a
   * delivery's seq is unique in this source, which serves one session).
   */
  private readonly held = new Map<number, PubackEntry | undefined>();
  /** QoS 0 messages dropped over the bound since the last log line about them, and when that line was written. */
  private overflowUnlogged = 0;
  private overflowLoggedAt = 0;
  private order?: PubackOrder;
  private acksSinceBarrier = 0;
  private lastBarrier: Promise<void> = Promise.resolve();
  private dropped = 0;
  private retainedSkipped = 0;
  private handlers?: SourceHandlers;

  constructor(
    conn: MqttConnectionConfig,
    private readonly settings: MqttSourceSettings,
    log: Logger,
  ) {
    const filter = subscriptionFilter(settings.topic, settings.sharedGroup);
    super(conn, settings.clientId, `mqtt ${conn.name} source '${filter}'`, mqttSubscriptionAddress(conn, settings.topic, settings.clientId, settings.sharedGroup), log);
  }

  async open(handlers: SourceHandlers): Promise<void> {
    this.handlers = handlers;
    const { settings } = this;
    const session = await this.connect(
      {
        clean: false,
        sessionExpiry: Math.floor(this.conn.sessionExpiry / 1000),
        receiveMaximum: Math.min(65_535, Math.max(1, settings.prefetch)),
        onPublish: (packet, from, unreadable) => this.onPublish(packet, from, unreadable),
      },
      (error) => handlers.onLost(error),
    );
    this.order ??= new PubackOrder((ids) => session.pubacks(ids));
    const info = session.serverInfo;
    try {
      if (settings.sharedGroup !== undefined && !info.sharedSubscriptionAvailable) {
        throw new ConfigError(`${this.description}: the broker does not support shared subscriptions (shared-group '${settings.sharedGroup}')`);
      }
      const filter = subscriptionFilter(settings.topic, settings.sharedGroup);
      // 3.1.1 sends the retained messages again on every SUBSCRIBE: with forward-retained, a resumed session keeps the
      // subscription it has instead.
      const resubscribeSkipped = session.version === 4 && settings.forwardRetained && info.sessionPresent;
      if (!resubscribeSkipped) await session.subscribe(filter, 1, { retainHandling: settings.forwardRetained ? 1 : 2 });
    } catch (err) {
      session.destroy();
      throw err instanceof ConfigError || err instanceof TransientError ? err : new TransientError(`${this.description}: ${(err as Error).message}`, { cause: err });
    }
    this.log.info({ ...this.connectionFields(session), prefetch: settings.prefetch }, `${this.description} consuming`);
  }

  protected override lost(error: TransientError): void {
    this.order?.fail(error);
  }

  ack(delivery: SourceDelivery): void {
    const entry = this.held.get(delivery.seq);
    if (!this.held.delete(delivery.seq) || entry === undefined || this.closed || this.order === undefined) return;
    this.order.ack(entry);
    this.acksSinceBarrier += 1;
  }

  /**
   * Resolves once the PUBACKs of every delivery acked so far are written (an ack held back behind an earlier unacked
   * delivery waits for it) and the broker answered a PINGREQ written after them: a broker reads one connection's
   * packets in order, so it has them.
   */
  ackBarrier(): Promise<void> {
    const session = this.session;
    if (!session || !session.isOpen || this.order === undefined) {
      return Promise.reject(new TransientError(`${this.description} is not connected; acks cannot be confirmed`));
    }
    if (this.acksSinceBarrier > 0) {
      this.acksSinceBarrier = 0;
      this.lastBarrier = this.order.written().then(() => session.ping());
    }
    return this.lastBarrier;
  }

  stopConsuming(): Promise<void> {
    this.consuming = false;
    return Promise.resolve();
  }

  override async close(): Promise<void> {
    if (!this.closed && this.dropped > 0) this.log.debug({ dropped: this.dropped }, `${this.description}: ${this.dropped} message(s) left for redelivery`);
    // The PUBACKs due this tick go before the DISCONNECT: those messages are settled, the broker need not resend them.
    this.order?.flush();
    this.order?.fail(new TransientError(`${this.description} was closed`));
    await super.close();
  }

  /** Every PUBLISH, from CONNACK on (a resumed session's unacked ones come before open() returned). */
  private onPublish(packet: IPublishPacket, session: MqttSession, unreadable?: Unreadable): void {
    if (this.closed || this.handlers === undefined) return;
    this.order ??= new PubackOrder((ids) => session.pubacks(ids));
    if (!this.consuming) {
      this.dropped += 1;
      return;
    }
    if (packet.qos === 0 && this.held.size >= this.settings.prefetch) return this.overflow();
    const entry = packet.qos === 1 ? this.order.receive(packet.messageId ?? 0) : undefined;
    if (packet.retain && !this.settings.forwardRetained) {
      if (entry !== undefined) this.order.ack(entry);
      this.retainedSkipped += 1;
      if (this.retainedSkipped === 1) this.log.info({ topic: packet.topic }, `${this.description}: a retained message sent on subscribe was acknowledged and not forwarded (forward-retained is false); further ones are counted at debug level`);
      else this.log.debug({ topic: packet.topic, count: this.retainedSkipped }, `${this.description}: retained message not forwarded`);
      return;
    }
    const delivery: SourceDelivery = {
      message: fromMqtt(packet, { version: this.conn.protocolVersion, topicSeparator: this.settings.topicSeparator }),
      redelivered: packet.dup,
      seq: ++this.seq,
      ...(unreadable !== undefined ? { unreadable } : {}),
    };
    this.held.set(delivery.seq, entry);
    deliver(this.handlers, delivery, this.log);
  }

  /** A QoS 0 message over the intake bound: dropped, counted, and logged at most once per interval. */
  private overflow(): void {
    this.handlers?.onDropped?.('qos0-overflow', 1);
    this.overflowUnlogged += 1;
    const now = Date.now();
    if (now - this.overflowLoggedAt < DROP_LOG_INTERVAL_MS) return;
    this.log.warn(
      { dropped: this.overflowUnlogged, prefetch: this.settings.prefetch },
      `${this.description}: ${this.overflowUnlogged} QoS 0 message(s) dropped: the bridge holds prefetch (${this.settings.prefetch}) messages not yet settled (bridge_messages_dropped_total{reason="qos0-overflow"}; at most one such line per ${DROP_LOG_INTERVAL_MS / 1000} s)`,
    );
    this.overflowUnlogged = 0;
    this.overflowLoggedAt = now;
  }
}
