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
 * - any other JetStream error for this message (too large, a wrong subject) → MessageRejectedError with its description;
 * - no PubAck within confirm-timeout, or the connection lost → TransientError({ outcomeUnknown: true }).
 *
 * Sends keep their call order on the wire: nats.js writes a publish when it is called.
 */
import { headers as natsHeaders, type JetStreamClient, type PubAck } from 'nats';
import type { NatsConnectionConfig } from '../../config/types.js';
import { natsSubjectAddress } from '../../config/nats-address.js';
import { MessageRejectedError, TransientError } from '../../shared/errors.js';
import type { BridgeMessage } from '../../core/message.js';
import type { TargetEndpoint, TargetHandlers } from '../../core/ports.js';
import { TARGET_FULL } from '../../core/session/refusal-policy.js';
import { readDuplicateId } from '../../core/duplicate-id.js';
import type { Logger } from '../../shared/log.js';
import { toNats } from '../../mapping/nats-mapping.js';
import { NatsEndpoint } from './nats-endpoint.js';
import { natsCode } from './nats-connect.js';
import { natsProfileFields } from './nats-peer.js';

/** JetStream API error codes that mean "full, try later": max messages, max bytes, insufficient resources. */
const FULL_CODES = new Set([10077, 10047, 10054, 10023]);

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
      throw this.sendError(err, subject);
    }
    if (ack.duplicate && id !== undefined) this.handlers?.onDuplicate?.(id);
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
      if (FULL_CODES.has(apiCode)) return new MessageRejectedError(TARGET_FULL, `the stream for '${subject}' on ${this.where} is full: ${reason}`, { cause: err });
      return new MessageRejectedError('refused', `JetStream on ${this.where} refused the message for '${subject}': ${reason}`, { cause: err });
    }
    if (code === 'MAX_PAYLOAD_EXCEEDED') return new MessageRejectedError('too-large', `the message is larger than ${this.where} accepts: ${reason}`, { cause: err });
    if (code === 'BAD_SUBJECT' || code === 'BAD_HEADER') return new MessageRejectedError('refused', `${this.where} cannot take the message for '${subject}': ${reason}`, { cause: err });
    return new TransientError(`${this.description}: no PubAck for a message to '${subject}' (${reason}); its outcome is unknown`, { cause: err, outcomeUnknown: true });
  }
}
