/**
 * STOMP source: SUBSCRIBE with `ack: client-individual` and the peer's prefetch header (see ./stomp-peer.ts), one ACK
 * per delivery.
 *
 * It never NACKs for a transient error (docs/design.md §5): ActiveMQ moves a NACKed persistent message to ActiveMQ.DLQ
 * at once (and drops a non-persistent one). A message that must come back is simply left unacked; closing the
 * connection returns it, and the broker redelivers it with `redelivered:true`. The one NACK is for a MESSAGE over a
 * size limit of the connection (docs/design.md §10.3), read past without its body (./frame-skipper.ts): a persistent one
 * on ActiveMQ Classic is handed back (reject: NACK), so that ActiveMQ moves it whole to its DLQ; anything else over a
 * limit is dead-lettered by the session with the headers read and acked (docs/security.md, "which happens on each
 * peer"). On a peer whose `message-id` names the message (ActiveMQ Classic) that
 * `message-id` is the delivery's stableId. Elsewhere (RabbitMQ: a new `message-id` per delivery; unknown servers) the
 * delivery has no stableId and the session stamps it by fingerprint, claiming the stamp on a redelivery, exactly as for
 * an AMQP message without `message-id`.
 *
 * With a bridge filter, a peer that speaks JMS selectors on SUBSCRIBE (ActiveMQ Classic: checked) gets it as the
 * `selector` header, so that the messages it does not select stay in the queue; `brokerSelects` says so to the session,
 * which still evaluates the filter on what arrives (src/core/session/filter.ts). Other peers (RabbitMQ's STOMP plugin
 * has no selectors; Artemis is not checked) get no `selector`: every message comes, and the session's filter-miss applies.
 */
import type { StompConnectionConfig } from '../../config/protocols/stomp-schema.js';
import { ConfigError, TransientError, isProgrammerError } from '../../shared/errors.js';
import type { SourceDelivery, Unreadable } from '../../core/message.js';
import type { SourceEndpoint, SourceHandlers } from '../../core/ports.js';
import type { Logger } from '../../shared/log.js';
import { fromStomp } from '../../mapping/stomp-mapping.js';
import type { StompMessage } from './stomp-client.js';
import { StompEndpoint } from './stomp-endpoint.js';
import { prefetchHeaders } from './stomp-peer.js';
import { deliver } from '../endpoint-handlers.js';
import type { StompConnector } from './shared-session.js';

/** How long closing waits for the receipt of an UNSUBSCRIBE on a shared connection before letting go anyway. */
const UNSUBSCRIBE_TIMEOUT_MS = 2000;

export class StompSource extends StompEndpoint implements SourceEndpoint {
  private consuming = true;
  private seq = 0;
  /** The frame to ACK for each delivery not acked yet; removed on ack, so a second ack is a no-op. */
  private readonly unacked = new WeakMap<SourceDelivery, StompMessage>();
  private acksSinceBarrier = 0;
  private lastBarrier: Promise<void> = Promise.resolve();
  private dropped = 0;
  private selecting = false;
  private subscription?: string;

  constructor(
    conn: StompConnectionConfig,
    queue: string,
    private readonly prefetch: number,
    log: Logger,
    /** The bridge's filter (a JMS selector), sent on SUBSCRIBE where the peer applies it. */
    private readonly selector?: string,
    /** The only active consumer of the queue (source.exclusive), where the peer has such consumers. */
    private readonly exclusive = false,
    /** The process's consuming connection for this bridge (../connections.ts); default: one of its own. */
    connector?: StompConnector,
  ) {
    super(conn, queue, 'source', log, connector);
  }

  get brokerSelects(): boolean {
    return this.selecting;
  }

  async open(handlers: SourceHandlers): Promise<void> {
    const session = await this.connect((error) => handlers.onLost(error));
    const selects = this.selector !== undefined && this.profile.selectors;
    const exclusiveHeader = this.profile.exclusiveHeader;
    if (this.exclusive && exclusiveHeader === undefined) {
      // Given back, not destroyed: the connection may be shared with other bridges of the process.
      await this.abandon();
      throw new ConfigError(
        `${this.description}: source.exclusive is not supported on this peer (${this.profile.kind}): it has no exclusive consumers the bridge can use (RabbitMQ's STOMP plugin reads 'exclusive' as the queue's exclusivity). Use an AMQP source with exclusive: true, or a queue with x-single-active-consumer, or remove exclusive`,
      );
    }
    try {
      // A peer that never answers the SUBSCRIBE must not hold the bridge in `starting`: bounded like the handshake.
      this.subscription = await this.receiptWithin(
        session,
        session.subscribe(
          {
            destination: this.destination,
            ack: 'client-individual',
            ...prefetchHeaders(this.profile, this.prefetch),
            ...(selects ? { selector: this.selector } : {}),
            ...(this.exclusive && exclusiveHeader !== undefined ? { [exclusiveHeader]: 'true' } : {}),
          },
          (message) => this.onMessage(message, handlers),
        ),
        'SUBSCRIBE',
        this.conn.connectTimeout,
      );
    } catch (err) {
      await this.abandon();
      if (err instanceof TransientError || isProgrammerError(err)) throw err;
      // An ERROR frame answering SUBSCRIBE. Retried, not fatal: ActiveMQ also refuses subscriptions while it starts or
      // stops, and a bridge that stopped for good over that would need an operator. A lasting refusal (bad
      // destination, not authorised) shows as one log line per change of reason.
      throw new TransientError(`${this.description}: the broker refused the subscription: ${(err as Error).message}`, { cause: err });
    }
    this.selecting = selects;
    const filterField = this.selector === undefined ? {} : { filterAt: selects ? 'broker and bridge' : 'bridge' };
    this.log.info({ ...this.connectionFields(session), prefetch: this.prefetch, ...filterField }, `${this.description} consuming`);
  }

