/**
 * AMQP 0-9-1 source: consumes one existing queue with manual acknowledgement and a bounded prefetch.
 *
 * Thin by design (see src/core/ports.ts): one object per session, no reconnects. The queue is checked, never
 * declared: the bridge must not invent a queue with properties (durability, TTL, DLX…) its owner did not choose.
 * A missing queue is a TransientError, so the supervisor keeps retrying and logs it until someone creates it.
 */
import type { Channel, ConsumeMessage } from 'amqplib';
import type { AmqpConnectionConfig } from '../../config/types.js';
import { ConfigError, TransientError, type BridgeError } from '../../shared/errors.js';
import type { SourceDelivery } from '../../core/message.js';
import type { SourceEndpoint, SourceHandlers } from '../../core/ports.js';
import type { Logger } from '../../shared/log.js';
import { fromAmqp } from '../../mapping/amqp-mapping.js';
import { AckCoalescer, type OutstandingDelivery } from './ack-coalescer.js';
import { describeSource, sourceAddress } from '../../config/amqp-address.js';
import { ACCESS_REFUSED, NOT_FOUND, closeModel, connectAmqp, lostError, replyCode, replyText, reportLoss, type AmqpSession } from './connect.js';

type State = 'new' | 'opening' | 'open' | 'lost' | 'closed';

let instances = 0;

export class AmqpSource implements SourceEndpoint {
  readonly description: string;
  readonly address: string;
  /** The `connection_name` client property, unique per session (find it in `rabbitmqctl list_connections`). */
  readonly connectionName: string;

  private readonly log: Logger;
  private state: State = 'new';
  private session?: AmqpSession;
  private channel?: Channel;
  private channelOpen = false;
  private channelError?: Error;
  private consumerTag?: string;
  /** For depth(): passive declares on a channel apart from the consuming one. */
  private depthChannel?: Channel;
  private handlers?: SourceHandlers;
  private lostReason?: TransientError;
  private seq = 0;
  /** Unacked deliveries of this session. Acking a tag twice (or a foreign one) would make RabbitMQ close the channel. */
  private readonly unacked = new WeakMap<SourceDelivery, OutstandingDelivery<ConsumeMessage>>();
  private readonly acks = new AckCoalescer<ConsumeMessage>((m, multiple) => this.sendAck(m, multiple));

  constructor(
    private readonly conn: AmqpConnectionConfig,
    private readonly queue: string,
    private readonly prefetch: number,
    log: Logger,
  ) {
    this.description = describeSource(conn, queue);
    this.address = sourceAddress(conn, queue);
    instances += 1;
    this.connectionName = `broker-bridge ${conn.name} source ${queue} #${process.pid}.${instances}`;
    this.log = log.child({ endpoint: this.description });
  }

  async open(handlers: SourceHandlers): Promise<void> {
    if (this.state !== 'new') throw new Error(`${this.description}: open() called twice; build a new endpoint per session`);
    this.state = 'opening';
    this.handlers = handlers;
    const session = await connectAmqp(this.conn, { connectionName: this.connectionName, log: this.log });
    this.session = session;
    const { model, where } = session;
    model.on('error', (err: Error) => this.log.debug({ err }, 'AMQP connection error'));
    model.on('close', (err?: Error) => this.lost(lostError(where, err)));
    try {
      const ch = await model.createChannel();
      this.channel = ch;
      this.channelOpen = true;
      ch.on('error', (err: Error) => {
        this.channelError = err;
      });
      ch.on('close', () => this.onChannelClose());
      await ch.prefetch(this.prefetch);
      try {
        await ch.checkQueue(this.queue);
      } catch (err) {
        throw this.queueError(err, where);
      }
      const { consumerTag } = await ch.consume(this.queue, (m) => this.onMessage(m), { noAck: false });
      this.consumerTag = consumerTag;
      if (this.state !== 'opening') throw this.lostReason ?? new TransientError(`${this.description}: closed while opening`);
      this.state = 'open';
      this.log.info({ prefetch: this.prefetch }, 'consuming');
    } catch (err) {
      const state = this.state as State;
      if (state === 'opening' || state === 'lost') this.state = 'closed';
      await closeModel(model);
      throw toBridgeError(err, `${this.description}: could not start consuming on ${where}`);
    }
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
    if (!this.channelOpen || ch === undefined || (this.state !== 'open' && this.state !== 'opening')) {
      throw this.lostReason ?? new TransientError(`${this.description} is not connected`);
    }
    this.acks.flush();
    try {
      // The channel handles methods in order: the reply to this synchronous method proves the earlier acks arrived.
      await ch.checkQueue(this.queue);
    } catch (err) {
      throw this.lostReason ?? new TransientError(`${this.description}: the ack barrier failed: ${replyText(err)}`, { cause: err });
    }
  }

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

