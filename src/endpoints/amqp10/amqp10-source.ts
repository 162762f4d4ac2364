/**
 * AMQP 1.0 source: a receiver link on the node, settled by the bridge (no auto-accept) and fed with credit by hand.
 *
 * The window: the link's credit plus the deliveries not settled yet stay within the window (prefetch, or less:
 * setWindow), and credit is topped up as acks free room, a quarter of the window at a time. stopConsuming sets the
 * credit to 0 (never a drain: RabbitMQ's plugin answers a drain without saying when it is drained, checked against
 * 3.10.8); deliveries already on their way are still handed on.
 *
 * Settling: ack accepts (settles) the delivery. Nothing is accepted before the ack. close() releases what is unsettled
 * (it comes back at once, flagged) and ends the connection; a lost connection gives it back all the same. `modified`
 * is never sent: the plugin ends the session for it ("Unrecognised state").
 *
 * ackBarrier: a flow restating the credit, answered by the broker only after the dispositions before it
 * (./amqp10-credit.ts), bounded by confirm-timeout.
 *
 * Identity: the message-id the publisher set is the stableId. `redelivered`: the header's first-acquirer false, or a
 * delivery-count above 0 (the plugin sets only first-acquirer: false after a release or a lost session).
 */
import type { Delivery, EventContext, Receiver } from 'rhea';
import type { Amqp10ConnectionConfig } from '../../config/protocols/amqp10-schema.js';
import { amqp10NodeAddress } from '../../config/protocols/amqp10-address.js';
import { TransientError } from '../../shared/errors.js';
import type { SourceDelivery } from '../../core/message.js';
import type { SourceEndpoint, SourceHandlers } from '../../core/ports.js';
import type { Logger } from '../../shared/log.js';
import { fromAmqp10, idText } from '../../mapping/amqp10-mapping.js';
import { deliver } from '../endpoint-handlers.js';
import { Amqp10Endpoint } from './amqp10-endpoint.js';
import { conditionOf, describeError } from './amqp10-connect.js';
import { CreditFlow } from './amqp10-credit.js';
import { firstEvent } from './amqp10-events.js';
import { rheaGuardMissing } from './rhea-guard.js';

export class Amqp10Source extends Amqp10Endpoint implements SourceEndpoint {
  readonly acksInOrder = false;
  private receiver: Receiver | undefined;
  private flow: CreditFlow | undefined;
  private handlers: SourceHandlers | undefined;
  private consuming = false;
  private window: number;
  private seq = 0;
  /** The delivery to settle for each one not acked yet; removed on ack, so a second ack is a no-op. */
  private readonly unsettled = new Map<SourceDelivery, Delivery>();
  private acksSinceBarrier = 0;
  private lastBarrier: Promise<void> = Promise.resolve();

  constructor(
    conn: Amqp10ConnectionConfig,
    private readonly node: string,
    private readonly prefetch: number,
    private readonly confirmTimeout: number,
    private readonly duplicateIdHeader: string,
    log: Logger,
  ) {
    super(conn, `amqp10 ${conn.name} source address '${node}'`, amqp10NodeAddress(conn, node), 'source', log);
    this.window = Math.max(1, prefetch);
  }

  async open(handlers: SourceHandlers): Promise<void> {
    const unguarded = rheaGuardMissing();
    if (unguarded !== undefined) this.log.error(unguarded);
    const session = await this.connect((error) => handlers.onLost(error));
    const receiver = session.attach_receiver({ source: { address: this.node }, credit_window: 0, autoaccept: false });
    const attached = await firstEvent(
      [
        { emitter: receiver, events: ['receiver_open', 'receiver_error', 'receiver_close'] },
        { emitter: session, events: ['session_error', 'session_close'] },
      ],
      this.conn.connectTimeout,
    );
    if (attached.event !== 'receiver_open' || this.closed) {
      const err = receiver.error ?? session.error;
      this.abandon();
      if (conditionOf(err) === 'amqp:not-found') {
        throw new TransientError(`source node '${this.node}' does not exist on ${this.where} (${describeError(err)}); the bridge does not create it and will retry until it exists`, {
          cause: err,
        });
      }
      throw this.stepFailure(`attach a receiver to '${this.node}'`, attached.event === 'timeout' ? undefined : err);
    }
    this.receiver = receiver;
    const flow = new CreditFlow(receiver);
    this.flow = flow;
    receiver.on('message', (ctx: EventContext) => this.onMessage(ctx));
    receiver.on('receiver_flow', () => flow.answered());
    receiver.on('receiver_error', (ctx: EventContext) => this.lose(this.brokerEnded('link', ctx.receiver?.error)));
    receiver.on('receiver_close', (ctx: EventContext) => {
      if (!this.closed) this.lose(this.brokerEnded('link', ctx.receiver?.error));
    });
    this.handlers = handlers;
    this.consuming = true;
    this.markOpened();
    this.topUp(true);
    this.log.info({ peer: this.peer, prefetch: this.prefetch }, `${this.description} consuming`);
  }

  private onMessage(ctx: EventContext): void {
    const d = ctx.delivery;
    const m = ctx.message;
    if (this.closed || d === undefined) return;
    if (m === undefined) {
      this.onUndecodable(ctx, d);
      return;
    }
    const stableId = idText(m.message_id);
    const delivery: SourceDelivery = {
      message: fromAmqp10(m, { duplicateIdHeader: this.duplicateIdHeader, log: this.log }),
      redelivered: m.first_acquirer === false || (typeof m.delivery_count === 'number' && m.delivery_count > 0),
      seq: ++this.seq,
      ...(stableId !== undefined ? { stableId } : {}),
    };
    this.unsettled.set(delivery, d);
    deliver(this.handlers, delivery, this.log);
  }

