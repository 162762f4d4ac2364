/**
 * Opening and closing one amqplib connection for one endpoint session.
 *
 * No reconnect logic lives here (the supervisor owns it, and amqplib's own `recovery` option stays off so two
 * reconnect layers never fight): each call tries the configured URLs in order, once each, and either returns an
 * open connection or throws a classified error whose message is a sentence without credentials.
 */
import { connect, type ChannelModel } from 'amqplib';
import type { AmqpConnectionConfig } from '../../config/protocols/amqp-schema.js';
import { ConfigError, redactUrl, TransientError, type BridgeError } from '../../shared/errors.js';
import { connectFirst } from '../failover.js';
import type { Logger } from '../../shared/log.js';
import { describeBroker, parseBroker, type AmqpBroker } from '../../config/protocols/amqp-address.js';
import { SOCKET_WRITE_BUFFER, coalesceWrites } from '../../shared/coalesce-writes.js';
import { tlsConnectionOptions } from '../../config/tls.js';
import { socketFailure, socketSentence, tlsFailure } from '../../shared/error-sentences.js';

/** An open connection, with what the adapters need to know about it. */
export interface AmqpSession {
  model: ChannelModel;
  broker: AmqpBroker;
  /** `rabbit (127.0.0.1:5672)`, for messages. */
  where: string;
  /** The user this connection authenticated as (RabbitMQ checks a published `user-id` against it). */
  user: string;
}

export interface ConnectOptions {
  /** Shown by RabbitMQ as the connection name (management UI, `rabbitmqctl list_connections client_properties`). */
  connectionName: string;
  log: Logger;
}

/** AMQP reply codes we treat specially. */
export const ACCESS_REFUSED = 403;
export const NOT_FOUND = 404;
export const PRECONDITION_FAILED = 406;
const NOT_ALLOWED = 530;

/**
 * Connects to the first URL of `conn.urls` that answers, trying them in order (the failover of ../failover.ts).
 * Each attempt is bounded by `conn.connectTimeout`, which covers TCP connect *and* the AMQP handshake: amqplib's
 * `timeout` socket option is an idle timer only, so a broker that trickles bytes or stalls after `connection.start`
 * is caught by a timer of our own.
 *
 * @throws ConfigError when the broker refuses the login or vhost access (403), the URL is malformed, or TLS fails
 *   for good (certificate not trusted or for another name, client certificate refused: see shared/error-sentences.ts): retrying
 *   cannot help. TransientError for everything else (refused, unreachable, timed out, vhost missing).
 */
export function connectAmqp(conn: AmqpConnectionConfig, opts: ConnectOptions): Promise<AmqpSession> {
  return connectFirst(conn.urls, (url) => connectOne(conn, url, opts), {
    noUrl: `connection '${conn.name}' has no URL`,
    allFailed: (reasons) => `could not connect to ${conn.name}: ${reasons}`,
    peer: (session) => describeBroker(session.broker),
  }, opts.log);
}

async function connectOne(conn: AmqpConnectionConfig, url: string, opts: ConnectOptions): Promise<AmqpSession> {
  let broker: AmqpBroker;
  let target: string;
  try {
    broker = parseBroker(url);
    const u = new URL(url);
    if (u.protocol !== 'amqp:' && u.protocol !== 'amqps:') throw new TypeError(`unsupported scheme '${u.protocol}'`);
    // The configured heartbeat wins over a `?heartbeat=` in the URL: the config layer already resolved it.
    u.searchParams.set('heartbeat', String(conn.heartbeat));
    target = u.toString();
  } catch (err) {
    throw new ConfigError(`connection '${conn.name}' has an invalid AMQP URL ${redactUrl(url)}: ${(err as Error).message}`);
  }
  const where = `${conn.name} (${describeBroker(broker)})`;
  const user = userOf(url);

  const socketOptions = {
    timeout: conn.connectTimeout,
    noDelay: true,
    // Passed on to the net.Socket by amqplib (not in its types): see shared/coalesce-writes.ts.
    writableHighWaterMark: SOCKET_WRITE_BUFFER,
    clientProperties: { connection_name: opts.connectionName },
    // amqps:// only (amqplib hands these to tls.connect); its own default SNI (the URL's host) stays unless servername is set.
    ...(broker.scheme === 'amqps' ? tlsConnectionOptions(conn.tls) : {}),
  };
  const attempt = connect(target, socketOptions);
  let timer: NodeJS.Timeout | undefined;
  let timedOut = false;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      timedOut = true;
      reject(new TransientError(`connection to ${where} timed out after ${conn.connectTimeout} ms (TCP connect and AMQP handshake)`));
    }, conn.connectTimeout);
  });
  try {
    const model = await Promise.race([attempt, deadline]);
    // Without an 'error' listener an emitted error would crash the process; the adapters add their own as well.
    model.on('error', () => undefined);
    // amqplib keeps its socket as `connection.stream`; nothing public exposes it.
    coalesceWrites((model.connection as unknown as { stream?: unknown }).stream);
    return { model, broker, where, user };
  } catch (err) {
    if (timedOut) {
      // The handshake may still complete later: close that connection instead of leaking it.
      attempt.then((late) => closeModel(late, 1000), () => undefined);
      throw err;
    }
    const tlsProblem = broker.scheme === 'amqps' ? tlsFailure(err, describeBroker({ ...broker, vhost: '/' }), conn.tls) : undefined;
    if (tlsProblem !== undefined) throw new ConfigError(`connection to ${where} failed: ${tlsProblem}`, { cause: err });
    throw classifyConnectError(err, where, conn.connectTimeout);
  } finally {
    clearTimeout(timer);
  }
}

