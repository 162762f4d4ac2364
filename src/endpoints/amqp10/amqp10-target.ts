/**
 * AMQP 1.0 target: a sender link on the node, sending unsettled and resolving each send on the broker's outcome.
 *
 * Outcomes of one send:
 * - accepted → resolved;
 * - rejected → MessageRejectedError with the broker's condition and description (the message's own refusal);
 * - released, modified → MessageRejectedError('target-full'): not delivered, not the message's fault; the session waits
 *   and sends it again (as a 0-9-1 basic.nack);
 * - the link, session or connection lost with the send unsettled, or no outcome within confirm-timeout →
 *   TransientError({ outcomeUnknown: true }), and onLost once.
 * RabbitMQ's plugin (3.10.8) never sends rejected or released to a publisher: it accepts what it routed, and a queue
 * that refuses a message (x-overflow reject-publish) makes it end the session without an outcome, which is the
 * confirm-timeout case above (test/integration/amqp10-endpoints.test.ts pins this).
 *
 * Nodes are probed before their first send (./amqp10-probe.ts): a missing fixed node refuses open() (the plugin would
 * accept and drop every message sent to it); a missing route of a templated target refuses that message ('not-found').
 * A templated target keeps one sender per route node, the most recently used 64.
 */
import rhea, { type Delivery, type EventContext, type Message, type Sender, type Session } from 'rhea';
import type { Amqp10ConnectionConfig } from '../../config/protocols/amqp10-schema.js';
import { amqp10NodeAddress } from '../../config/protocols/amqp10-address.js';
import { ConfigError, MessageRejectedError, TransientError } from '../../shared/errors.js';
import type { BridgeMessage } from '../../core/message.js';
import type { TargetEndpoint, TargetHandlers } from '../../core/ports.js';
import { CONFIRMED, failedMember, type BatchMemberResult } from '../../core/batch-result.js';
import type { Logger } from '../../shared/log.js';
import { toAmqp10 } from '../../mapping/amqp10-mapping.js';
import { ConfirmDeadline } from '../confirm-timeout.js';
import { Amqp10Endpoint } from './amqp10-endpoint.js';
import { describeError } from './amqp10-connect.js';
import { firstEvent } from './amqp10-events.js';
import { probeNode } from './amqp10-probe.js';
import { refusalOf } from './amqp10-outcomes.js';

/** A body this close to max-message-size has its whole encoding measured: properties and headers count too. */
const NEAR_LIMIT_BYTES = 64 * 1024;

/** Route senders kept open at once by a templated target; the least recently used goes first. */
const MAX_ROUTE_LINKS = 64;

interface Outcome {
  resolve: () => void;
  reject: (err: Error) => void;
}

interface Pending extends Outcome {
  node: string;
  sentAt: number;
}

interface Waiting extends Outcome {
  message: Message;
}

/** One sender link and the sends waiting for its credit, in call order. */
interface Link {
  node: string;
  sender?: Sender;
  /** Attaching (after the probe); the sends wait in `waiting` meanwhile. */
  ready: Promise<void>;
  waiting: Waiting[];
}

export class Amqp10Target extends Amqp10Endpoint implements TargetEndpoint {
  private mainSession: Session | undefined;
  private readonly links = new Map<string, Link>();
  /** Sends written and not settled by the broker, in send order. */
  private readonly pending = new Map<Delivery, Pending>();
  private readonly deadline: ConfirmDeadline;
  private readonly templated: boolean;

  constructor(
    conn: Amqp10ConnectionConfig,
    private readonly node: string,
    private readonly duplicateIdHeader: string,
    private readonly confirmTimeout: number,
    log: Logger,
  ) {
    super(conn, `amqp10 ${conn.name} target address '${node}'`, amqp10NodeAddress(conn, node), 'target', log);
    this.templated = node.includes('${');
    this.deadline = new ConfirmDeadline(confirmTimeout, () => this.oldestSentAt(), () => this.outcomeOverdue());
  }

  async open(handlers: TargetHandlers): Promise<void> {
    this.mainSession = await this.connect((error) => handlers.onLost(error));
    if (!this.templated) {
      const link = this.linkFor(this.node, 'open');
      try {
        await link.ready;
      } catch (err) {
        this.abandon();
        throw err;
      }
    }
    if (this.closed) {
      this.abandon();
      throw this.life.closedWhileOpening();
    }
    this.markOpened();
    this.deadline.start();
    this.log.info({ peer: this.peer }, `${this.description} open`);
  }

