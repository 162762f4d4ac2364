/**
 * AMQP 0-9-1 source: consumes one existing queue with manual acknowledgement and a bounded prefetch.
 *
 * Thin by design (see src/core/ports.ts): one object per session, no reconnects. The queue is checked, never
 * declared: the bridge must not invent a queue with properties (durability, TTL, DLX…) its owner did not choose.
 * A missing queue is a TransientError, so the supervisor keeps retrying and logs it until someone creates it.
 *
 * `exclusive` (source.exclusive): basic.consume with exclusive set, so that this is the queue's only consumer; while
 * another process's consumer holds it, RabbitMQ refuses with ACCESS_REFUSED ("in exclusive use") and open() rejects
 * with StandbyError: the supervisor stands by and tries again. Such a source has no resumeConsuming: a cancel (pause,
 * the byte bound) would hand the queue to a standby, so a pause ends the session and a new one consumes again.
 */
import type { Channel, ConsumeMessage } from 'amqplib';
import type { AmqpConnectionConfig } from '../../config/protocols/amqp-schema.js';
import { ConfigError, StandbyError, TransientError, type BridgeError } from '../../shared/errors.js';
import type { SourceDelivery } from '../../core/message.js';
import type { SourceEndpoint, SourceHandlers } from '../../core/ports.js';
import type { Logger } from '../../shared/log.js';
import { fromAmqp } from '../../mapping/amqp-mapping.js';
import { AckCoalescer, type OutstandingDelivery } from './ack-coalescer.js';
import { describeSource, sourceAddress } from '../../config/protocols/amqp-address.js';
import { deliver } from '../endpoint-handlers.js';
import { AmqpEndpoint } from './amqp-endpoint.js';
import { ACCESS_REFUSED, NOT_FOUND, replyCode, replyText } from './connect.js';
import type { AmqpConnector, AmqpLease } from './shared-connection.js';
import { guardMissing, undecodableHeaders } from './header-table.js';

export class AmqpSource extends AmqpEndpoint<SourceHandlers> implements SourceEndpoint {
  protected readonly setUpWhat = 'start consuming';
  protected readonly lossMessage = 'source lost; unacked messages go back to the queue';

  private channel?: Channel;
  private channelOpen = false;
  private channelError?: Error;
  private consumerTag?: string;
  private seq = 0;
  /** Unacked deliveries of this session. Acking a tag twice (or a foreign one) would make RabbitMQ close the channel. */
  private readonly unacked = new WeakMap<SourceDelivery, OutstandingDelivery<ConsumeMessage>>();
  private readonly acks = new AckCoalescer<ConsumeMessage>((m, multiple) => this.sendAck(m, multiple));
  /** Consumes again after stopConsuming(); absent for an exclusive consumer (see above). */
  readonly resumeConsuming: (() => Promise<void>) | undefined;

  constructor(
    conn: AmqpConnectionConfig,
    private readonly queue: string,
    private readonly prefetch: number,
    log: Logger,
    /** The first delivery window (see setWindow): at most prefetch; prefetch = no window of its own. */
    private window = prefetch,
    /** The only consumer of the queue (source.exclusive). */
    private readonly exclusive = false,
    /** The process's consuming connection for this bridge (../connections.ts); default: one of its own. */
    connector?: AmqpConnector,
  ) {
    super(conn, describeSource(conn, queue), sourceAddress(conn, queue), 'consume', log, connector);
    this.resumeConsuming = exclusive ? undefined : () => this.consumeAgain();
  }

  protected async setUp(lease: AmqpLease): Promise<void> {
    const where = lease.session.where;
    const unguarded = guardMissing();
    if (unguarded !== undefined) this.log.error(unguarded);
    const ch = await lease.createChannel();
    this.channel = ch;
    this.channelOpen = true;
    ch.on('error', (err: Error) => {
      this.channelError = err;
    });
    ch.on('close', () => {
      this.channelOpen = false;
      this.channelClosed(this.channelError);
    });
    await ch.prefetch(this.prefetch);
    if (this.window < this.prefetch) await ch.prefetch(this.window, true);
    try {
      await ch.checkQueue(this.queue);
    } catch (err) {
      throw this.queueError(err, where);
    }
    try {
      const { consumerTag } = await ch.consume(this.queue, (m) => this.onMessage(m), { noAck: false, exclusive: this.exclusive });
      this.consumerTag = consumerTag;
    } catch (err) {
      if (this.exclusive && replyCode(err) === ACCESS_REFUSED && /exclusive use/i.test(replyText(err))) {
        throw new StandbyError(`source queue '${this.queue}' on ${where} is consumed exclusively by another process: standing by`, { cause: err });
      }
      throw err;
    }
  }

  protected opened(): void {
    this.log.info({ prefetch: this.prefetch, window: this.window }, 'consuming');
  }

  protected settleOnLoss(): void {
    // Nothing waits on a source: unacked messages go back to the queue with the connection.
  }

  protected channels(): (Channel | undefined)[] {
    return [this.channel];
  }

  protected settleOnClose(): void {
    // Acks of messages settled in this same turn are still waiting for their nextTick flush (ack-coalescer.ts): write
    // them before the connection closes, or a drained message is redelivered (and dropped as a duplicate).
    if (this.channelOpen) this.acks.flush();
  }

  ack(delivery: SourceDelivery): void {
    const entry = this.unacked.get(delivery);
    if (entry === undefined) return;
    this.unacked.delete(delivery);
    this.acks.settle(entry);
  }

