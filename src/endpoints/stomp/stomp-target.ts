/**
 * STOMP target: every SEND carries a `receipt`, and a message counts as sent only on its RECEIPT (or, in a batch, on
 * the RECEIPT of the COMMIT). Sends are pipelined: many receipts are outstanding at once, frames go out in call order.
 *
 * A SEND the broker answers with an ERROR frame is rejected (MessageRejectedError); a message ActiveMQ would refuse by
 * closing the whole connection (a header line over 10 KiB, over 1000 headers, a body over 100 MiB: its STOMP
 * defaults) is rejected before it is sent, so one bad message cannot make the bridge reconnect forever. An ERROR that
 * says the broker has no room (ActiveMQ's ResourceAllocationException) is a refusal as full (see fullRefusal).
 */
import type { StompConnectionConfig } from '../../config/protocols/stomp-schema.js';
import { asError, MessageRejectedError, TransientError } from '../../shared/errors.js';
import type { BridgeMessage } from '../../core/message.js';
import type { TargetEndpoint, TargetHandlers } from '../../core/ports.js';
import { CONFIRMED, NOT_SENT, failedMember, type BatchMemberResult } from '../../core/batch-result.js';
import { TARGET_FULL } from '../../core/session/refusal-policy.js';
import type { Logger } from '../../shared/log.js';
import { toStomp, type StompHeaders } from '../../mapping/stomp-mapping.js';
import { escapeHeader, type StompSession } from './stomp-client.js';
import { StompEndpoint } from './stomp-endpoint.js';
import type { StompConnector } from './shared-session.js';

/** Numbers the targets of the process: a transaction id names its target, so that two on one connection never mix. */
let targetsMade = 0;

/** ActiveMQ 5.x STOMP limits (StompWireFormat): exceeding one closes the connection. */
export const STOMP_FRAME_LIMITS = {
  maxHeaderLineBytes: 10 * 1024,
  maxHeaders: 1000,
  maxBodyBytes: 100 * 1024 * 1024,
} as const;

export class StompTarget extends StompEndpoint implements TargetEndpoint {
  private nextTx = 0;
  private readonly serial = ++targetsMade;

  constructor(
    conn: StompConnectionConfig,
    destination: string,
    private readonly confirmTimeout: number,
    log: Logger,
    /** The process's publishing connection for this bridge (../connections.ts); default: one of its own. */
    connector?: StompConnector,
  ) {
    super(conn, destination, 'target', log, connector);
  }

  async open(handlers: TargetHandlers): Promise<void> {
    const session = await this.connect((error) => handlers.onLost(error));
    this.log.info(this.connectionFields(session), `${this.description} open`);
  }

  send(message: BridgeMessage, route?: string): Promise<void> {
    let frame: { headers: StompHeaders; body: Buffer };
    try {
      frame = this.frameOf(message, route);
    } catch (err) {
      return Promise.reject(asError(err));
    }
    const session = this.openSession();
    if (!session) return Promise.reject(this.notOpen());
    return this.confirmed(session, session.send(frame.headers, frame.body), 'SEND');
  }

  /**
   * Sends the messages in one transaction (BEGIN, SENDs, COMMIT with a receipt): every member gets the transaction's
   * outcome (../../core/batch-result.ts). Committed: all confirmed. Refused as full: all refused so (the session waits
   * for room). Refused otherwise, or a member this target cannot send: nothing was delivered, so the culprit is refused
   * (when known) and every other member is not sent, to go again on its own. Lost after the COMMIT was written: all
   * unknown.
   */
  async sendBatch(messages: BridgeMessage[], routes?: readonly (string | undefined)[]): Promise<BatchMemberResult[]> {
    if (messages.length === 0) return [];
    // Every message is checked before BEGIN: a member this target cannot send never reaches the broker.
    const frames: ({ headers: StompHeaders; body: Buffer } | MessageRejectedError)[] = messages.map((m, i) => {
      try {
        return this.frameOf(m, routes?.[i]);
      } catch (err) {
        if (err instanceof MessageRejectedError) {
          return new MessageRejectedError(err.reason, `message ${i + 1} of ${messages.length} in a batch: ${err.message}`, { cause: err });
        }
        throw err;
      }
    });
    if (frames.some((f) => f instanceof MessageRejectedError)) {
      return frames.map((f) => (f instanceof MessageRejectedError ? { outcome: 'refused', error: f } : NOT_SENT));
    }
    const ready = frames as { headers: StompHeaders; body: Buffer }[];
    const all = (r: BatchMemberResult): BatchMemberResult[] => messages.map(() => r);
    const session = this.openSession();
    if (!session) return all({ outcome: 'not-sent', error: this.notOpen() });
    const tx = `bb-tx-${this.serial}-${++this.nextTx}`;
    let committing = false; // set once the COMMIT may have been written
    try {
      // SENDs carry no receipt (see StompSession.sendInTransaction): a refused one ends the session before the
      // broker reaches the COMMIT (frames are processed in order), so the COMMIT fails and nothing is acked.
      const begun = session.begin(tx);
      begun.catch(() => undefined);
      for (const f of ready) session.sendInTransaction({ ...f.headers, transaction: tx }, f.body);
      committing = true;
      const committed = session.commit(tx);
      await this.confirmed(session, Promise.all([begun, committed]), 'COMMIT');
      return all(CONFIRMED);
    } catch (err) {
      // Best effort: a lost connection rolls the transaction back anyway.
      if (session.isOpen) session.abort(tx).catch(() => undefined);
      if (err instanceof MessageRejectedError) {
        // A SEND of it refused with an ERROR that names no receipt (./stomp-session.ts): the rest may have been
        // committed, so each goes again alone, flagged, and the culprit is refused by its own receipt.
        if (err.ambiguous) return all({ outcome: 'refused-ambiguous', error: err });
        // Rolled back: nothing of it was delivered. Full: all wait; otherwise each goes again alone, to find the culprit.
        return err.reason === TARGET_FULL ? all({ outcome: 'refused', error: err }) : all(NOT_SENT);
      }
      if (err instanceof TransientError && !err.outcomeUnknown && committing) {
        // The COMMIT was written: whatever failed first (BEGIN's receipt, the socket), the broker may have committed.
        return all({
          outcome: 'unknown',
          error: new TransientError(`${this.description}: the connection was lost after the COMMIT was sent; the batch may or may not have been committed`, {
            cause: err,
            outcomeUnknown: true,
          }),
        });
      }
      return all(failedMember(err));
    }
  }

