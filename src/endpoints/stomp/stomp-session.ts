/**
 * One open STOMP connection after the handshake (created by connectStomp in ./stomp-client.ts; never reconnects): its
 * requests (each with a receipt, ./stomp-receipts.ts, written by ./stomp-writer.ts), the frames it reads itself
 * (./frame-reader.ts: MESSAGE to its subscription, RECEIPT, ERROR), and its end. An ERROR that names a receipt rejects
 * that one request and leaves the session up (ActiveMQ keeps the connection open then). An ERROR that names none is
 * put on what it can be about, and the session goes on (docs/design.md §10.3: a shared publish session must not die for
 * one bridge's send): a SEND in a transaction carries no receipt, so it is every transaction not yet answered — its
 * COMMIT then fails as an ambiguous refusal, each member is sent again alone with a receipt, and the culprit is refused
 * by its own ERROR — else every SEND still waiting for its receipt (ambiguous too). An ERROR with nothing in flight it
 * could be about ends the session, as before: a broken or closing peer (RabbitMQ closes after one). One `onLost` callback when the connection ends without us closing it; every request still waiting for its
 * receipt is then rejected with TransientError (`outcomeUnknown` for SEND and COMMIT).
 */
import { MessageRejectedError, PeerProtocolError, TransientError, redactUrl } from '../../shared/errors.js';
import type { Logger } from '../../shared/log.js';
import type { StompHeaders } from '../../mapping/stomp-mapping.js';
import { coalesceWrites } from '../../shared/coalesce-writes.js';
import { FrameReader, StompProtocolError, type FrameReaderLimits, type IncomingFrame } from './frame-reader.js';
import { ERROR_BODY_LIMIT, MAX_INCOMING_HEADERS, MAX_INCOMING_LINE, transportSentence, type StompitClient, type StompitError, type StompitHeaderValues } from './stompit.js';
import { Receipts } from './stomp-receipts.js';
import type { StompMessage, StompSession } from './stomp-types.js';
import { encodeFrame, withSafeLength } from './stomp-writer.js';

const DEFAULT_DISCONNECT_TIMEOUT = 2000;

type State = 'open' | 'closing' | 'closed';

export class Session implements StompSession {
  readonly version: string;
  readonly server: string | undefined;
  private state: State = 'open';
  private readonly receipts = new Receipts();
  private nextSubscription = 0;
  private nextSyncTx = 0;
  private lostListener: ((error: TransientError) => void) | undefined;
  /** Subscription id → where its MESSAGE frames go. */
  private readonly subscriptions = new Map<string, (message: StompMessage) => void>();
  private readonly reader: FrameReader;
  /** Set by fail(): the error the connection ended with, reported instead of stompit's. */
  private failure: TransientError | undefined;
  /** Transactions begun and not yet answered → the ERROR (naming no receipt) put on them, if one came. */
  private readonly openTx = new Map<string, string | undefined>();
  /** The last ERROR that named no receipt: what the connection ended with if the peer closes after it. */
  private lastError: string | undefined;

  constructor(
    private readonly client: StompitClient,
    readonly peer: string,
    private readonly what: string,
    private readonly log: Logger,
    /** What one frame of the server's may hold (the connection's max-frame-size and max-header-bytes). */
    limits: Pick<FrameReaderLimits, 'maxFrameSize' | 'maxHeaderBytes'>,
  ) {
    const headers = client.headers ?? {};
    this.version = String(headers.version ?? '1.0');
    this.server = headers.server === undefined ? undefined : String(headers.server);
    const socket = client.getTransportSocket();
    socket.setNoDelay(true);
    // Frames written in one tick leave in one writev (shared/coalesce-writes.ts), as on the AMQP and Redis sockets.
    coalesceWrites(socket);
    client.on('error', (error: StompitError) => this.ended(error));
    client.on('end', () => this.ended(undefined));
    // From here on the frames are ours to read: stompit's reader is taken off the socket. Nothing of the server's is
    // lost by that: before our first SUBSCRIBE it sends nothing after CONNECTED but heart-beats. stompit ended the
    // connection when its reader saw the end of the stream; that is ours to do now, with its words (see
    // transportSentence).
    this.reader = new FrameReader(this.version, { maxLineLength: MAX_INCOMING_LINE, maxHeaders: MAX_INCOMING_HEADERS, ...limits }, (frame) => this.onFrame(frame));
    socket.unpipe();
    socket.on('data', (chunk: Buffer) => this.read(chunk));
    socket.on('end', () => this.client.destroy(new Error('connection ended unexpectedly')));
    // unpipe() left the socket paused.
    socket.resume();
  }

