/**
 * The parts of stompit 1.0.0 the STOMP client uses, typed (its published types are wrong in places; under ESM it has
 * only a default export, so it is loaded with createRequire and described by the few interfaces below), the limits we
 * give it, and its transport errors as sentences. stompit keeps the handshake (CONNECT, CONNECTED) and the heart-beats:
 * it sends ours at the rate agreed in the handshake (`heartbeat` below), and watches the socket's byte count for the
 * server's, ending the connection with 'connection timed out' when they stop.
 */
import { createRequire } from 'node:module';
import type { EventEmitter } from 'node:events';
import type { Socket } from 'node:net';
import type { ConnectionOptions } from 'node:tls';
import type { Readable } from 'node:stream';
import { redactUrl } from '../../shared/errors.js';
import type { StompHeaders } from '../../mapping/stomp-mapping.js';
import { socketSentence } from '../../shared/error-sentences.js';

export type StompitHeaderValues = Record<string, string | number>;

export interface StompitIncomingFrame extends Readable {
  command: string;
  headers: StompitHeaderValues;
}

export interface StompitError extends Error {
  code?: string;
  isTransportError?: () => boolean;
  isProtocolError?: () => boolean;
  isApplicationError?: () => boolean;
}

export type StompitCommandHandler = (this: StompitClient, frame: StompitIncomingFrame) => void;

export interface StompitClient extends EventEmitter {
  headers?: StompitHeaderValues;
  setCommandHandler(command: string, handler: StompitCommandHandler): void;
  destroy(error?: Error): void;
  getTransportSocket(): Socket;
}

/** stompit hands the whole options object to tls.connect when `ssl` is true: TLS options go in it as they are. */
export interface StompitConnectOptions extends ConnectionOptions {
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

export interface StompitModule {
  connect(options: StompitConnectOptions, callback: (error: StompitError | null, client?: StompitClient) => void): StompitClient;
}

const require = createRequire(import.meta.url);
export const stompit = require('stompit') as StompitModule;

// stompit's defaults (1 KiB header lines, 64 headers) would kill the connection on an ordinary MESSAGE with a long or
// many application headers; ActiveMQ itself allows 10 KiB lines and 1000 headers.
export const MAX_INCOMING_LINE = 256 * 1024;
export const MAX_INCOMING_HEADERS = 4096;
export const ERROR_BODY_LIMIT = 4096;

/** A transport error of stompit's (or ours, in its words) as a clause, without credentials. */
export function transportSentence(error: StompitError, timeoutMs?: number): string {
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