function userOf(url: string): string {
  try {
    const u = new URL(url);
    // amqplib's rule: no user and no password means guest/guest.
    if (u.username === '' && u.password === '') return 'guest';
    return decodeURIComponent(u.username);
  } catch {
    return 'guest';
  }
}

const HANDSHAKE_CLOSE = /Handshake terminated by server: (\d+) \([^)]*\) with message "(.*)"/s;

/** Turns a low-level connect error into a sentence, classified as transient or configuration. */
export function classifyConnectError(err: unknown, where: string, timeoutMs: number): BridgeError {
  const e = err as NodeJS.ErrnoException;
  const message = redactUrl(typeof e?.message === 'string' ? e.message : String(err));
  const options = { cause: err };
  const socket = socketSentence(err, 'predicate', timeoutMs);
  if (socket !== undefined) return new TransientError(`connection to ${where} ${socket}`, options);
  if (message === 'connect ETIMEDOUT') {
    return new TransientError(`connection to ${where} timed out after ${timeoutMs} ms (no data from the broker)`, options);
  }
  const close = HANDSHAKE_CLOSE.exec(message);
  if (close) {
    const code = Number(close[1]);
    const text = close[2] ?? '';
    if (code === ACCESS_REFUSED) {
      return new ConfigError(
        `connection to ${where} was refused by the broker: the login or the access to the vhost was denied (${text}); check the user, password and vhost permissions`,
        options,
      );
    }
    if (code === NOT_ALLOWED) {
      return new TransientError(`connection to ${where} was refused by the broker: ${text} (the vhost may not exist yet)`, options);
    }
    return new TransientError(`connection to ${where} was closed by the broker during the handshake: ${text}`, options);
  }
  if (/closed abruptly/i.test(message)) {
    return new TransientError(`connection to ${where} was closed by the broker during the AMQP handshake`, options);
  }
  return new TransientError(`connection to ${where} failed: ${message}`, options);
}

/**
 * Closes a connection and never throws. A broker that does not answer `connection.close` (network gone, TCP stalled)
 * must not hang a shutdown: after `timeoutMs` the socket is destroyed.
 */
export async function closeModel(model: ChannelModel, timeoutMs = 2000): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const gaveUp = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), timeoutMs);
  });
  try {
    const outcome = await Promise.race([model.close().then(() => 'closed' as const), gaveUp]);
    if (outcome === 'timeout') destroySocket(model);
  } catch {
    // Already closed, or closing failed: either way nothing is left to release but the socket.
    destroySocket(model);
  } finally {
    clearTimeout(timer);
  }
}

/** amqplib exposes no public way to drop a connection that is stuck; its Connection keeps the socket as `stream`. */
function destroySocket(model: ChannelModel): void {
  const stream = (model.connection as unknown as { stream?: { destroy?: () => void } }).stream;
  if (stream && typeof stream.destroy === 'function') stream.destroy();
}

/** An AMQP reply code carried by an amqplib error (channel or connection close), if any. */
export function replyCode(err: unknown): number | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'number' ? code : undefined;
}

/** The broker's reply text from an amqplib close error (`... with message "NOT_FOUND - no exchange 'x' ..."`). */
export function replyText(err: unknown): string {
  const message = err instanceof Error ? err.message : String(err);
  const m = /with message "(.*)"/s.exec(message);
  return redactUrl(m?.[1] ?? message);
}

/** A sentence for a connection or channel that went away after it was open. */
export function lostError(where: string, err: unknown, what = 'connection to'): TransientError {
  const code = replyCode(err);
  const e = err as NodeJS.ErrnoException | undefined;
  const socket = socketFailure(err);
  let detail: string;
  if (code !== undefined) detail = `was closed by the broker (${code}: ${replyText(err)})`;
  else if (socket === 'reset' || socket === 'broken') detail = 'was reset';
  else if (e instanceof Error && /heartbeat/i.test(e.message)) detail = 'missed its heartbeats (the broker or the network is not answering)';
  else if (e instanceof Error && e.message === 'Unexpected close') detail = 'was closed by the peer';
  else if (e instanceof Error) detail = `was lost (${redactUrl(e.message)})`;
  else detail = 'was lost';
  return new TransientError(`${what} ${where} ${detail}`, { cause: err, outcomeUnknown: true });
}