  get isOpen(): boolean {
    return this.state === 'open';
  }

  send(headers: StompHeaders, body: Buffer): Promise<void> {
    return this.request('SEND', withSafeLength(headers, body), body);
  }

  sendInTransaction(headers: StompHeaders, body: Buffer): void {
    if (this.state !== 'open') return;
    this.write('SEND', withSafeLength(headers, body), body);
  }

  subscribe(headers: StompHeaders, onMessage: (message: StompMessage) => void): Promise<string> {
    if (this.state !== 'open') return Promise.reject(this.closedError('SUBSCRIBE'));
    const id = headers.id ?? `sub-${++this.nextSubscription}`;
    // Before the SUBSCRIBE leaves: its first MESSAGE frames may come before its RECEIPT.
    this.subscriptions.set(id, onMessage);
    return this.request('SUBSCRIBE', { ...headers, id }).then(
      () => id,
      (err: unknown) => {
        this.subscriptions.delete(id);
        throw err;
      },
    );
  }

  unsubscribe(id: string): Promise<void> {
    // MESSAGE frames for it that are still on their way are dropped from now on (unacked: the broker has them back).
    this.subscriptions.delete(id);
    return this.request('UNSUBSCRIBE', { id });
  }

  ack(message: StompMessage): void {
    this.settleMessage('ACK', message);
  }

  nack(message: StompMessage): void {
    this.settleMessage('NACK', message);
  }

  private settleMessage(command: 'ACK' | 'NACK', message: StompMessage): void {
    if (this.state !== 'open') return;
    const h = message.headers;
    const headers: StompHeaders = {};
    if (this.version === '1.2') {
      if (h.ack !== undefined) headers.id = h.ack;
    } else {
      if (h['message-id'] !== undefined) headers['message-id'] = h['message-id'];
      if (h.subscription !== undefined) headers.subscription = h.subscription;
    }
    this.write(command, headers);
  }

  sync(): Promise<void> {
    if (this.state !== 'open') return Promise.reject(this.closedError('sync'));
    const tx = `bb-sync-${++this.nextSyncTx}`;
    this.write('BEGIN', { transaction: tx });
    return this.request('ABORT', { transaction: tx });
  }

  begin(transaction: string): Promise<void> {
    if (this.state === 'open') this.openTx.set(transaction, undefined);
    return this.request('BEGIN', { transaction });
  }

  commit(transaction: string): Promise<void> {
    return this.request('COMMIT', { transaction }).then(
      () => {
        const refused = this.openTx.get(transaction);
        this.openTx.delete(transaction);
        // The peer committed what it took; a SEND of it was refused, which one is not said (see errorFrame).
        if (refused !== undefined) {
          throw new MessageRejectedError('error-frame', `${this.what} refused a SEND of transaction ${transaction} with an ERROR that names no receipt: ${refused}`, { ambiguous: true });
        }
      },
      (err: unknown) => {
        this.openTx.delete(transaction);
        throw err;
      },
    );
  }

  abort(transaction: string): Promise<void> {
    this.openTx.delete(transaction);
    return this.request('ABORT', { transaction });
  }

  onLost(listener: (error: TransientError) => void): void {
    this.lostListener = listener;
  }