  async resumeConsuming(): Promise<void> {
    const ch = this.channel;
    if (this.consumerTag !== undefined) return;
    if (!this.channelOpen || ch === undefined || this.state !== 'open') {
      throw this.lostReason ?? new TransientError(`${this.description} is not connected`);
    }
    try {
      const { consumerTag } = await ch.consume(this.queue, (m) => this.onMessage(m), { noAck: false });
      this.consumerTag = consumerTag;
    } catch (err) {
      throw this.lostReason ?? new TransientError(`${this.description}: could not resume consuming: ${replyText(err)}`, { cause: err });
    }
  }

  async depth(): Promise<number> {
    const model = this.session?.model;
    if (model === undefined || this.state !== 'open') throw this.lostReason ?? new TransientError(`${this.description} is not connected`);
    // A channel of its own: a failed passive declare closes its channel, and that must never be the consuming one.
    if (this.depthChannel === undefined) {
      const ch = await model.createChannel();
      ch.on('error', () => undefined);
      ch.on('close', () => {
        if (this.depthChannel === ch) this.depthChannel = undefined;
      });
      this.depthChannel = ch;
    }
    try {
      return (await this.depthChannel.checkQueue(this.queue)).messageCount;
    } catch (err) {
      throw new TransientError(`${this.description}: the queue depth could not be read: ${replyText(err)}`, { cause: err });
    }
  }

  async close(): Promise<void> {
    if (this.state === 'closed') return;
    // Acks of messages settled in this same turn are still waiting for their nextTick flush (ack-coalescer.ts): write
    // them before the connection closes, or a drained message is redelivered (and dropped as a duplicate).
    if (this.channelOpen) this.acks.flush();
    this.state = 'closed';
    const model = this.session?.model;
    if (model) await closeModel(model);
  }

  private onMessage(m: ConsumeMessage | null): void {
    if (m === null) {
      // basic.cancel from the broker: the queue was deleted (or its node went away). No more deliveries will come.
      this.lost(new TransientError(`${this.description}: the broker cancelled the consumer (was the queue deleted?)`));
      return;
    }
    this.seq += 1;
    const delivery: SourceDelivery = {
      message: fromAmqp(m.content, m.properties),
      redelivered: m.fields.redelivered,
      seq: this.seq,
    };
    const messageId: unknown = m.properties.messageId;
    if (typeof messageId === 'string' && messageId !== '') delivery.stableId = messageId;
    this.unacked.set(delivery, this.acks.delivered(m));
    try {
      this.handlers?.onDelivery(delivery);
    } catch (err) {
      this.log.error({ err, seq: delivery.seq }, 'the delivery handler threw; the message stays unacked');
    }
  }

  private onChannelClose(): void {
    this.channelOpen = false;
    const where = this.session?.where ?? this.conn.name;
    if (this.channelError) {
      this.lost(lostError(where, this.channelError, 'the channel on'));
      return;
    }
    // A channel closing without an error of its own means the connection is going down; its 'close' event follows
    // in the same tick with the reason, so let it speak first.
    queueMicrotask(() => this.lost(new TransientError(`the channel on ${where} was closed`, { outcomeUnknown: true })));
  }

  private lost(err: TransientError): void {
    if (this.state !== 'open' && this.state !== 'opening') return;
    const wasOpen = this.state === 'open';
    this.state = 'lost';
    this.lostReason = err;
    if (!wasOpen) return;
    // The connection may still be up (a channel error, a cancelled consumer): closing it makes the broker requeue now.
    reportLoss(this.log, 'source lost; unacked messages go back to the queue', err, (e) => this.handlers?.onLost(e), this.session?.model);
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

function toBridgeError(err: unknown, context: string): BridgeError {
  if (err instanceof TransientError || err instanceof ConfigError) return err;
  if (err instanceof Error && (err instanceof TypeError || err instanceof RangeError)) throw err;
  return new TransientError(`${context}: ${replyText(err)}`, { cause: err });
}
