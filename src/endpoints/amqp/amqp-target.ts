/**
 * AMQP 0-9-1 target: publishes on a confirm channel with `mandatory: true` and resolves each send on its publisher
 * confirm.
 *
 * Outcomes of one send:
 * - confirm (basic.ack) and no basic.return → resolved: the broker routed and took responsibility for it;
 * - basic.return → MessageRejectedError('unroutable'). RabbitMQ sends the return *before* a successful confirm, and
 *   a return carries no publish sequence number, so a return is matched to the earliest unconfirmed publish with the
 *   same exchange, routing key, body and properties (identical messages are interchangeable). A return that matches
 *   nothing is a protocol surprise: the connection is treated as broken (outcome unknown), never guessed;
 * - basic.nack → MessageRejectedError('target-full'): RabbitMQ nacks what a full queue (reject-publish) or an
 *   unavailable queue refuses; the session waits for room and sends it again;
 * - the broker closes the channel (404 missing exchange, 403 access refused, 406 precondition failed) →
 *   every unconfirmed send on that channel rejects with MessageRejectedError('not-found' | 'access-refused' |
 *   'precondition-failed'); a new channel is opened on the same connection for later sends (a channel error is not a
 *   lost connection);
 * - the connection is lost, or no confirm comes within `confirmTimeout` → TransientError({ outcomeUnknown: true })
 *   for every unconfirmed send, and onLost fires once. While the broker has the connection blocked
 *   (`connection.blocked`, a resource alarm) the confirm timer is paused: a blocked broker is not a broken one.
 *
 * Sends keep their call order on the wire: a send that cannot be written now (channel write buffer full, channel
 * being reopened) waits in a FIFO, and later sends queue behind it.
 */
import type { Channel, ConfirmChannel, Message, MessageProperties as AmqpProperties, Options } from 'amqplib';
import type { AmqpConnectionConfig } from '../../config/protocols/amqp-schema.js';
import { MessageRejectedError, TransientError } from '../../shared/errors.js';
import type { BridgeMessage } from '../../core/message.js';
import type { TargetEndpoint, TargetHandlers } from '../../core/ports.js';
import { CONFIRMED, failedMember, type BatchMemberResult } from '../../core/batch-result.js';
import { TARGET_FULL } from '../../core/session/refusal-policy.js';
import type { Logger } from '../../shared/log.js';
import { isTypedValue, toAmqp, type AmqpPublish } from '../../mapping/amqp-mapping.js';
import { describeTarget, resolveTarget, targetAddress, type AmqpTargetSpec } from '../../config/protocols/amqp-address.js';
import { publishConfirmed } from './publish-confirmed.js';
import { ConfirmDeadline } from '../confirm-timeout.js';
import { AmqpEndpoint } from './amqp-endpoint.js';
import { ACCESS_REFUSED, NOT_FOUND, PRECONDITION_FAILED, replyCode, replyText } from './connect.js';
import type { AmqpConnector, AmqpLease } from './shared-connection.js';

interface Outcome {
  resolve: () => void;
  reject: (err: Error) => void;
}

interface Waiting extends Outcome {
  publish: AmqpPublish;
  /** The target's routing key, or the message's own (a templated target: TargetEndpoint.send's route). */
  routingKey: string;
}

interface Pending extends Outcome {
  publish: AmqpPublish;
  routingKey: string;
  publishedAt: number;
  returned?: { replyCode: number; replyText: string };
}

/** One confirm channel and the publishes still waiting for its confirms, in publish order. */
interface PublishChannel {
  ch: ConfirmChannel;
  pending: Map<number, Pending>;
  closed: boolean;
  error?: Error;
}

/** Reply codes of a channel close that concern the published messages, not the connection. */
const CHANNEL_REJECTIONS: Record<number, string> = {
  [NOT_FOUND]: 'not-found',
  [ACCESS_REFUSED]: 'access-refused',
  [PRECONDITION_FAILED]: 'precondition-failed',
};

export class AmqpTarget extends AmqpEndpoint<TargetHandlers> implements TargetEndpoint {
  protected readonly setUpWhat = 'open a confirm channel';
  protected readonly lossMessage = 'target lost';

  private readonly exchange: string;
  private readonly routingKey: string;
  private channel?: PublishChannel;
  private reopening = false;
  private draining = false;
  private blocked = false;
  private readonly waiting: Waiting[] = [];
  private seq = 0;
  /** No publisher confirm within confirmTimeout: the connection is treated as broken (../confirm-timeout.ts). */
  private readonly deadline: ConfirmDeadline;

