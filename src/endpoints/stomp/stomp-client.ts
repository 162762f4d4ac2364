/**
 * Our small typed wrapper around stompit: the handshake. What it adds to stompit's connect:
 * - a failover connect over the connection's URLs with a handshake timeout of our own (stompit's `timeout` covers only
 *   TCP: a server that accepts TCP and never answers CONNECT would leave it pending forever), Nagle off
 *   (`noDelay`, else a SEND waiting for its receipt stalls ~40 ms), and errors as sentences without credentials;
 * - an ERROR handler of our own during the handshake (stompit's crashes the process on some).
 * After the handshake the connection is a Session (./stomp-session.ts: receipts as promises, our own frame reader and
 * writer on the socket; stompit keeps only the heart-beats, ./stompit.ts). It never reconnects: one StompSession is
 * one connection. The public types are in ./stomp-types.ts and re-exported here.
 */
import type { StompConnectionConfig } from '../../config/protocols/stomp-schema.js';
import { ConfigError, PeerProtocolError, TransientError, isProgrammerError, redactUrl } from '../../shared/errors.js';
import type { Logger } from '../../shared/log.js';
import { describeServer, parseStompUrl, type StompServer } from '../../config/protocols/stomp-address.js';
import type { StompHeaders } from '../../mapping/stomp-mapping.js';
import { connectFirst } from '../failover.js';
import { defaultServername, tlsConnectionOptions } from '../../config/tls.js';
import { tlsFailure } from '../../shared/error-sentences.js';
import {
  ERROR_BODY_LIMIT,
  MAX_INCOMING_HEADERS,
  MAX_INCOMING_LINE,
  stompit,
  transportSentence,
  type StompitClient,
  type StompitConnectOptions,
  type StompitError,
  type StompitIncomingFrame,
} from './stompit.js';
import { Session } from './stomp-session.js';
import type { StompSession } from './stomp-types.js';

export type { StompHeaders, StompMessage, StompSession } from './stomp-types.js';

/**
 * The STOMP versions the bridge speaks. 1.0 is refused at connect: it has no header escaping, so a header value with a
 * line feed (any AMQP header may carry one) would inject header lines into the frames the bridge writes.
 */
const SUPPORTED_VERSIONS: ReadonlySet<string> = new Set(['1.1', '1.2']);
export { escapeHeader } from './stomp-writer.js';

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
    // stompit reads only CONNECTED (or an ERROR) with these; our own reader takes every later frame (./stomp-session.ts).
    maxLineLength: Math.min(MAX_INCOMING_LINE, conn.maxHeaderBytes),
    maxHeaders: MAX_INCOMING_HEADERS,
    connectHeaders,
  };
  // stompit counts a repeated header line nowhere and reads an ERROR's body to its end: the handshake's bytes are
  // counted here instead, so a server that answers CONNECT with an endless frame is cut off at max-header-bytes (with
  // room for an ERROR's body) rather than read until the handshake times out.
  const handshakeLimit = conn.maxHeaderBytes + ERROR_BODY_LIMIT;
  if (server.tls) {
    options.ssl = true;
    const sni = defaultServername(server.host);
    if (sni !== undefined) options.servername = sni;
    Object.assign(options, tlsConnectionOptions(conn.tls));
  }

  return new Promise<StompSession>((resolve, reject) => {
    let settled = false;
    let client: StompitClient | undefined;
    let stopCounting = (): void => undefined;
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
        const version = String(connected.headers?.version ?? '1.0');
        if (!SUPPORTED_VERSIONS.has(version)) {
          fail(
            new ConfigError(
              `${what}: the broker speaks STOMP ${version} only, and broker-bridge needs 1.1 or 1.2: without their header escaping a line feed, carriage return or ':' in a header value would end the line, and the rest of the value would be read as headers of its own`,
            ),
          );
          return;
        }
        settled = true;
        clearTimeout(timer);
        stopCounting();
        resolve(new Session(connected, peer, what, log, { maxFrameSize: conn.maxFrameSize, maxHeaderBytes: conn.maxHeaderBytes }));
      });
    } catch (err) {
      fail(isProgrammerError(err) ? err : new TransientError(`${what}: ${redactUrl(err instanceof Error ? err.message : String(err))}`, { cause: err }));
      return;
    }
    // Always an 'error' listener: without one a broken socket would crash the process. Errors during the
    // handshake reach the callback above; later ones are handled by the Session's own listener.
    client.on('error', () => undefined);
    let received = 0;
    const count = (chunk: Buffer): void => {
      received += chunk.length;
      if (received <= handshakeLimit) return;
      fail(
        new PeerProtocolError(
          'max-header-bytes',
          `${what}: the broker sent ${received} bytes without completing the STOMP handshake, more than max-header-bytes (${conn.maxHeaderBytes} bytes) and an ERROR body (${ERROR_BODY_LIMIT} bytes) together, so the bridge closed the connection`,
        ),
      );
    };
    const counted = client;
    stopCounting = () => counted.getTransportSocket().off('data', count);
    // stompit's own ERROR handler, for an ERROR with a text/plain body (RabbitMQ's answer to a refused CONNECT: a
    // wrong vhost or login), destroys the frame instead of the client: an 'error' event nobody listens to, and the
    // process crashes. Ours reads the body and fails the connect; the Session installs its own after the handshake.
    // stompit sets its handlers when it writes CONNECT, right after 'socket-connect'; the answer comes in a later tick.
    const handshakeClient = client;
    handshakeClient.once('socket-connect', () => {
      handshakeClient.getTransportSocket().on('data', count);
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