  private openSession(): StompSession | undefined {
    const s = this.session;
    return s && s.isOpen && !this.closed ? s : undefined;
  }

  private notOpen(): TransientError {
    return new TransientError(`${this.description} is not connected`);
  }

  /** `destination`: the message's own (a templated target: TargetEndpoint.send's route), else the target's. */
  private frameOf(message: BridgeMessage, destination = this.destination): { headers: StompHeaders; body: Buffer } {
    const out = toStomp(message, { log: this.log, bytesOnly: this.profile.bodyTyping === 'bytes' });
    const headers: StompHeaders = { ...out.headers, destination };
    checkLimits(headers, out.body);
    return { headers, body: out.body };
  }

  /**
   * Waits for a receipt, at most confirmTimeout; past it the connection is treated as broken — for every endpoint on it:
   * the peer answers one connection's frames in order, so one that does not answer is stuck for all of them.
   */
  private confirmed<T>(session: StompSession, promise: Promise<T>, what: string): Promise<T> {
    return this.receiptWithin(session, promise, what, this.confirmTimeout, true).catch((e: unknown) => {
      throw fullRefusal(asError(e));
    });
  }
}

/**
 * ActiveMQ Classic answers a SEND it has no room for (sendFailIfNoSpace on, a memory, store or temp limit reached) with
 * an ERROR whose message names javax.jms.ResourceAllocationException ("Usage Manager Memory Limit reached …"): "not
 * now", not a bad message (../../core/session/refusal-policy.ts).
 */
export function fullRefusal(err: Error): Error {
  if (!(err instanceof MessageRejectedError) || err.reason === TARGET_FULL) return err;
  if (!/ResourceAllocationException|Usage Manager .*Limit reached/i.test(err.message)) return err;
  return new MessageRejectedError(TARGET_FULL, `${err.message} (the broker has no room for it now)`, { cause: err });
}

function checkLimits(headers: StompHeaders, body: Buffer): void {
  const entries = Object.entries(headers);
  // +3 for receipt, transaction and content-length that may still be added.
  if (entries.length + 3 > STOMP_FRAME_LIMITS.maxHeaders) {
    throw new MessageRejectedError('too-large', `the message has ${entries.length} headers; a STOMP frame may carry at most ${STOMP_FRAME_LIMITS.maxHeaders}`);
  }
  for (const [name, value] of entries) {
    const bytes = Buffer.byteLength(escapeHeader(name)) + 1 + Buffer.byteLength(escapeHeader(value));
    if (bytes > STOMP_FRAME_LIMITS.maxHeaderLineBytes) {
      throw new MessageRejectedError(
        'too-large',
        `header '${name.slice(0, 64)}' is ${bytes} bytes long; a STOMP header line may be at most ${STOMP_FRAME_LIMITS.maxHeaderLineBytes} bytes`,
      );
    }
  }
  if (body.length > STOMP_FRAME_LIMITS.maxBodyBytes) {
    throw new MessageRejectedError('too-large', `the body is ${body.length} bytes; a STOMP frame may carry at most ${STOMP_FRAME_LIMITS.maxBodyBytes}`);
  }
}

