/**
 * Our small typed wrapper around stompit (its published types are wrong in places; under ESM it has only a default
 * export, so it is loaded with createRequire and described by the few interfaces below).
 *
 * What it adds to stompit:
 * - a failover connect over the connection's URLs with a handshake timeout of our own (stompit's `timeout` covers only
 *   TCP: a server that accepts TCP and never answers CONNECT would leave it pending forever), Nagle off
 *   (`noDelay`, else a SEND waiting for its receipt stalls ~40 ms), and errors as sentences without credentials;
 * - receipts as promises, one unique receipt id per frame, settled by our own RECEIPT handler;
 * - our own ERROR handler: an ERROR that names a receipt rejects that one request and leaves the session up (ActiveMQ
 *   keeps the connection open then); any other ERROR ends the session;
 * - one `onLost` callback when the connection ends without us closing it; every request still waiting for its
 *   receipt is then rejected with TransientError (`outcomeUnknown` for SEND and COMMIT);
 * - after the handshake, our own frame reader (./frame-reader.ts) and writer on the socket: stompit keeps only the
 *   handshake and the heart-beats (it sends them, and watches the socket's byte count for the server's).
 * It never reconnects: one StompSession is one connection.
 */
import { createRequire } from 'node:module';
import type { EventEmitter } from 'node:events';
import type { Socket } from 'node:net';
import type { ConnectionOptions } from 'node:tls';
import type { Readable } from 'node:stream';
import type { StompConnectionConfig } from '../../config/types.js';
import { ConfigError, MessageRejectedError, TransientError, isProgrammerError, redactUrl } from '../../shared/errors.js';
import type { Logger } from '../../shared/log.js';
import { describeServer, parseStompUrl, type StompServer } from '../../config/stomp-address.js';
import type { StompHeaders } from '../../mapping/stomp-mapping.js';
import { coalesceWrites } from '../../shared/coalesce-writes.js';
import { connectFirst } from '../failover.js';
import { defaultServername, tlsConnectionOptions } from '../../config/tls.js';
import { socketSentence, tlsFailure } from '../../shared/error-sentences.js';
import { FrameReader, StompProtocolError, type IncomingFrame } from './frame-reader.js';

/** Frame headers as sent: strings only. */
export type { StompHeaders };

/** A received MESSAGE frame, body read in full (binary-safe). */
export interface StompMessage {
  /** All frame headers, unescaped. */
  headers: StompHeaders;
  body: Buffer;
}

/** One open STOMP connection. Created by connectStomp; never reconnects. */
export interface StompSession {
  /** `host:port` of the server it is connected to, for logs. */
  readonly peer: string;
  /** The negotiated STOMP version (`1.1` or `1.2`). */
  readonly version: string;
  /** The server's `server` header, e.g. `ActiveMQ/5.17.2`. */
  readonly server: string | undefined;
  /** False once the connection ended, for whatever reason. */
  readonly isOpen: boolean;
  /**
   * SEND with a receipt. Resolves on the RECEIPT; rejects with MessageRejectedError (reason `error-frame`, the ERROR's
   * `message` in the text) when the server answered it with an ERROR, TransientError({ outcomeUnknown: true }) when
   * the connection ended first. Sends are written in call order.
   */
  send(headers: StompHeaders, body: Buffer): Promise<void>;
  /**
   * SEND without a receipt, for a SEND inside a transaction whose fate the COMMIT's receipt decides. A receipt per
   * transacted SEND costs ActiveMQ about as much as a non-transacted persistent SEND (measured: ~1,000 vs ~6,000+
   * msgs/s in batches of 100). An ERROR answering such a SEND names no receipt, so it ends the session, and the COMMIT
   * then fails instead of committing the rest. A no-op once closed (the COMMIT fails then too).
   */
  sendInTransaction(headers: StompHeaders, body: Buffer): void;
  /** SUBSCRIBE with a receipt; every MESSAGE for it goes to onMessage, in order, with its full body. */
  subscribe(headers: StompHeaders, onMessage: (message: StompMessage) => void): Promise<void>;
  /** ACK (no receipt): `id` in STOMP 1.2, `message-id` + `subscription` in 1.1. A no-op once closed. */
  ack(message: StompMessage): void;
  /**
   * Resolves once the server has processed every frame sent before it (frames are processed in order; this is an
   * empty BEGIN/ABORT pair with a receipt on the ABORT). Rejects with TransientError if the connection ends first.
   */
  sync(): Promise<void>;
  begin(transaction: string): Promise<void>;
  /** Rejects like `send` (outcome unknown when the connection ends before the receipt). */
  commit(transaction: string): Promise<void>;
  abort(transaction: string): Promise<void>;
  /** Registers the one callback for a connection that ends without disconnect/destroy being called. */
  onLost(listener: (error: TransientError) => void): void;
  /**
   * Ends the connection as broken (e.g. a confirm timed out): pending requests are rejected with `error` and
   * onLost fires with it.
   */
  fail(error: TransientError): void;
  /** DISCONNECT with a receipt, waiting at most timeoutMs for it, then closes the socket. Never throws; onLost does not fire. */
  disconnect(timeoutMs?: number): Promise<void>;
  /** Closes the socket at once (no DISCONNECT). onLost does not fire. */
  destroy(): void;
}

