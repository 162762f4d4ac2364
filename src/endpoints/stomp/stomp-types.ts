/**
 * The STOMP client's public face: what a session offers (StompSession) and what a MESSAGE is (StompMessage). Its
 * parts: the handshake (./stomp-client.ts: connectStomp), the stompit pieces it keeps, with the heart-beats
 * (./stompit.ts), the session and its frame handling (./stomp-session.ts), receipts (./stomp-receipts.ts), the
 * writer (./stomp-writer.ts) and the reader (./frame-reader.ts).
 */
import type { StompHeaders } from '../../mapping/stomp-mapping.js';
import type { TransientError } from '../../shared/errors.js';
import type { SkippedFrame } from './frame-skipper.js';

/** Frame headers as sent: strings only. */
export type { StompHeaders };

/** A received MESSAGE frame, body read in full (binary-safe). */
export interface StompMessage {
  /** All frame headers, unescaped. */
  headers: StompHeaders;
  body: Buffer;
  /**
   * Set for a MESSAGE over a size limit of the connection, read past without its body (./frame-skipper.ts): `body` is
   * empty, `headers` hold those read within the limits and the ones needed to settle it.
   */
  skipped?: SkippedFrame;
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
   * msgs/s in batches of 100). An ERROR answering such a SEND names no receipt: the session puts it on the transactions
   * not yet answered, whose COMMIT then fails as an ambiguous refusal (./stomp-session.ts). A no-op once closed (the
   * COMMIT fails then too).
   */
  sendInTransaction(headers: StompHeaders, body: Buffer): void;
  /**
   * SUBSCRIBE with a receipt; every MESSAGE for it goes to onMessage, in order, with its full body. Resolves with the
   * subscription's id (`headers.id`, or one unique on this connection).
   */
  subscribe(headers: StompHeaders, onMessage: (message: StompMessage) => void): Promise<string>;
  /**
   * UNSUBSCRIBE with a receipt: no more MESSAGE frames reach its handler (those on their way are dropped unacked), and
   * the broker has its unacked messages back (ActiveMQ Classic; see StompPeerProfile.sharedConnection for RabbitMQ).
   * No ACK for it may follow. Rejects like `send` would.
   */
  unsubscribe(id: string): Promise<void>;
  /** ACK (no receipt): `id` in STOMP 1.2, `message-id` + `subscription` in 1.1. A no-op once closed. */
  ack(message: StompMessage): void;
  /**
   * NACK (no receipt), addressed as ACK is. Only for a message the bridge hands back to the broker's dead-letter path
   * (ActiveMQ: a persistent message goes to ActiveMQ.DLQ at once): never for a transient error (docs/design.md §5).
   */
  nack(message: StompMessage): void;
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