  ack(delivery: SourceDelivery): void {
    const frame = this.unacked.get(delivery);
    if (!frame || this.closed || !this.session) return;
    this.unacked.delete(delivery);
    this.session.ack(frame);
    this.acksSinceBarrier += 1;
  }

  /** NACK: only for a delivery marked unreadable.handBack (ActiveMQ moves it whole to ActiveMQ.DLQ). */
  reject(delivery: SourceDelivery): void {
    const frame = this.unacked.get(delivery);
    if (!frame || this.closed || !this.session) return;
    this.unacked.delete(delivery);
    this.session.nack(frame);
    this.acksSinceBarrier += 1;
  }

  ackBarrier(): Promise<void> {
    const session = this.session;
    if (!session || !session.isOpen) {
      return Promise.reject(new TransientError(`${this.description} is not connected; acks cannot be confirmed`));
    }
    if (this.acksSinceBarrier > 0) {
      this.acksSinceBarrier = 0;
      // Bounded like the SUBSCRIBE: a barrier that never comes back ends the connection (the acks behind it are then
      // not known to have arrived: those messages come back, as after any loss).
      this.lastBarrier = this.receiptWithin(session, session.sync(), 'acknowledgement barrier', this.conn.connectTimeout);
    }
    return this.lastBarrier;
  }

  stopConsuming(): Promise<void> {
    // No UNSUBSCRIBE: ActiveMQ then puts every unacked message of the subscription back on the queue for other
    // consumers at once, and accepts the later ACK of an in-flight one without effect, so it would be forwarded twice.
    // RabbitMQ's STOMP plugin keeps them unacked, but answers their later ACK with an ERROR ("Subscription not found")
    // and closes the connection. (Both checked with raw STOMP 1.2 frames: ActiveMQ 5.17, RabbitMQ 3.10.) So there is
    // no resumeConsuming, and the max-in-flight-bytes bound never stops a STOMP source: its prefetch bounds it.
    // Messages that arrive from now on are dropped unacked instead; the broker redelivers them after close.
    this.consuming = false;
    return Promise.resolve();
  }

  override async close(): Promise<void> {
    if (!this.closed && this.dropped > 0) this.log.debug({ dropped: this.dropped }, `${this.description}: ${this.dropped} message(s) left for redelivery`);
    await super.close();
  }

  /**
   * On a connection other bridges share, closing it is not how the unacked messages go back: UNSUBSCRIBE gives them
   * back (ActiveMQ puts them on the queue again at once). Nothing is acked for it after: the session is closed.
   */
  protected override async giveBack(): Promise<void> {
    const id = this.subscription;
    const session = this.session;
    if (id === undefined || session === undefined) return;
    this.subscription = undefined;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      session.unsubscribe(id),
      new Promise<void>((resolve) => {
        timer = setTimeout(resolve, UNSUBSCRIBE_TIMEOUT_MS);
      }),
    ]).finally(() => clearTimeout(timer));
  }

  private onMessage(message: StompMessage, handlers: SourceHandlers): void {
    if (this.closed) return;
    if (!this.consuming) {
      this.dropped += 1;
      return;
    }
    const h = message.headers;
    const stable = this.profile.stableMessageId;
    const delivery: SourceDelivery = {
      message: fromStomp(h, message.body, { brokerMessageIdStable: stable }),
      redelivered: h.redelivered === 'true',
      seq: ++this.seq,
    };
    if (stable && h['message-id'] !== undefined) delivery.stableId = h['message-id'];
    if (message.skipped !== undefined) delivery.unreadable = this.unreadable(message);
    this.unacked.set(delivery, message);
    deliver(handlers, delivery, this.log);
  }

  /**
   * A MESSAGE over a limit: handed back where the broker keeps it whole (ActiveMQ Classic, persistent: NACK moves it to
   * ActiveMQ.DLQ), else dead-lettered by the session with what was read. A non-persistent one ActiveMQ would drop on
   * NACK; RabbitMQ's STOMP plugin requeues a NACKed message (it would come back forever).
   */
  private unreadable(message: StompMessage): Unreadable {
    const skipped = message.skipped!;
    const handBack = this.profile.nack === 'dead-letter' && message.headers.persistent === 'true';
    return {
      reason: 'too-large',
      detail: `${this.description} (${this.session?.peer ?? '?'}) delivered a MESSAGE over ${skipped.limit}: ${skipped.detail}`,
      dropped: 'body',
      size: skipped.size,
      ...(handBack ? { handBack } : {}),
    };
  }
}
