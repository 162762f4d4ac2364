/**
 * NATS JetStream target: a JetStream publish per message, confirmed by its PubAck.
 *
 * The duplicate ID goes in `Nats-Msg-Id` (and stays in the duplicate-ID header): the stream stores one message per ID
 * within its `duplicate_window`, and answers a second publish of the ID with a PubAck saying `duplicate: true`. Such a
 * send counts as confirmed (the stream holds the message) and is reported through TargetHandlers.onDuplicate. This is
 * what closes the crash gap (docs/delivery.md): a copy resent after a crash between this confirm and the cache commit
 * never reaches the stream twice, as long as it comes within the window.
 *
 * Outcomes of one send:
 * - PubAck → resolved (duplicate or not);
 * - no stream captures the subject (the publish has no responder) → MessageRejectedError('no-stream'): the bridge never
 *   creates streams, as it never declares queues;
 * - the stream is full (maximum messages or bytes with discard new, no resources) → MessageRejectedError('target-full'):
 *   the session waits for room;
 * - larger than the stream's max_msg_size (or the server's max_payload) → MessageRejectedError('too-large');
 * - any other JetStream error for this message → MessageRejectedError('refused') with its description;
 * - no PubAck within confirm-timeout, or the connection lost → TransientError({ outcomeUnknown: true }), and the
 *   connection is reported lost (onLost, once) and closed: the next session starts on a fresh one.
 *
 * Sends keep their call order on the wire: nats.js writes a publish when it is called.
 */
import { headers as natsHeaders, type JetStreamClient, type PubAck } from 'nats';
import type { NatsConnectionConfig } from '../../config/types.js';
import { natsSubjectAddress } from '../../config/nats-address.js';
import { MessageRejectedError, TransientError } from '../../shared/errors.js';
import type { BridgeMessage } from '../../core/message.js';
import type { TargetEndpoint, TargetHandlers } from '../../core/ports.js';
import { CONFIRMED, failedMember, type BatchMemberResult } from '../../core/batch-result.js';
import { TARGET_FULL } from '../../core/session/refusal-policy.js';
import { readDuplicateId } from '../../core/duplicate-id.js';
import type { Logger } from '../../shared/log.js';
import { toNats } from '../../mapping/nats-mapping.js';
import { NatsEndpoint } from './nats-endpoint.js';
import { tellLost } from '../endpoint-handlers.js';
import { natsCode } from './nats-connect.js';
import { natsProfileFields } from './nats-peer.js';

/** JetStream API error codes: insufficient resources (full), store failed (full when it says a maximum), message too large. */
const INSUFFICIENT_RESOURCES = 10047;
const STORE_FAILED = 10077;
const MESSAGE_TOO_LARGE = 10054;

export class NatsTarget extends NatsEndpoint implements TargetEndpoint {
  private js: JetStreamClient | undefined;
  private handlers: TargetHandlers | undefined;

  constructor(
    conn: NatsConnectionConfig,
    private readonly subject: string,
    private readonly duplicateIdHeader: string,
    private readonly confirmTimeout: number,
    log: Logger,
  ) {
    super(conn, `nats ${conn.name} target subject '${subject}'`, natsSubjectAddress(conn, subject), 'target', log);
  }

  async open(handlers: TargetHandlers): Promise<void> {
    const { nc, jsm } = await this.connect((error) => handlers.onLost(error));
    this.handlers = handlers;
    this.js = nc.jetstream({ timeout: this.confirmTimeout });
    let stream: string | undefined;
    try {
      // A templated target's subject is a template: its streams are found per message (a publish without one is refused).
      if (!this.subject.includes('${')) stream = await jsm.streams.find(this.subject).catch(() => undefined);
    } catch {
      stream = undefined;
    }
    this.log.info({ peer: this.peer, stream, ...natsProfileFields() }, `${this.description} open${stream === undefined ? '' : ` (stream '${stream}')`}`);
    if (stream === undefined && !this.subject.includes('${')) {
      this.log.warn(`no JetStream stream on ${this.where} captures subject '${this.subject}': every message would be refused (the bridge never creates streams)`);
    }
  }

  async send(message: BridgeMessage, route?: string): Promise<void> {
    const js = this.js;
    if (js === undefined || this.closed) throw new TransientError(`${this.description} is not connected`);
    const subject = route ?? this.subject;
    const { headers: list, body } = toNats(message, { log: this.log, duplicateIdHeader: this.duplicateIdHeader });
    const h = natsHeaders();
    for (const [name, value] of list) h.append(name, value);
    const id = readDuplicateId(message, this.duplicateIdHeader);
    let ack: PubAck;
    try {
      ack = await js.publish(subject, body, { headers: h, timeout: this.confirmTimeout, ...(id !== undefined ? { msgID: id } : {}) });
    } catch (err) {
      const error = this.closed ? new TransientError(`${this.description}: connection lost before the PubAck`, { cause: err, outcomeUnknown: true }) : this.sendError(err, subject);
      // No PubAck in time: the connection is treated as broken (reported before the send fails), as on AMQP and STOMP.
      if (error instanceof TransientError) this.lose(error);
      throw error;
    }
    if (ack.duplicate && id !== undefined) this.handlers?.onDuplicate?.(id);
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

  private lose(error: TransientError): void {
    if (this.closed) return;
    this.closed = true;
    tellLost((e) => this.handlers?.onLost(e), error, this.log);
    void this.nc?.close().catch(() => undefined);
  }

  private sendError(err: unknown, subject: string): Error {
    const code = natsCode(err);
    const apiCode = (err as { api_error?: { err_code?: unknown } } | null)?.api_error?.err_code;
    const reason = err instanceof Error ? err.message : String(err);
    if (code === '503') {
      return new MessageRejectedError(
        'no-stream',
        `no JetStream stream on ${this.where} captures subject '${subject}'; the bridge never creates streams: add the subject to a stream`,
        { cause: err },
      );
    }
    if (typeof apiCode === 'number') {
      if (apiCode === INSUFFICIENT_RESOURCES || (apiCode === STORE_FAILED && /maximum (messages|bytes)/i.test(reason))) {
        return new MessageRejectedError(TARGET_FULL, `the stream for '${subject}' on ${this.where} is full: ${reason}`, { cause: err });
      }
      if (apiCode === MESSAGE_TOO_LARGE) return new MessageRejectedError('too-large', `the stream for '${subject}' on ${this.where} refused the message as too large: ${reason}`, { cause: err });
      return new MessageRejectedError('refused', `JetStream on ${this.where} refused the message for '${subject}': ${reason}`, { cause: err });
    }
    if (code === 'MAX_PAYLOAD_EXCEEDED') return new MessageRejectedError('too-large', `the message is larger than ${this.where} accepts: ${reason}`, { cause: err });
    if (code === 'BAD_SUBJECT' || code === 'BAD_HEADER') return new MessageRejectedError('refused', `${this.where} cannot take the message for '${subject}': ${reason}`, { cause: err });
    return new TransientError(`${this.description}: no PubAck for a message to '${subject}' (${reason}); its outcome is unknown`, { cause: err, outcomeUnknown: true });
  }
}