  send(message: BridgeMessage, route?: string): Promise<void> {
    if (this.closed || this.mainSession === undefined) return Promise.reject(new TransientError(`${this.description} is not connected`));
    let out: Message;
    try {
      out = toAmqp10(message, { duplicateIdHeader: this.duplicateIdHeader, log: this.log });
    } catch (err) {
      return Promise.reject(new MessageRejectedError('unencodable', `the message cannot be encoded as AMQP 1.0: ${describeError(err)}`, { cause: err }));
    }
    const link = this.linkFor(route ?? this.node, 'send');
    const tooLarge = this.oversize(out, message.body.length, link);
    if (tooLarge !== undefined) return Promise.reject(tooLarge);
    return new Promise<void>((resolve, reject) => {
      link.waiting.push({ message: out, resolve, reject });
      this.flush(link);
    });
  }

  /**
   * A message over max-message-size (or the link's own, when the broker announced one), refused before it is written:
   * RabbitMQ's plugin ends the session for it without an outcome, which would look like a lost connection, and the
   * message would be sent again forever. Encoded only when its body comes near the limit (encoding is rhea's to do, once).
   */
  private oversize(out: Message, bodyBytes: number, link: Link): MessageRejectedError | undefined {
    // rhea keeps the peer's attach frame on the link, untyped.
    const remote = (link.sender as unknown as { remote?: { attach?: { max_message_size?: unknown } } } | undefined)?.remote;
    const announced = Number(remote?.attach?.max_message_size ?? 0);
    const limit = announced > 0 ? Math.min(announced, this.conn.maxMessageSize) : this.conn.maxMessageSize;
    if (bodyBytes + NEAR_LIMIT_BYTES < limit) return undefined;
    const size = bodyBytes > limit ? bodyBytes : rhea.message.encode(out).length;
    if (size <= limit) return undefined;
    return new MessageRejectedError('too-large', `the message is ${size} bytes; at most ${limit} go to ${this.where} (max-message-size${announced > 0 ? ", or the broker's for this link" : ''})`);
  }

  /** Each member is its own transfer with its own outcome: accepted members stay whatever happens to the others. */
  sendBatch(messages: BridgeMessage[], routes?: readonly (string | undefined)[]): Promise<BatchMemberResult[]> {
    return Promise.all(
      messages.map((m, i) =>
        this.send(m, routes?.[i]).then(
          () => CONFIRMED,
          (err: unknown) => failedMember(err),
        ),
      ),
    );
  }

  /** The link to `node`, made (probed, then attached) on first use; the least recently used route link goes past the bound. */
  private linkFor(node: string, use: 'open' | 'send'): Link {
    const known = this.links.get(node);
    if (known !== undefined) {
      this.links.delete(node);
      this.links.set(node, known);
      return known;
    }
    const link: Link = { node, waiting: [], ready: Promise.resolve() };
    link.ready = this.attach(link, use);
    // A failed attach fails the sends waiting on it; the failure is not kept: the next send to the node probes again.
    link.ready.then(
      () => this.flush(link),
      (err: unknown) => {
        if (this.links.get(node) === link) this.links.delete(node);
        const error = err instanceof Error ? err : new TransientError(String(err));
        for (const w of link.waiting.splice(0)) w.reject(error);
      },
    );
    this.links.set(node, link);
    this.evict();
    return link;
  }