// ---- the parts of stompit 1.0.0 we use ----

type StompitHeaderValues = Record<string, string | number>;

interface StompitIncomingFrame extends Readable {
  command: string;
  headers: StompitHeaderValues;
}

interface StompitError extends Error {
  code?: string;
  isTransportError?: () => boolean;
  isProtocolError?: () => boolean;
  isApplicationError?: () => boolean;
}

type StompitCommandHandler = (this: StompitClient, frame: StompitIncomingFrame) => void;

interface StompitClient extends EventEmitter {
  headers?: StompitHeaderValues;
  setCommandHandler(command: string, handler: StompitCommandHandler): void;
  destroy(error?: Error): void;
  getTransportSocket(): Socket;
}

/** stompit hands the whole options object to tls.connect when `ssl` is true: TLS options go in it as they are. */
interface StompitConnectOptions extends ConnectionOptions {
  host: string;
  port: number;
  ssl?: boolean;
  servername?: string;
  timeout: number;
  noDelay: boolean;
  heartbeat: [number, number];
  maxLineLength: number;
  maxHeaders: number;
  connectHeaders: StompHeaders;
}

interface StompitModule {
  connect(options: StompitConnectOptions, callback: (error: StompitError | null, client?: StompitClient) => void): StompitClient;
}

const require = createRequire(import.meta.url);
const stompit = require('stompit') as StompitModule;

// stompit's defaults (1 KiB header lines, 64 headers) would kill the connection on an ordinary MESSAGE with a long or
// many application headers; ActiveMQ itself allows 10 KiB lines and 1000 headers.
const MAX_INCOMING_LINE = 256 * 1024;
const MAX_INCOMING_HEADERS = 4096;
const ERROR_BODY_LIMIT = 4096;
const DEFAULT_DISCONNECT_TIMEOUT = 2000;
const NUL = Buffer.from([0]);

/**
 * Connects to the first URL of `conn.urls` that answers, in order (the failover of ../failover.ts). Resolves with an
 * open session; rejects with TransientError when none answered (unreachable, refused, timed out), ConfigError when a
 * broker refused the login or TLS failed for good (certificate not trusted or for another name, client certificate
 * refused: see tlsFailure in shared/error-sentences.ts).
 */
export function connectStomp(conn: StompConnectionConfig, log: Logger): Promise<StompSession> {
  return connectFirst(conn.urls, (url) => connectOne(conn, parseStompUrl(url), log), {
    noUrl: `STOMP connection '${conn.name}' has no URL`,
    allFailed: (reasons) => `no broker of STOMP connection '${conn.name}' could be reached: ${reasons}`,
    peer: (session) => session.peer,
  }, log);
}