  constructor(
    conn: AmqpConnectionConfig,
    target: AmqpTargetSpec,
    private readonly confirmTimeout: number,
    log: Logger,
    /** The process's publishing connection for this bridge (../connections.ts); default: one of its own. */
    connector?: AmqpConnector,
  ) {
    const { exchange, routingKey } = resolveTarget(target);
    super(conn, describeTarget(conn, target), targetAddress(conn, target), 'publish', log, connector);
    this.exchange = exchange;
    this.routingKey = routingKey;
    this.deadline = new ConfirmDeadline(confirmTimeout, () => this.oldestPublishedAt(), () => this.confirmOverdue());
  }

  /** A short line for logs: where this target publishes and how its session is doing. */
  describe(): string {
    const unconfirmed = this.channel?.pending.size ?? 0;
    return `${this.description} [${this.state}${this.blocked ? ', blocked' : ''}; ${unconfirmed} unconfirmed, ${this.waiting.length} waiting]`;
  }

  protected async setUp(lease: AmqpLease): Promise<void> {
    // A connection the broker blocked before this session took it stays blocked until it says otherwise.
    if (lease.blocked) this.onBlocked(true, 'blocked already when the session opened');
    this.channel = await this.openChannel();
  }

  /** `connection.blocked` on the shared publishing connection (./shared-connection.ts logs it once for all its bridges). */
  protected override onBlocked(blocked: boolean, reason?: string): void {
    if (this.blocked === blocked) return;
    this.blocked = blocked;
    if (!blocked) {
      // The confirm timer restarts: nothing could be confirmed while the broker was not reading.
      const now = performance.now();
      for (const p of this.channel?.pending.values() ?? []) p.publishedAt = now;
    }
    this.handlers?.onBlocked?.(blocked, reason);
  }

  protected channels(): (Channel | undefined)[] {
    return [this.channel?.ch];
  }

  protected opened(): void {
    this.deadline.start();
    this.log.info('target open');
  }

  send(message: BridgeMessage, route?: string): Promise<void> {
    if (this.state !== 'open') {
      // Not written at all, so the outcome is known (not sent), whatever the session's loss left unknown.
      const reason = this.lostReason ? `${this.lostReason.message} (the message was not sent)` : `${this.description} is not connected`;
      return Promise.reject(new TransientError(reason, { cause: this.lostReason }));
    }
    let publish: AmqpPublish;
    try {
      publish = toAmqp(message, { connectionUser: this.session?.user });
    } catch (err) {
      return Promise.reject(unencodable(err));
    }
    return new Promise<void>((resolve, reject) => {
      const w: Waiting = { publish, routingKey: route ?? this.routingKey, resolve, reject };
      if (this.writable() && this.waiting.length === 0) this.write(w);
      else this.waiting.push(w);
    });
  }

  /**
   * Publishes every message, as `send` would one by one, and resolves with each one's own outcome once all are
   * settled. Not a transaction: AMQP confirms are per message, so a batch may end with some members confirmed and
   * others refused, lost or never written (../../core/batch-result.ts).
   */
  async sendBatch(messages: BridgeMessage[], routes?: readonly (string | undefined)[]): Promise<BatchMemberResult[]> {
    const results = await Promise.allSettled(messages.map((m, i) => this.send(m, routes?.[i])));
    return results.map((r) => (r.status === 'fulfilled' ? CONFIRMED : failedMember(r.reason)));
  }

  protected settleOnClose(): void {
    this.deadline.stop();
    const err = new TransientError(`${this.description} was closed before the broker confirmed the message`, {
      outcomeUnknown: true,
    });
    if (this.channel) this.failPending(this.channel, () => err);
    this.failWaiting(new TransientError(`${this.description} was closed before the message was sent`));
  }

  protected settleOnLoss(err: TransientError): void {
    this.deadline.stop();
    if (this.channel) this.failPending(this.channel, () => err);
    this.failWaiting(new TransientError(`${err.message} (the message was not sent)`, { cause: err }));
  }

  private async openChannel(): Promise<PublishChannel> {
    const ch = await this.lease!.createConfirmChannel();
    const chan: PublishChannel = { ch, pending: new Map(), closed: false };
    ch.on('error', (err: Error) => {
      chan.error = err;
    });
    // Prepended, so that this runs before amqplib fails the confirm callbacks with a bare 'channel closed'.
    ch.prependListener('close', () => {
      chan.closed = true;
      this.onChannelClose(chan);
    });
    ch.on('return', (m: Message) => this.onReturn(chan, m));
    ch.on('drain', () => {
      if (this.channel !== chan) return;
      this.draining = false;
      this.flush();
    });
    return chan;
  }