  /**
   * A transfer rhea could not decode (patches/rhea+3.0.5.patch: its recursive decoder overflowed the stack on a message
   * nested a few thousand deep, which used to end the connection, and the broker redelivered it forever): handed on
   * as unreadable, its bytes as the body, to be dead-lettered alone and accepted.
   */
  private onUndecodable(ctx: EventContext, d: Delivery): void {
    const bad = (ctx as EventContext & { undecodable?: { error?: unknown; data?: unknown } }).undecodable;
    const data = Buffer.isBuffer(bad?.data) ? bad.data : Buffer.alloc(0);
    const why = bad?.error instanceof RangeError ? 'nested too deep to decode' : `not decodable (${describeError(bad?.error)})`;
    const delivery: SourceDelivery = {
      message: { body: data, properties: { persistent: true }, headers: {} },
      redelivered: false,
      seq: ++this.seq,
      unreadable: { reason: 'malformed-headers', detail: `an AMQP 1.0 message from ${this.where} is ${why}; its encoded sections are the body`, dropped: 'headers', size: data.length },
    };
    this.unsettled.set(delivery, d);
    deliver(this.handlers, delivery, this.log);
  }

  ack(delivery: SourceDelivery): void {
    const d = this.unsettled.get(delivery);
    if (d === undefined || this.closed) return;
    this.unsettled.delete(delivery);
    try {
      d.accept();
    } catch (err) {
      // The link went under us: the broker takes the message back, and the loss comes through the link's events.
      this.log.debug({ err, seq: delivery.seq }, 'accept failed; the message goes back to the broker');
      return;
    }
    this.acksSinceBarrier += 1;
    this.topUp(false);
  }

  /**
   * Gives credit so that credit + unsettled = window, when a quarter of the window (or, `eager`, any) is free: fewer,
   * larger flows than one per ack.
   */
  private topUp(eager: boolean): void {
    const flow = this.flow;
    if (flow === undefined || !this.consuming || this.closed) return;
    const want = this.window - this.unsettled.size - flow.credit;
    if (want <= 0 || (!eager && want < Math.max(1, Math.ceil(this.window / 4)))) return;
    this.quietly(flow.write(flow.credit + want));
  }

  /** A flow whose answer nobody waits for: its failure is the loss, reported through the connection's events. */
  private quietly(p: Promise<void>): void {
    p.catch(() => undefined);
  }

  ackBarrier(): Promise<void> {
    const flow = this.flow;
    if (flow === undefined || this.closed) return Promise.reject(new TransientError(`${this.description} is not connected; acks cannot be confirmed`));
    if (this.acksSinceBarrier > 0) {
      this.acksSinceBarrier = 0;
      this.lastBarrier = this.roundTrip(flow.write(), 'acks could not be confirmed');
    }
    return this.lastBarrier;
  }

  /** A flow's answer within confirm-timeout, or a TransientError (and the session lost: the broker did not answer). */
  private roundTrip(answered: Promise<void>, what: string): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        const error = new TransientError(`${this.description}: ${what}: no answer from ${this.where} within ${this.confirmTimeout} ms`);
        reject(error);
        this.lose(error);
      }, this.confirmTimeout);
      answered.then(
        () => {
          clearTimeout(timer);
          resolve();
        },
        (err: unknown) => {
          clearTimeout(timer);
          reject(err instanceof TransientError ? err : new TransientError(`${this.description}: ${what}: ${describeError(err)}`, { cause: err }));
        },
      );
    });
  }

  async stopConsuming(): Promise<void> {
    this.consuming = false;
    const flow = this.flow;
    if (flow === undefined || this.closed) return;
    // Resolves once the broker applied credit 0; a loss meanwhile is reported as a loss, not here.
    await this.roundTrip(flow.write(0), 'stopping the deliveries').catch(() => undefined);
  }

  resumeConsuming(): Promise<void> {
    if (this.closed || this.flow === undefined) return Promise.reject(new TransientError(`${this.description} is not connected`));
    this.consuming = true;
    this.topUp(true);
    return Promise.resolve();
  }

  setWindow(messages: number): Promise<void> {
    if (this.closed || this.flow === undefined) return Promise.reject(new TransientError(`${this.description} is not connected`));
    this.window = Math.max(1, Math.min(messages, this.prefetch));
    const flow = this.flow;
    const room = Math.max(0, this.window - this.unsettled.size);
    if (this.consuming && flow.credit > room) this.quietly(flow.write(room));
    else this.topUp(true);
    return Promise.resolve();
  }

  protected lost(error: TransientError): void {
    this.flow?.fail(error);
    // They go back to the broker with the session; acks of them are no-ops from now on.
    this.unsettled.clear();
  }

  protected closing(): Promise<void> {
    const flow = this.flow;
    this.consuming = false;
    if (flow !== undefined) this.quietly(flow.write(0));
    for (const d of this.unsettled.values()) {
      try {
        d.release();
      } catch (err) {
        // The link is gone: the broker takes them back with the session.
        this.log.debug({ err }, 'release failed; the message goes back with the connection');
        break;
      }
    }
    this.unsettled.clear();
    this.flow?.fail(new TransientError(`${this.description} was closed`));
    return Promise.resolve();
  }
}
