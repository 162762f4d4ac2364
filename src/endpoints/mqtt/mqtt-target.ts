/**
 * MQTT target: every message is a QoS 1 PUBLISH, and it counts as sent only on its PUBACK. Publishes are pipelined:
 * up to the broker's receive maximum are unacknowledged at once, in call order (./mqtt-session.ts). A clean session:
 * nothing of ours needs to outlive the connection (an unconfirmed publish is the bridge's to send again).
 *
 * What a PUBACK says (MQTT 5; a 3.1.1 PUBACK has no reason code and means "taken"):
 * - success, or "no matching subscribers" (0x10) with `no-subscribers: accept` or on a retained publish: confirmed;
 * - 0x10 with `no-subscribers: refuse` (the default): refused, reason `unroutable` — the broker dropped it, as RabbitMQ
 *   drops an unroutable publish the AMQP target refuses;
 * - quota exceeded (0x97): refused as full (the session waits for room and sends it again);
 * - any other error code (not authorized, topic name invalid, payload format invalid, …): refused, reason
 *   `mqtt-<code>`, dead-lettered after max-delivery-attempts.
 * A message larger than the connection's max-packet-size or the broker's maximum packet size (MQTT 5 CONNACK), or with
 * a header over 65,535 bytes (an MQTT string's limit), is refused before it is written (reason `too-large`): a broker
 * closes the connection on a packet over its limit, and 3.1.1 brokers cannot refuse one message any other way. There
 * are no transactions: a batch is its members sent together, each with its own outcome.
 */
import type { MqttConnectionConfig } from '../../config/protocols/mqtt-schema.js';
import { MessageRejectedError, TransientError } from '../../shared/errors.js';
import type { BridgeMessage } from '../../core/message.js';
import type { TargetEndpoint, TargetHandlers } from '../../core/ports.js';
import { CONFIRMED, failedMember, type BatchMemberResult } from '../../core/batch-result.js';
import { TARGET_FULL } from '../../core/session/refusal-policy.js';
import type { Logger } from '../../shared/log.js';
import { toMqtt } from '../../mapping/mqtt-mapping.js';
import { mqttTopicAddress } from '../../config/protocols/mqtt-address.js';
import { MqttEndpoint } from './mqtt-endpoint.js';
import { confirmWithin } from '../confirm-timeout.js';
import type { MqttSession } from './mqtt-session.js';
import type { OutgoingPublish, PublishAck } from './mqtt-publish.js';
import { PUBACK_NO_SUBSCRIBERS, PUBACK_QUOTA_EXCEEDED, reasonName } from './mqtt-reasons.js';

/** Where and how a target publishes, every default applied. */
export interface MqttTargetSettings {
  topic: string;
  clientId: string;
  retain: boolean;
  noSubscribers: 'refuse' | 'accept';
  /** The bridge's duplicate-ID header: a byte value of it goes as UTF-8 text. */
  duplicateIdHeader?: string;
}

export class MqttTarget extends MqttEndpoint implements TargetEndpoint {
  constructor(
    conn: MqttConnectionConfig,
    private readonly settings: MqttTargetSettings,
    private readonly confirmTimeout: number,
    log: Logger,
    role: 'target' | 'dead-letter' = 'target',
  ) {
    super(conn, settings.clientId, `mqtt ${conn.name} ${role} '${settings.topic}'`, mqttTopicAddress(conn, settings.topic), log);
  }

  async open(handlers: TargetHandlers): Promise<void> {
    const session = await this.connect({ clean: true }, (error) => handlers.onLost(error));
    if (this.settings.retain && !session.serverInfo.retainAvailable) {
      this.log.warn(`${this.description}: the broker says it does not support retained messages; publishes with retain: true will be refused`);
    }
    this.log.info(this.connectionFields(session), `${this.description} open`);
  }

  /** `route`: the resolved topic of a templated target (../../config/target-address.ts); else the target's own. */
  async send(message: BridgeMessage, route?: string): Promise<void> {
    const session = this.openSession();
    if (!session) throw this.notOpen();
    const publish = this.publishOf(session, message, route ?? this.settings.topic);
    const ack = await this.confirmed(session, session.publish(publish));
    this.check(ack, publish.topic);
  }

  /** Each member sent at once, in order, each with its own outcome (MQTT has no transactions). */
  async sendBatch(messages: BridgeMessage[], routes?: readonly (string | undefined)[]): Promise<BatchMemberResult[]> {
    const results = await Promise.allSettled(messages.map((m, i) => this.send(m, routes?.[i])));
    return results.map((r) => (r.status === 'fulfilled' ? CONFIRMED : failedMember(r.reason)));
  }

  private publishOf(session: MqttSession, message: BridgeMessage, topic: string): OutgoingPublish {
    const out = toMqtt(message, { version: session.version, log: this.log, ...(this.settings.duplicateIdHeader !== undefined ? { duplicateIdHeader: this.settings.duplicateIdHeader } : {}) });
    // Its size and strings are checked by the session when it encodes it (refused, reason too-large).
    return { topic, payload: out.payload, retain: this.settings.retain, ...(out.properties !== undefined ? { properties: out.properties } : {}) };
  }

  /** What the PUBACK says about this message (the module comment). */
  private check(ack: PublishAck, topic: string): void {
    const code = ack.reasonCode;
    if (code === 0) return;
    const detail = ack.reasonString !== undefined ? `: ${ack.reasonString}` : '';
    if (code === PUBACK_NO_SUBSCRIBERS) {
      if (this.settings.noSubscribers === 'accept' || this.settings.retain) return;
      throw new MessageRejectedError(
        'unroutable',
        `${this.description}: no subscription matches topic '${topic}' (PUBACK ${reasonName(code)}), so the broker dropped the message; set no-subscribers: accept on the target if that is acceptable`,
      );
    }
    if (code < 0x80) return;
    if (code === PUBACK_QUOTA_EXCEEDED) {
      throw new MessageRejectedError(TARGET_FULL, `${this.description}: the broker has no room for it now (PUBACK ${reasonName(code)}${detail})`);
    }
    throw new MessageRejectedError(`mqtt-${code.toString(16).padStart(2, '0')}`, `${this.description}: the broker refused the PUBLISH to '${topic}': ${reasonName(code)}${detail}`);
  }

  private openSession(): MqttSession | undefined {
    const s = this.session;
    return s && s.isOpen && !this.closed ? s : undefined;
  }

  private notOpen(): TransientError {
    return new TransientError(`${this.description} is not connected`);
  }

  /** Waits for a PUBACK, at most confirmTimeout; past it the connection is treated as broken. */
  private confirmed<T>(session: MqttSession, promise: Promise<T>): Promise<T> {
    const timedOut = (): void =>
      session.fail(new TransientError(`${this.description}: no PUBACK within ${this.confirmTimeout} ms; treating the connection as broken`, { outcomeUnknown: true }));
    return confirmWithin(promise, this.confirmTimeout, timedOut);
  }
}