  private writable(): boolean {
    return this.state === 'open' && !this.reopening && !this.draining && this.channel !== undefined && !this.channel.closed;
  }

  /** Writes one publish on the current channel. */
  private write(w: Waiting): void {
    const chan = this.channel!;
    const { content, options } = w.publish;
    this.seq += 1;
    const seq = this.seq;
    let ok: boolean;
    try {
      ok = publishConfirmed(chan.ch, this.exchange, w.routingKey, content, options, (err: unknown) => this.onConfirm(chan, seq, err));
    } catch (err) {
      // amqplib encodes before writing anything, so a throw means nothing reached the wire.
      if (chan.closed || (err as Error)?.name === 'IllegalOperationError') {
        w.reject(new TransientError(`${this.description}: the channel closed before the message was sent`, { cause: err }));
      } else {
        w.reject(unencodable(err));
      }
      return;
    }
    chan.pending.set(seq, { publish: w.publish, routingKey: w.routingKey, resolve: w.resolve, reject: w.reject, publishedAt: performance.now() });
    if (!ok) this.draining = true;
  }

  private flush(): void {
    while (this.waiting.length > 0 && this.writable()) this.write(this.waiting.shift()!);
  }

  private onConfirm(chan: PublishChannel, seq: number, err: unknown): void {
    const p = chan.pending.get(seq);
    if (p === undefined) return;
    // A channel that closed settles its own pending sends (onChannelClose), with the reason it knows.
    if (err && chan.closed) return;
    chan.pending.delete(seq);
    if (err) {
      // RabbitMQ nacks a publish that a full queue refuses (x-overflow reject-publish) or that a queue could not take
      // (its process unavailable): "not now", not "never" (../../core/session/refusal-policy.ts).
      p.reject(new MessageRejectedError(TARGET_FULL, `${this.description}: the broker refused the message for now (basic.nack: a queue it routes to is full or unavailable)`));
    } else if (p.returned) {
      const { replyCode: code, replyText: text } = p.returned;
      p.reject(
        new MessageRejectedError(
          'unroutable',
          `${this.description}: the broker returned the message as unroutable (${code} ${text}): exchange '${this.exchange}' has no queue bound for routing key '${p.routingKey}'`,
        ),
      );
    } else {
      p.resolve();
    }
  }

  private onReturn(chan: PublishChannel, m: Message): void {
    const { exchange, routingKey, replyCode: code, replyText: text } = m.fields as Message['fields'] & {
      replyCode?: number;
      replyText?: string;
    };
    const sameRoute: Pending[] = [];
    for (const p of chan.pending.values()) {
      if (p.returned === undefined && exchange === this.exchange && routingKey === p.routingKey && m.content.equals(p.publish.content)) {
        sameRoute.push(p);
      }
    }
    let match: Pending | undefined;
    if (sameRoute.length === 1) {
      match = sameRoute[0];
    } else if (sameRoute.length > 1) {
      const returned = fingerprintReturned(m.properties);
      match = sameRoute.find((p) => fingerprintPublished(p.publish.options) === returned);
    }
    if (match === undefined) {
      // Guessing could mark a routed message as returned and, worse, confirm the returned one as delivered.
      this.log.error({ exchange, routingKey, candidates: sameRoute.length }, 'a returned message matches no unconfirmed publish');
      this.lost(
        new TransientError(`${this.description}: the broker returned a message that matches no unconfirmed publish`, {
          outcomeUnknown: true,
        }),
      );
      return;
    }
    match.returned = { replyCode: code ?? 312, replyText: text ?? 'NO_ROUTE' };
  }

  private onChannelClose(chan: PublishChannel): void {
    if (this.channel !== chan || this.state !== 'open') {
      // Our own close() or a loss already settled the sends; anything left is failed with the session's reason.
      const err = this.lostReason ?? new TransientError(`${this.description} was closed`, { outcomeUnknown: true });
      this.failPending(chan, () => err);
      return;
    }
    const code = replyCode(chan.error);
    const reason = code === undefined ? undefined : CHANNEL_REJECTIONS[code];
    if (chan.error && reason !== undefined) {
      const text = replyText(chan.error);
      this.log.warn({ code, unconfirmed: chan.pending.size }, `the broker closed the channel: ${text}; reopening it`);
      // The broker does not say which publish closed the channel. With one send in flight it is that one; with more,
      // the others may be innocent (and those before the culprit may even be routed): say so, and let the session
      // isolate the culprit.
      const ambiguous = chan.pending.size > 1;
      this.failPending(chan, () => new MessageRejectedError(reason, `${this.description}: ${text}`, { cause: chan.error, ambiguous }));
      void this.reopen();
      return;
    }
    this.channelClosed(chan.error);
  }