function connectOne(conn: StompConnectionConfig, server: StompServer, log: Logger): Promise<StompSession> {
  const peer = describeServer(server);
  const what = `STOMP connection '${conn.name}' (${peer})`;
  const connectHeaders: StompHeaders = {
    host: conn.host ?? server.host,
    'accept-version': '1.1,1.2',
  };
  if (server.login !== undefined) connectHeaders.login = server.login;
  if (server.passcode !== undefined) connectHeaders.passcode = server.passcode;
  const options: StompitConnectOptions = {
    host: server.host,
    port: server.port,
    timeout: conn.connectTimeout,
    noDelay: true,
    heartbeat: [conn.heartBeat[0], conn.heartBeat[1]],
    maxLineLength: MAX_INCOMING_LINE,
    maxHeaders: MAX_INCOMING_HEADERS,
    connectHeaders,
  };
  if (server.tls) {
    options.ssl = true;
    const sni = defaultServername(server.host);
    if (sni !== undefined) options.servername = sni;
    Object.assign(options, tlsConnectionOptions(conn.tls));
  }

  return new Promise<StompSession>((resolve, reject) => {
    let settled = false;
    let client: StompitClient | undefined;
    const fail = (error: Error): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      client?.destroy();
      reject(error);
    };
    const timer = setTimeout(() => {
      fail(new TransientError(`${what}: the broker did not complete the STOMP handshake within ${conn.connectTimeout} ms`));
    }, conn.connectTimeout);
    try {
      client = stompit.connect(options, (error, connected) => {
        if (settled) return;
        if (error || !connected) {
          // stompit hangs the connect options (login, passcode, TLS key and passphrase) on its errors: drop them.
          if (error) delete (error as { connectArgs?: unknown }).connectArgs;
          const tlsProblem = server.tls && error ? tlsFailure(error, peer, conn.tls) : undefined;
          fail(
            tlsProblem !== undefined
              ? new ConfigError(`${what}: ${tlsProblem}`, { cause: error })
              : classifyConnectError(error ?? new Error('no client'), what, conn.connectTimeout),
          );
          return;
        }
        settled = true;
        clearTimeout(timer);
        resolve(new Session(connected, peer, what, log));
      });
    } catch (err) {
      fail(isProgrammerError(err) ? err : new TransientError(`${what}: ${redactUrl(err instanceof Error ? err.message : String(err))}`, { cause: err }));
      return;
    }
    // Always an 'error' listener: without one a broken socket would crash the process. Errors during the
    // handshake reach the callback above; later ones are handled by the Session's own listener.
    client.on('error', () => undefined);
    // stompit's own ERROR handler, for an ERROR with a text/plain body (RabbitMQ's answer to a refused CONNECT: a
    // wrong vhost or login), destroys the frame instead of the client: an 'error' event nobody listens to, and the
    // process crashes. Ours reads the body and fails the connect; the Session installs its own after the handshake.
    // stompit sets its handlers when it writes CONNECT, right after 'socket-connect'; the answer comes in a later tick.
    const handshakeClient = client;
    handshakeClient.once('socket-connect', () => {
      queueMicrotask(() => {
        handshakeClient.setCommandHandler('ERROR', (frame) => {
          readErrorBody(frame, (body) => {
            const message = String(frame.headers.message ?? 'ERROR frame');
            const detail = body.split('\n')[0]?.trim();
            const error: StompitError = new Error(detail ? `${message}: ${detail}` : message);
            error.isApplicationError = () => true;
            fail(classifyConnectError(error, what, conn.connectTimeout));
          });
        });
      });
    });
  });
}

function readErrorBody(frame: StompitIncomingFrame, done: (body: string) => void): void {
  const chunks: Buffer[] = [];
  let size = 0;
  frame.on('data', (chunk: Buffer) => {
    if (size < ERROR_BODY_LIMIT) chunks.push(chunk);
    size += chunk.length;
  });
  frame.on('end', () => done(Buffer.concat(chunks).toString('utf8')));
}

const AUTH_FAILURE = /auth|password|passcode|login|credential|not authori[sz]ed|access denied|access refused|security/i;

function classifyConnectError(error: StompitError, what: string, timeoutMs: number): Error {
  const text = redactUrl(error.message);
  if (error.isApplicationError?.()) {
    // An ERROR frame in answer to CONNECT: a refused login is a configuration problem, not worth retrying blindly.
    if (AUTH_FAILURE.test(text)) {
      // RabbitMQ reads the `host` header as the vhost, and it defaults to the URL's host name here.
      const hint = /virtual host/i.test(text) ? " (RabbitMQ reads the STOMP `host` header as the vhost: set the connection's `host`, e.g. \"/\")" : '';
      return new ConfigError(`${what}: the broker refused the login: ${text}${hint}`, { cause: error });
    }
    return new TransientError(`${what}: the broker refused the connection: ${text}`, { cause: error });
  }
  return new TransientError(`${what}: ${transportSentence(error, timeoutMs)}`, { cause: error });
}

