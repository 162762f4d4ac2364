/**
 * NATS JetStream target: a JetStream publish per message, confirmed by its PubAck.
 *
 * The duplicate ID goes in `Nats-Msg-Id` (and stays in the duplicate-ID header): the stream stores one message per ID
 * within its `duplicate_window`, and answers a second publish of the ID with a PubAck saying `duplicate: true`. Such a
 * send counts as confirmed (the stream holds the message) and is reported through TargetHandlers.onDuplicate. This is
 * what closes the crash gap (docs/delivery.md): a copy resent after a crash between this confirm and the cache commit
 * never reaches the stream twice, as long as it comes within the window.
 *
 * A JetStream publish is a core publish with a reply subject; the stream answers there. This target has one reply
 * subscription (`<inbox>.*`) for all its publishes and matches each answer by the token at the end of its subject,
 * with one timer for the confirm timeout, rather than nats.js's `js.publish` (a request object, a timer and two Error
 * objects per message: measured at 40% of the bridge's CPU on AMQP → JetStream, 2,816 → 5,291 msgs/s for the
 * Errors alone; see bench/nats-scenarios.ts).
 *
 * Outcomes of one send:
 * - PubAck → resolved (duplicate or not);
 * - no stream captures the subject (the server answers "no responders", status 503) → MessageRejectedError('no-stream'):
 *   the bridge never creates streams, as it never declares queues;
 * - the stream is full (maximum messages or bytes with discard new, no resources) → MessageRejectedError('target-full'):
 *   the session waits for room;
 * - larger than the stream's max_msg_size (or the server's max_payload) → MessageRejectedError('too-large');
 * - any other JetStream error for this message → MessageRejectedError('refused') with its description;
 * - no PubAck within confirm-timeout, or the connection lost → TransientError({ outcomeUnknown: true }), and the
 *   connection is reported lost (onLost, once) and closed: the next session starts on a fresh one.
 *
 * Sends keep their call order on the wire: each is written when it is called.
 *
 * `msgIdSuffix` (a replay's dead-letter target, ./nats-replay.ts): appended to `Nats-Msg-Id` only (the
 * duplicate-ID header keeps the ID). A dead letter refused again by a replay goes back to the stream it was read from,
 * under the ID it was dead-lettered with: within the stream's duplicate_window JetStream would answer `duplicate` and
 * not store it, and the replay would then delete the one copy left. The suffix (the pass's start) keeps it apart.
 */
import { createInbox, headers as natsHeaders, type Msg, type Subscription } from 'nats';
import type { NatsConnectionConfig } from '../../config/protocols/nats-schema.js';
import { natsSubjectAddress } from '../../config/protocols/nats-address.js';
import { MessageRejectedError, TransientError } from '../../shared/errors.js';
import type { BridgeMessage } from '../../core/message.js';
import type { TargetEndpoint, TargetHandlers } from '../../core/ports.js';
import { CONFIRMED, failedMember, type BatchMemberResult } from '../../core/batch-result.js';
import { TARGET_FULL } from '../../core/session/refusal-policy.js';
import { readDuplicateId } from '../../core/duplicate-id.js';
import type { Logger } from '../../shared/log.js';
import { NATS_MSG_ID, toNats } from '../../mapping/nats-mapping.js';
import { NatsEndpoint } from './nats-endpoint.js';
import { natsCode } from './nats-connect.js';
import { natsProfileFields } from './nats-peer.js';
import { ConfirmDeadline } from '../confirm-timeout.js';

/** JetStream API error codes: insufficient resources (full), store failed (full when it says a maximum), message too large. */
const INSUFFICIENT_RESOURCES = 10047;
const STORE_FAILED = 10077;
const MESSAGE_TOO_LARGE = 10054;

interface Pending {
  resolve: () => void;
  reject: (err: Error) => void;
  subject: string;
  id: string | undefined;
  sentAt: number;
}

interface PubAckReply {
  stream?: string;
  seq?: number;
  duplicate?: boolean;
  error?: { code?: number; err_code?: number; description?: string };
}

export class NatsTarget extends NatsEndpoint implements TargetEndpoint {
  private handlers: TargetHandlers | undefined;
  private inbox = '';
  private replies: Subscription | undefined;
  private token = 0;
  /** Publishes waiting for their PubAck, by token, in publish order (a Map iterates in insertion order). */
  private readonly pending = new Map<number, Pending>();
  /** No PubAck within confirmTimeout: the connection is treated as broken (../confirm-timeout.ts). */
  private readonly deadline: ConfirmDeadline;

  constructor(
    conn: NatsConnectionConfig,
    private readonly subject: string,
    private readonly duplicateIdHeader: string,
    private readonly confirmTimeout: number,
    log: Logger,
    private readonly options: { msgIdSuffix?: string } = {},
  ) {
    super(conn, `nats ${conn.name} target subject '${subject}'`, natsSubjectAddress(conn, subject), 'target', log);
    this.deadline = new ConfirmDeadline(confirmTimeout, () => this.oldestSentAt(), () => this.pubAckOverdue());
  }

  async open(handlers: TargetHandlers): Promise<void> {
    const { nc, jsm } = await this.connect((error) => {
      this.failPending(error);
      handlers.onLost(error);
    });
    this.handlers = handlers;
    this.inbox = createInbox();
    this.replies = nc.subscribe(`${this.inbox}.*`, { callback: (err, msg) => (err ? undefined : this.onReply(msg)) });
    // A templated target's subject is a template: its streams are found per message (a publish without one is refused).
    const templated = this.subject.includes('${');
    const stream = templated ? undefined : await jsm.streams.find(this.subject).catch(() => undefined);
    if (this.closed) {
      await this.abandon();
      throw new TransientError(`${this.description}: the connection was lost while opening`);
    }
    this.markOpened();
    this.deadline.start();
    this.log.info({ peer: this.peer, stream, ...natsProfileFields() }, `${this.description} open${stream === undefined ? '' : ` (stream '${stream}')`}`);
    if (stream === undefined && !templated) {
      this.log.warn(`no JetStream stream on ${this.where} captures subject '${this.subject}': every message would be refused (the bridge never creates streams)`);
    }
  }