  private async reopen(): Promise<void> {
    this.reopening = true;
    this.draining = false;
    try {
      const chan = await this.openChannel();
      if (this.state !== 'open') {
        await chan.ch.close().catch(() => undefined);
        return;
      }
      this.channel = chan;
      this.reopening = false;
      this.flush();
    } catch (err) {
      this.lost(new TransientError(`${this.description}: could not reopen a channel on ${this.where}: ${replyText(err)}`, { cause: err }));
    }
  }

  /** When the oldest publish still waiting for its confirm went out; none counts while the broker blocks the connection. */
  private oldestPublishedAt(): number | undefined {
    if (this.state !== 'open' || this.blocked || this.channel === undefined) return undefined;
    const oldest = this.channel.pending.values().next();
    return oldest.done === true ? undefined : oldest.value.publishedAt;
  }

  private confirmOverdue(): void {
    this.lost(
      new TransientError(`${this.description}: no publisher confirm within ${this.confirmTimeout} ms; the connection to ${this.where} is treated as broken`, {
        outcomeUnknown: true,
      }),
    );
  }

  private failPending(chan: PublishChannel, error: () => Error): void {
    const pending = [...chan.pending.values()];
    chan.pending.clear();
    for (const p of pending) p.reject(error());
  }

  private failWaiting(err: TransientError): void {
    const waiting = this.waiting.splice(0);
    for (const w of waiting) w.reject(err);
  }
}

function unencodable(err: unknown): MessageRejectedError {
  const text = err instanceof Error ? err.message : String(err);
  return new MessageRejectedError('unencodable', `the message cannot be encoded as AMQP: ${text}`, { cause: err });
}

/*
 * Fingerprints for matching a basic.return to its publish. The published side is what toAmqp produced (amqplib's
 * input form), the returned side what amqplib decoded: both are reduced to the values that survive the wire
 * (numbers by value, typed values by their value, Dates as AMQP seconds). RabbitMQ strips `BCC`, so it is ignored.
 */
function fingerprintPublished(o: Options.Publish): string {
  return fingerprint({
    contentType: o.contentType,
    contentEncoding: o.contentEncoding,
    correlationId: o.correlationId,
    replyTo: o.replyTo,
    messageId: o.messageId,
    type: o.type,
    appId: o.appId,
    userId: o.userId,
    priority: o.priority,
    expiration: o.expiration === undefined ? undefined : String(o.expiration),
    timestamp: o.timestamp,
    persistent: o.persistent === true,
    headers: withoutBcc(o.headers),
  });
}

function fingerprintReturned(properties: AmqpProperties): string {
  // amqplib types every property as `any`; read them as unknowns.
  const p = properties as unknown as Record<string, unknown>;
  return fingerprint({
    contentType: p.contentType,
    contentEncoding: p.contentEncoding,
    correlationId: p.correlationId,
    replyTo: p.replyTo,
    messageId: p.messageId,
    type: p.type,
    appId: p.appId,
    userId: p.userId,
    priority: p.priority,
    expiration: p.expiration,
    timestamp: p.timestamp,
    persistent: p.deliveryMode === 2,
    headers: withoutBcc(p.headers),
  });
}

function withoutBcc(headers: unknown): unknown {
  if (headers === null || typeof headers !== 'object') return {};
  const { BCC: _bcc, ...rest } = headers as Record<string, unknown>;
  return rest;
}

function fingerprint(v: unknown): string {
  if (v === null || v === undefined) return 'u';
  switch (typeof v) {
    case 'string':
      return JSON.stringify(v);
    case 'number':
      return `n${v}`;
    case 'bigint':
      return `n${Number(v)}`;
    case 'boolean':
      return v ? 't' : 'f';
    case 'object':
      break;
    default:
      return 'u';
  }
  if (Buffer.isBuffer(v)) return `x${v.toString('hex')}`;
  if (v instanceof Date) return `n${Math.floor(v.getTime() / 1000)}`;
  if (Array.isArray(v)) return `[${v.map(fingerprint).join(',')}]`;
  if (isTypedValue(v)) return fingerprint((v as { value: unknown }).value);
  const o = v as Record<string, unknown>;
  const keys = Object.keys(o)
    .filter((k) => o[k] !== undefined)
    .sort();
  return `{${keys.map((k) => `${JSON.stringify(k)}:${fingerprint(o[k])}`).join(',')}}`;
}