function transportSentence(error: StompitError, timeoutMs?: number): string {
  const socket = socketSentence(error, 'clause', timeoutMs);
  if (socket !== undefined) return socket;
  const msg = redactUrl(error.message);
  if (msg === 'connect timed out') return `the TCP connection was not established within ${timeoutMs ?? '?'} ms`;
  if (msg === 'connection timed out') return 'the broker stopped sending heart-beats (connection timed out)';
  if (msg === 'connection ended unexpectedly' || msg === 'connection ended without disconnect receipt') {
    return 'the broker closed the connection';
  }
  return msg;
}

interface Pending {
  command: string;
  resolve: () => void;
  reject: (error: Error) => void;
}

type State = 'open' | 'closing' | 'closed';

class Session implements StompSession {
  readonly version: string;
  readonly server: string | undefined;
  private state: State = 'open';
  private readonly pending = new Map<string, Pending>();
  private nextReceipt = 0;
  private nextSubscription = 0;
  private nextSyncTx = 0;
  private lostListener: ((error: TransientError) => void) | undefined;
  /** Subscription id → where its MESSAGE frames go. */
  private readonly subscriptions = new Map<string, (message: StompMessage) => void>();
  private readonly reader: FrameReader;
  /** Set by fail(): the error the connection ended with, reported instead of stompit's. */
  private failure: TransientError | undefined;

  constructor(
    private readonly client: StompitClient,
    readonly peer: string,
    private readonly what: string,
    private readonly log: Logger,
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
    this.reader = new FrameReader(this.version, { maxLineLength: MAX_INCOMING_LINE, maxHeaders: MAX_INCOMING_HEADERS }, (frame) => this.onFrame(frame));
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

  subscribe(headers: StompHeaders, onMessage: (message: StompMessage) => void): Promise<void> {
    if (this.state !== 'open') return Promise.reject(this.closedError('SUBSCRIBE'));
    const id = headers.id ?? `sub-${++this.nextSubscription}`;
    // Before the SUBSCRIBE leaves: its first MESSAGE frames may come before its RECEIPT.
    this.subscriptions.set(id, onMessage);
    return this.request('SUBSCRIBE', { ...headers, id }).catch((err: unknown) => {
      this.subscriptions.delete(id);
      throw err;
    });
  }

  ack(message: StompMessage): void {
    if (this.state !== 'open') return;
    const h = message.headers;
    const headers: StompHeaders = {};
    if (this.version === '1.2') {
      if (h.ack !== undefined) headers.id = h.ack;
    } else {
      if (h['message-id'] !== undefined) headers['message-id'] = h['message-id'];
      if (h.subscription !== undefined) headers.subscription = h.subscription;
    }
    this.write('ACK', headers);
  }

  sync(): Promise<void> {
    if (this.state !== 'open') return Promise.reject(this.closedError('sync'));
    const tx = `bb-sync-${++this.nextSyncTx}`;
    this.write('BEGIN', { transaction: tx });
    return this.request('ABORT', { transaction: tx });
  }

  begin(transaction: string): Promise<void> {
    return this.request('BEGIN', { transaction });
  }

  commit(transaction: string): Promise<void> {
    return this.request('COMMIT', { transaction });
  }

  abort(transaction: string): Promise<void> {
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
    const receipt = this.newReceipt();
    const done = this.expect(receipt, 'DISCONNECT').catch(() => undefined);
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
        this.fail(new TransientError(`${this.what}: the broker sent a malformed frame: ${err.message}`, { cause: err }));
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
        if (onMessage) onMessage({ headers: h, body: frame.body });
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
        this.fail(new TransientError(`${this.what}: the broker sent an unexpected ${frame.command} frame`));
    }
  }

  private newReceipt(): string {
    return `r-${++this.nextReceipt}`;
  }

