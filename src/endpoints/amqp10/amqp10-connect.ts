/**
 * One AMQP 1.0 connection (rhea) for one endpoint: the failover over the connection's URLs (../failover.ts), SASL PLAIN
 * with the URL's user and password (ANONYMOUS without), TLS for `amqps://` URLs with the `tls:` block, the URL's path as
 * the open frame's hostname (a virtual host), and the failures as sentences that name `host:port`, never credentials.
 *
 * rhea's own reconnect is off: a lost connection is reported once and the supervisor builds a new session (two
 * reconnect layers would fight: rhea would re-attach links behind the bridge's back, with deliveries it no longer
 * holds). connect-timeout bounds TCP, TLS, SASL and the open exchange together: rhea has no such bound of its own.
 */
import rhea, { type Connection, type ConnectionOptions, type EventContext } from 'rhea';
import type { Amqp10ConnectionConfig } from '../../config/protocols/amqp10-schema.js';
import { describeAmqp10Server, parseAmqp10Url, type Amqp10Server } from '../../config/protocols/amqp10-address.js';
import { defaultServername, tlsConnectionOptions } from '../../config/tls.js';
import { ConfigError, TransientError, type BridgeError } from '../../shared/errors.js';
import { socketSentence, tlsFailure } from '../../shared/error-sentences.js';
import type { Logger } from '../../shared/log.js';
import { connectFirst } from '../failover.js';

export interface Amqp10Session {
  connection: Connection;
  /** `host:port` of the peer it reached (never credentials). */
  peer: string;
}

/** Connects to the first URL of the connection that answers. Rejects with TransientError or ConfigError (see amqp10Failure). */
export function connectAmqp10(conn: Amqp10ConnectionConfig, containerId: string, log: Logger): Promise<Amqp10Session> {
  return connectFirst(conn.urls, (url) => connectOne(conn, parseAmqp10Url(url), containerId), {
    noUrl: `connection '${conn.name}' has no URL`,
    allFailed: (reasons) => `no server of connection '${conn.name}' could be reached: ${reasons}`,
    peer: (s) => s.peer,
  }, log);
}

function options(conn: Amqp10ConnectionConfig, server: Amqp10Server, containerId: string): ConnectionOptions {
  const common = {
    host: server.host,
    port: server.port,
    container_id: containerId,
    reconnect: false,
    idle_time_out: conn.idleTimeout > 0 ? conn.idleTimeout : undefined,
    // RabbitMQ's plugin reads `vhost:<name>` as the virtual host (a bare name too, when it is one).
    ...(server.vhost !== undefined ? { hostname: `vhost:${server.vhost}` } : {}),
    ...(server.username !== undefined ? { username: server.username, password: server.password ?? '' } : {}),
  };
  if (!server.tls) return { ...common, transport: 'tcp' };
  // rhea sends the host as SNI when no servername is given, which Node refuses for an IP address.
  return { servername: defaultServername(server.host) ?? '', ...tlsConnectionOptions(conn.tls), ...common, transport: 'tls' };
}

function connectOne(conn: Amqp10ConnectionConfig, server: Amqp10Server, containerId: string): Promise<Amqp10Session> {
  const peer = describeAmqp10Server(server);
  const where = `${conn.name} (${peer})`;
  const container = rhea.create_container({ id: containerId });
  return new Promise<Amqp10Session>((resolve, reject) => {
    let settled = false;
    const connection = container.connect(options(conn, server, containerId));
    const fail = (err: BridgeError): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      connection.removeAllListeners();
      // Nothing more of this attempt may reach the caller: a late error is dropped, the socket goes.
      container.removeAllListeners();
      container.on('error', () => undefined);
      connection.on('disconnected', () => undefined);
      connection.close();
      (connection as { socket?: { destroy?: () => void } }).socket?.destroy?.();
      reject(err);
    };
    const timer = setTimeout(() => fail(new TransientError(`connection to ${where} did not open within ${conn.connectTimeout} ms`)), conn.connectTimeout);
    container.on('error', (err: unknown) => fail(amqp10Failure(err, where, conn)));
    connection.once('connection_open', () => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve({ connection, peer });
    });
    connection.on('connection_error', (ctx: EventContext) => fail(amqp10Failure(ctx.connection.error ?? ctx.error, where, conn)));
    connection.on('disconnected', (ctx: EventContext) => fail(amqp10Failure(ctx.error ?? connection.error, where, conn)));
  });
}

/** A condition of an AMQP error (`amqp:unauthorized-access`), or undefined. */
export function conditionOf(err: unknown): string | undefined {
  const c = (err as { condition?: unknown } | null | undefined)?.condition;
  return typeof c === 'string' ? c : undefined;
}

/** The broker's words for an AMQP error (its description), else the error's message. */
export function describeError(err: unknown): string {
  const e = err as { description?: unknown; message?: unknown } | null | undefined;
  if (typeof e?.description === 'string' && e.description !== '') return e.description;
  if (typeof e?.message === 'string' && e.message !== '') return e.message;
  if (err === undefined || err === null) return 'no reason given';
  return typeof err === 'string' ? err : 'an error without a description';
}

/** A failure to connect as a sentence: a login or a TLS mismatch is the configuration's, the rest transient. */
export function amqp10Failure(err: unknown, where: string, conn: Amqp10ConnectionConfig): BridgeError {
  const condition = conditionOf(err);
  const reason = describeError(err);
  if (condition === 'amqp:unauthorized-access' || /Failed to authenticate/i.test(reason)) {
    return new ConfigError(`${where} refused the login (wrong user or password in the URL?): ${reason}`, { cause: err });
  }
  const tls = tlsFailure(err, where, conn.tls);
  if (tls !== undefined) return new ConfigError(`TLS with ${where} failed: ${tls}`, { cause: err });
  const socket = socketSentence(err, 'predicate', conn.connectTimeout);
  if (socket !== undefined) return new TransientError(`connection to ${where} ${socket}`, { cause: err });
  return new TransientError(`connection to ${where} failed: ${reason}${condition !== undefined ? ` (${condition})` : ''}`, { cause: err });
}