  private sendAck(msg: ConsumeMessage, multiple: boolean): void {
    if (!this.channelOpen || this.channel === undefined) return;
    try {
      this.channel.ack(msg, multiple);
    } catch (err) {
      // The channel closed under us; the broker redelivers this message.
      this.log.debug({ err, deliveryTag: msg.fields.deliveryTag }, 'ack on a closed channel ignored');
    }
  }

  async ackBarrier(): Promise<void> {
    const ch = this.channel;
    if (!this.channelOpen || ch === undefined || (this.state !== 'open' && this.state !== 'opening')) throw this.notConnected();
    this.acks.flush();
    try {
      // The channel handles methods in order: the reply to this synchronous method proves the earlier acks arrived.
      await ch.checkQueue(this.queue);
    } catch (err) {
      throw this.lostReason ?? new TransientError(`${this.description}: the ack barrier failed: ${replyText(err)}`, { cause: err });
    }
  }

  /**
   * basic.cancel. RabbitMQ leaves the deliveries of the cancelled consumer unacked on this channel (they are not
   * requeued, and go to no other consumer) and takes their acks as before: delivery tags belong to the channel, not
   * the consumer. Deliveries it sent before cancel-ok still reach onMessage (amqplib drops the consumer at cancel-ok).
   */
  async stopConsuming(): Promise<void> {
    const tag = this.consumerTag;
    this.consumerTag = undefined;
    if (tag === undefined || !this.channelOpen || this.channel === undefined) return;
    try {
      await this.channel.cancel(tag);
    } catch (err) {
      this.log.debug({ err }, 'cancel failed (channel already closed)');
    }
  }

  private async consumeAgain(): Promise<void> {
    const ch = this.channel;
    if (this.consumerTag !== undefined) return;
    if (!this.channelOpen || ch === undefined || this.state !== 'open') throw this.notConnected();
    try {
      const { consumerTag } = await ch.consume(this.queue, (m) => this.onMessage(m), { noAck: false });
      this.consumerTag = consumerTag;
    } catch (err) {
      throw this.lostReason ?? new TransientError(`${this.description}: could not resume consuming: ${replyText(err)}`, { cause: err });
    }
  }

  /**
   * basic.qos with global=true: RabbitMQ counts it over all the channel's consumers, beside each consumer's prefetch
   * (global=false), and applies a new value at once, to deliveries already unacked too (checked against RabbitMQ
   * 3.10: lowered below the unacked count, nothing more comes until acks bring the count under it).
   */
  async setWindow(messages: number): Promise<void> {
    const ch = this.channel;
    // 'opening' too: the first deliveries (and so the first resize) can come before open() returned.
    if (!this.channelOpen || ch === undefined || (this.state !== 'open' && this.state !== 'opening')) throw this.notConnected();
    const window = Math.max(1, Math.min(this.prefetch, messages));
    try {
      await ch.prefetch(window, true);
      this.window = window;
    } catch (err) {
      throw this.lostReason ?? new TransientError(`${this.description}: could not set the delivery window: ${replyText(err)}`, { cause: err });
    }
  }

  async depth(): Promise<number> {
    const lease = this.lease;
    if (lease === undefined || this.state !== 'open') throw this.notConnected();
    // Not on the consuming channel: a failed passive declare closes its channel, and that must never be the consuming
    // one. The connection keeps one channel for these reads, for every source on it (a channel per source would double
    // the channels a bridge needs: src/config/connection-plan.ts).
    try {
      return await lease.queueDepth(this.queue);
    } catch (err) {
      throw new TransientError(`${this.description}: the queue depth could not be read: ${replyText(err)}`, { cause: err });
    }
  }

  private onMessage(m: ConsumeMessage | null): void {
    if (m === null) {
      // basic.cancel from the broker: the queue was deleted (or its node went away). No more deliveries will come.
      this.lost(new TransientError(`${this.description}: the broker cancelled the consumer (was the queue deleted?)`));
      return;
    }
    this.seq += 1;
    const delivery: SourceDelivery = {
      message: fromAmqp(m.content, m.properties, Date.now(), this.log),
      redelivered: m.fields.redelivered,
      seq: this.seq,
    };
    const messageId: unknown = m.properties.messageId;
    if (typeof messageId === 'string' && messageId !== '') delivery.stableId = messageId;
    // Headers amqplib could not decode (./header-table.ts): the body and the other properties came whole; the session
    // dead-letters them without the headers, and this connection, shared with other bridges, goes on.
    const bad = undecodableHeaders(m.properties.headers);
    if (bad !== undefined) {
      delivery.unreadable = {
        reason: 'malformed-headers',
        dropped: 'headers',
        detail: `the AMQP headers (${bad.size} bytes) from ${this.description} could not be decoded: ${bad.message}`,
      };
    }
    this.unacked.set(delivery, this.acks.delivered(m));
    deliver(this.handlers, delivery, this.log);
  }

  private queueError(err: unknown, where: string): BridgeError {
    const code = replyCode(err);
    if (code === NOT_FOUND) {
      return new TransientError(
        `source queue '${this.queue}' does not exist on ${where}; the bridge does not declare it and will retry until it exists`,
        { cause: err },
      );
    }
    if (code === ACCESS_REFUSED) {
      return new ConfigError(`the user of ${where} may not access source queue '${this.queue}': ${replyText(err)}`, { cause: err });
    }
    return new TransientError(`source queue '${this.queue}' on ${where} could not be checked: ${replyText(err)}`, { cause: err });
  }
}