  private expect(receipt: string, command: string): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.pending.set(receipt, { command, resolve, reject });
    });
  }

  private request(command: string, headers: StompHeaders, body?: Buffer): Promise<void> {
    if (this.state !== 'open') return Promise.reject(this.closedError(command));
    const receipt = this.newReceipt();
    const promise = this.expect(receipt, command);
    this.write(command, { ...headers, receipt }, body);
    return promise;
  }

  /**
   * Writes one frame as a single buffer straight to the socket. stompit's own writer sends every header line and the
   * body as separate socket writes, each waiting for the previous one to flush: ~1,000 msgs/s for transacted SENDs.
   * stompit still sends CONNECT (before anything is written here) and heart-beats (a lone newline, harmless between
   * frames: every frame here is one write).
   */
  private write(command: string, headers: StompHeaders, body?: Buffer): void {
    const socket = this.client.getTransportSocket();
    if (socket.destroyed || !socket.writable) return;
    let head = command;
    for (const [name, value] of Object.entries(headers)) head += `\n${escapeHeader(name, this.version)}:${escapeHeader(value, this.version)}`;
    head += '\n\n';
    const parts: Buffer[] = [Buffer.from(head, 'utf8')];
    if (body !== undefined && body.length > 0) parts.push(body);
    parts.push(NUL);
    // A write error destroys the socket, and stompit reports the end through `ended`; nothing to catch here.
    socket.write(Buffer.concat(parts));
  }

  private settle(receipt: string): void {
    const p = this.pending.get(receipt);
    if (!p) {
      this.log.debug({ receipt }, 'RECEIPT for no pending request; ignored');
      return;
    }
    this.pending.delete(receipt);
    p.resolve();
  }

  private errorFrame(headers: StompitHeaderValues, body: string): void {
    const message = errorSentence(headers, body);
    const receipt = headers['receipt-id'] === undefined ? undefined : String(headers['receipt-id']);
    const p = receipt === undefined ? undefined : this.pending.get(receipt);
    if (receipt !== undefined && p) {
      this.pending.delete(receipt);
      this.log.debug({ command: p.command, reason: message }, `${this.peer} answered a ${p.command} with an ERROR frame`);
      p.reject(new MessageRejectedError('error-frame', `${this.what} refused the ${p.command}: ${message}`));
      return;
    }
    // An ERROR about no request of ours: by the protocol the server closes the connection after it.
    this.fail(new TransientError(`${this.what}: the broker sent an ERROR frame: ${message}`));
  }

  private ended(error: StompitError | undefined): void {
    if (this.state === 'closed') return;
    const intentional = this.state === 'closing' && this.failure === undefined;
    this.state = 'closed';
    const reason =
      this.failure ??
      new TransientError(
        intentional ? `${this.what} was closed` : `${this.what}: ${error ? transportSentence(error) : 'the broker closed the connection'}`,
        error ? { cause: error } : undefined,
      );
    for (const [receipt, p] of this.pending) {
      this.pending.delete(receipt);
      const unknown = p.command === 'SEND' || p.command === 'COMMIT';
      p.reject(
        new TransientError(
          unknown ? `${reason.message}; the broker's answer to a ${p.command} never came, so its outcome is unknown` : reason.message,
          { cause: reason, outcomeUnknown: unknown },
        ),
      );
    }
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

/** A body with a NUL byte and no content-length would end the frame early and corrupt the stream. */
function withSafeLength(headers: StompHeaders, body: Buffer): StompHeaders {
  return headers['content-length'] === undefined && body.includes(0) ? { ...headers, 'content-length': String(body.length) } : headers;
}

/**
 * STOMP header escaping for a negotiated version: 1.0 has none; 1.1 escapes backslash, newline and colon; 1.2 also
 * carriage return. (CONNECT, which is never escaped, is sent by stompit.) The STOMP target measures header lines with
 * it too, as they will go on the wire.
 */
export function escapeHeader(text: string, version: string): string {
  if (version === '1.0' || !/[\\\n\r:]/.test(text)) return text;
  let out = text.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/:/g, '\\c');
  if (version === '1.2') out = out.replace(/\r/g, '\\r');
  return out;
}