  fail(error: TransientError): void {
    if (this.state === 'closed') return;
    this.failure = error;
    this.client.destroy(error);
  }

  async disconnect(timeoutMs = DEFAULT_DISCONNECT_TIMEOUT): Promise<void> {
    if (this.state !== 'open') {
      this.destroy();
      return;
    }
    this.state = 'closing';
    const receipt = this.receipts.newReceipt();
    const done = this.receipts.expect(receipt, 'DISCONNECT').catch(() => undefined);
    this.write('DISCONNECT', { receipt });
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, timeoutMs);
    });
    await Promise.race([done, timeout]);
    clearTimeout(timer);
    this.destroy();
  }

  destroy(): void {
    if (this.state === 'closed') return;
    if (this.state === 'open') this.state = 'closing';
    this.client.destroy();
    // stompit emits 'end' synchronously from destroy(); this covers a client that was already destroyed.
    this.ended(undefined);
  }

  // ---- internals ----

  private read(chunk: Buffer): void {
    if (this.state === 'closed') return;
    try {
      this.reader.push(chunk);
    } catch (err) {
      if (err instanceof StompProtocolError) {
        // One sentence: the limit (or what was malformed), the peer, the value seen; the supervisor logs it, counts it
        // (bridge_protocol_errors_total) and reconnects after its backoff. Nothing unacked is lost: the broker
        // redelivers it.
        const what = err.limit === undefined ? 'a malformed frame' : `a frame over ${err.limit}`;
        this.fail(new PeerProtocolError(err.reason, `${this.what}: the broker sent ${what}, so the bridge closed the connection: ${err.message}`, { cause: err }));
        return;
      }
      // A frame handler threw (a bug): the frames after it in the stream cannot be handed over in order any more.
      this.log.error({ err }, `${this.what}: a frame handler threw; the connection is closed and its messages come back`);
      this.fail(new TransientError(`${this.what}: a frame handler threw`, { cause: err }));
    }
  }

  private onFrame(frame: IncomingFrame): void {
    // Frames of a chunk that follow one that ended the connection are dropped; so are messages that come while it
    // closes. Their messages stay unacked, and the broker redelivers them.
    if (this.state === 'closed') return;
    const h = frame.headers;
    switch (frame.command) {
      case 'MESSAGE': {
        if (this.state !== 'open') return;
        const onMessage = h.subscription === undefined ? undefined : this.subscriptions.get(h.subscription);
        if (onMessage) onMessage(frame.skipped === undefined ? { headers: h, body: frame.body } : { headers: h, body: frame.body, skipped: frame.skipped });
        else this.log.debug({ subscription: h.subscription }, 'MESSAGE for no subscription of ours; ignored');
        return;
      }
      case 'RECEIPT':
        this.settle(h['receipt-id'] ?? '');
        return;
      case 'ERROR':
        this.errorFrame(h, frame.body.toString('utf8', 0, Math.min(frame.body.length, ERROR_BODY_LIMIT)));
        return;
      default:
        this.fail(new PeerProtocolError('malformed', `${this.what}: the broker sent an unexpected ${JSON.stringify(frame.command.slice(0, 40))} frame, so the bridge closed the connection`));
    }
  }

  private request(command: string, headers: StompHeaders, body?: Buffer): Promise<void> {
    if (this.state !== 'open') return Promise.reject(this.closedError(command));
    const receipt = this.receipts.newReceipt();
    const promise = this.receipts.expect(receipt, command);
    this.write(command, { ...headers, receipt }, body);
    return promise;
  }

  /** Writes one frame as a single buffer straight to the socket (./stomp-writer.ts). */
  private write(command: string, headers: StompHeaders, body?: Buffer): void {
    const socket = this.client.getTransportSocket();
    if (socket.destroyed || !socket.writable) return;
    // A write error destroys the socket, and stompit reports the end through `ended`; nothing to catch here.
    socket.write(encodeFrame(command, headers, body));
  }

  private settle(receipt: string): void {
    if (!this.receipts.settle(receipt)) this.log.debug({ receipt }, 'RECEIPT for no pending request; ignored');
  }

  private errorFrame(headers: StompitHeaderValues, body: string): void {
    const message = errorSentence(headers, body);
    const receipt = headers['receipt-id'] === undefined ? undefined : String(headers['receipt-id']);
    const p = receipt === undefined ? undefined : this.receipts.take(receipt);
    if (p) {
      this.log.debug({ command: p.command, reason: message }, `${this.peer} answered a ${p.command} with an ERROR frame`);
      p.reject(new MessageRejectedError('error-frame', `${this.what} refused the ${p.command}: ${message}`));
      return;
    }
    if (this.attribute(message)) return;
    // An ERROR about nothing in flight: by the protocol the server closes the connection after it.
    this.fail(new TransientError(`${this.what}: the broker sent an ERROR frame: ${message}`));
  }

  /**
   * An ERROR that names no receipt, put on what it can be about (see the header): true when something was in flight.
   * ActiveMQ answers a SEND without a receipt that it refuses (an ACL, a property it cannot convert) so, and keeps the
   * connection open; if a peer closes it instead, the loss says this ERROR.
   */
  private attribute(message: string): boolean {
    const open = [...this.openTx.keys()];
    for (const tx of open) if (this.openTx.get(tx) === undefined) this.openTx.set(tx, message);
    const sends = open.length > 0 ? 0 : this.receipts.rejectAll('SEND', (command) => new MessageRejectedError('error-frame', `${this.what} refused a ${command} in flight with an ERROR that names no receipt: ${message}`, { ambiguous: true }));
    if (open.length === 0 && sends === 0) return false;
    this.lastError = message;
    this.log.warn({ transactions: open.length, sends, reason: message }, `${this.peer} sent an ERROR that names no receipt; it is put on what was in flight, which is sent again one by one to find the refused message`);
    return true;
  }

  private ended(error: StompitError | undefined): void {
    if (this.state === 'closed') return;
    const intentional = this.state === 'closing' && this.failure === undefined;
    this.state = 'closed';
    const before = this.lastError === undefined ? '' : `the broker sent an ERROR frame: ${this.lastError}; then `;
    const reason =
      this.failure ??
      new TransientError(
        intentional ? `${this.what} was closed` : `${this.what}: ${before}${error ? transportSentence(error) : 'the broker closed the connection'}`,
        error ? { cause: error } : undefined,
      );
    this.receipts.failAll(reason);
    if (!intentional) {
      const listener = this.lostListener;
      this.lostListener = undefined;
      listener?.(reason);
    }
  }

  private closedError(command: string): TransientError {
    return new TransientError(`${this.what} is closed; cannot send ${command}`);
  }
}

/**
 * The ERROR frame as a sentence: its `message` header, with the first line of the body when that says more (RabbitMQ:
 * `precondition_failed` + `inequivalent arg 'durable' for queue 'x' …`), and what to do about a refusal to declare.
 */
function errorSentence(headers: StompitHeaderValues, body: string): string {
  const first = body.split('\n')[0]?.trim() ?? '';
  const header = headers.message === undefined ? '' : String(headers.message).trim();
  let text = header && first && !first.includes(header) ? `${header}: ${first}` : header || first || 'no message';
  if (/inequivalent arg|precondition_failed/i.test(text)) {
    // RabbitMQ declares the queue of a `/queue/<name>` destination on SEND and SUBSCRIBE, with its own arguments; an
    // existing queue declared otherwise (non-durable, x-queue-type, x-max-length…) refuses that, every time.
    text += " (RabbitMQ declares the queue of a '/queue/<name>' destination; for a queue declared with other properties use the destination '/amq/queue/<name>', which does not declare it)";
  }
  return redactUrl(text);
}