  send(message: BridgeMessage, route?: string): Promise<void> {
    const nc = this.nc;
    if (nc === undefined || this.closed) return Promise.reject(new TransientError(`${this.description} is not connected`));
    const subject = route ?? this.subject;
    const { headers: list, body } = toNats(message, { log: this.log, duplicateIdHeader: this.duplicateIdHeader });
    const h = natsHeaders();
    for (const [name, value] of list) h.append(name, value);
    const id = readDuplicateId(message, this.duplicateIdHeader);
    if (id !== undefined) h.set(NATS_MSG_ID, `${id}${this.options.msgIdSuffix ?? ''}`);
    const token = ++this.token;
    try {
      nc.publish(subject, body, { reply: `${this.inbox}.${token}`, headers: h });
    } catch (err) {
      // Refused by the client before anything was written (too large for the server, a bad subject or header).
      return Promise.reject(this.clientRefusal(err, subject));
    }
    return new Promise<void>((resolve, reject) => {
      this.pending.set(token, { resolve, reject, subject, id, sentAt: performance.now() });
    });
  }

  /**
   * Each member is its own publish with its own PubAck (JetStream has no transactions): confirmed members are stored
   * whatever happens to the others.
   */
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

  private onReply(msg: Msg): void {
    const token = Number(msg.subject.slice(this.inbox.length + 1));
    const p = this.pending.get(token);
    if (p === undefined) return;
    this.pending.delete(token);
    if (msg.headers?.hasError) {
      if (msg.headers.code === 503) {
        p.reject(
          new MessageRejectedError('no-stream', `no JetStream stream on ${this.where} captures subject '${p.subject}'; the bridge never creates streams: add the subject to a stream`),
        );
      } else {
        p.reject(new MessageRejectedError('refused', `${this.where} answered the publish to '${p.subject}' with status ${msg.headers.code} ${msg.headers.description}`));
      }
      return;
    }
    let ack: PubAckReply;
    try {
      ack = msg.json<PubAckReply>();
    } catch (err) {
      p.reject(new MessageRejectedError('refused', `${this.where} answered the publish to '${p.subject}' with no PubAck: ${String(err)}`));
      return;
    }
    if (ack.error !== undefined) {
      p.reject(this.apiRefusal(ack.error, p.subject));
      return;
    }
    p.resolve();
    if (ack.duplicate === true && p.id !== undefined) this.handlers?.onDuplicate?.(p.id);
  }

  private apiRefusal(e: NonNullable<PubAckReply['error']>, subject: string): MessageRejectedError {
    const reason = `${e.description ?? 'error'} (${e.err_code ?? e.code ?? '?'})`;
    if (e.err_code === INSUFFICIENT_RESOURCES || (e.err_code === STORE_FAILED && /maximum (messages|bytes)/i.test(e.description ?? ''))) {
      return new MessageRejectedError(TARGET_FULL, `the stream for '${subject}' on ${this.where} is full: ${reason}`);
    }
    if (e.err_code === MESSAGE_TOO_LARGE) return new MessageRejectedError('too-large', `the stream for '${subject}' on ${this.where} refused the message as too large: ${reason}`);
    return new MessageRejectedError('refused', `JetStream on ${this.where} refused the message for '${subject}': ${reason}`);
  }

  private clientRefusal(err: unknown, subject: string): Error {
    const code = natsCode(err);
    const reason = err instanceof Error ? err.message : String(err);
    if (code === 'MAX_PAYLOAD_EXCEEDED') return new MessageRejectedError('too-large', `the message is larger than ${this.where} accepts: ${reason}`, { cause: err });
    if (code === 'BAD_SUBJECT' || code === 'BAD_HEADER') return new MessageRejectedError('refused', `${this.where} cannot take the message for '${subject}': ${reason}`, { cause: err });
    return new TransientError(`${this.description}: the publish to '${subject}' could not be written: ${reason}`, { cause: err });
  }

  /** When the oldest publish still waiting for its PubAck went out. */
  private oldestSentAt(): number | undefined {
    const oldest = this.pending.values().next();
    return oldest.done === true ? undefined : oldest.value.sentAt;
  }

  /** The oldest publish waited longer than the confirm timeout: the connection is taken as broken. */
  private pubAckOverdue(): void {
    const oldest = this.pending.values().next();
    if (oldest.done === true) return;
    const error = new TransientError(`${this.description}: no PubAck within ${this.confirmTimeout} ms for a message to '${oldest.value.subject}'; its outcome is unknown`, {
      outcomeUnknown: true,
    });
    // Through the one loss path: open()'s onLost fails what waits and tells the core (./nats-endpoint.ts lose).
    this.lose(error);
  }

  /** Every publish still waiting fails with the connection: written, not confirmed, so its outcome is unknown. */
  private failPending(cause: TransientError): void {
    this.deadline.stop();
    const error = cause.outcomeUnknown ? cause : new TransientError(cause.message, { cause, outcomeUnknown: true });
    const waiting = [...this.pending.values()];
    this.pending.clear();
    for (const p of waiting) p.reject(error);
  }

  override async close(): Promise<void> {
    this.failPending(new TransientError(`${this.description} was closed before the PubAck`, { outcomeUnknown: true }));
    this.replies?.unsubscribe();
    await super.close();
  }
}