  private async attach(link: Link, use: 'open' | 'send'): Promise<void> {
    const session = this.mainSession;
    const connection = this.connection;
    if (session === undefined || connection === undefined) throw new TransientError(`${this.description} is not connected`);
    const probe = await probeNode(connection, link.node, this.conn.connectTimeout);
    if (probe.exists === 'unknown') throw new TransientError(`${this.description}: could not tell whether node '${link.node}' exists on ${this.where}: ${probe.reason}`);
    if (!probe.exists) {
      const why = `node '${link.node}' does not exist on ${this.where} (${probe.reason})`;
      if (use === 'open') {
        throw new ConfigError(`target ${why}: RabbitMQ would accept every message sent to it and drop it; create the queue (or address /queue/NAME, which declares it)`);
      }
      throw new MessageRejectedError('not-found', `${this.description}: ${why}; the bridge does not create it`);
    }
    if (this.closed) throw new TransientError(`${this.description} is not connected`);
    const sender = session.attach_sender({ target: { address: link.node }, autosettle: true });
    const attached = await firstEvent(
      [
        { emitter: sender, events: ['sender_open', 'sender_error', 'sender_close'] },
        { emitter: session, events: ['session_error', 'session_close'] },
      ],
      this.conn.connectTimeout,
    );
    if (attached.event !== 'sender_open' || this.closed) {
      throw this.stepFailure(`attach a sender to '${link.node}'`, attached.event === 'timeout' ? undefined : (sender.error ?? session.error));
    }
    link.sender = sender;
    sender.on('sendable', () => this.flush(link));
    sender.on('accepted', (ctx: EventContext) => this.settle(ctx, undefined));
    for (const outcome of ['rejected', 'released', 'modified'] as const) {
      sender.on(outcome, (ctx: EventContext) => this.settle(ctx, refusalOf(outcome, ctx.delivery?.remote_state, this.description, link.node)));
    }
    sender.on('sender_error', (ctx: EventContext) => this.lose(this.brokerEnded(`link to '${link.node}'`, ctx.sender?.error)));
    sender.on('sender_close', (ctx: EventContext) => {
      if (!this.closed) this.lose(this.brokerEnded(`link to '${link.node}'`, ctx.sender?.error));
    });
  }

  /** Writes the link's waiting sends while it has credit, in call order. */
  private flush(link: Link): void {
    const sender = link.sender;
    if (sender === undefined || this.closed) return;
    while (link.waiting.length > 0 && sender.sendable()) {
      const w = link.waiting.shift();
      if (w === undefined) break;
      let delivery: Delivery;
      try {
        delivery = sender.send(w.message);
      } catch (err) {
        // Refused by rhea before anything was written (a value it cannot encode).
        w.reject(new MessageRejectedError('unencodable', `the message cannot be encoded as AMQP 1.0: ${describeError(err)}`, { cause: err }));
        continue;
      }
      this.pending.set(delivery, { resolve: w.resolve, reject: w.reject, node: link.node, sentAt: performance.now() });
    }
  }

  private settle(ctx: EventContext, refusal: MessageRejectedError | undefined): void {
    const d = ctx.delivery;
    if (d === undefined) return;
    const p = this.pending.get(d);
    if (p === undefined) return;
    this.pending.delete(d);
    if (refusal === undefined) p.resolve();
    else p.reject(refusal);
  }

  /** Route links past the bound go, oldest first, once nothing of theirs waits for an outcome. */
  private evict(): void {
    if (this.links.size <= MAX_ROUTE_LINKS) return;
    for (const [node, link] of this.links) {
      if (this.links.size <= MAX_ROUTE_LINKS) return;
      if (node === this.node || link.waiting.length > 0 || link.sender === undefined) continue;
      const sender = link.sender;
      if ([...this.pending.values()].some((p) => p.node === node)) continue;
      this.links.delete(node);
      sender.removeAllListeners();
      sender.on('sender_error', () => undefined);
      sender.close();
    }
  }

  private oldestSentAt(): number | undefined {
    const oldest = this.pending.values().next();
    return oldest.done === true ? undefined : oldest.value.sentAt;
  }

  private outcomeOverdue(): void {
    const oldest = this.pending.values().next();
    if (oldest.done === true) return;
    this.lose(
      new TransientError(`${this.description}: no outcome within ${this.confirmTimeout} ms for a message to '${oldest.value.node}' on ${this.where}; its outcome is unknown`, {
        outcomeUnknown: true,
      }),
    );
  }

  protected lost(error: TransientError): void {
    this.failAll(error);
  }

  /** Sends written fail as outcome unknown; sends never written fail as not sent. */
  private failAll(cause: TransientError): void {
    this.deadline.stop();
    const unknown = cause.outcomeUnknown ? cause : new TransientError(cause.message, { cause, outcomeUnknown: true });
    const notSent = new TransientError(cause.message, { cause });
    const written = [...this.pending.values()];
    this.pending.clear();
    for (const p of written) p.reject(unknown);
    for (const link of this.links.values()) for (const w of link.waiting.splice(0)) w.reject(notSent);
  }

  protected closing(): Promise<void> {
    this.failAll(new TransientError(`${this.description} was closed before the broker's outcome`, { outcomeUnknown: true }));
    return Promise.resolve();
  }

  override async close(): Promise<void> {
    // A send still waiting when close() comes before open() resolved fails too.
    this.failAll(new TransientError(`${this.description} was closed before the broker's outcome`, { outcomeUnknown: true }));
    await super.close();
  }
}
