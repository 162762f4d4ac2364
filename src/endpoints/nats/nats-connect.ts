/**
 * One NATS connection for one endpoint: the failover over the connection's URLs (../failover.ts), the login (user and
 * password or a token in the URL, `password-file`, a `credentials-file`), TLS (`tls://` URLs with the `tls:` block), and
 * the client's low-level failures as sentences.
 *
 * The client never reconnects by itself (`reconnect: false`): a lost connection closes it, the endpoint reports the
 * loss once, and the supervisor builds a new session (two reconnect layers would fight: nats.js would replay
 * subscriptions and buffer publishes behind the bridge's back). The ping interval bounds how long a silent server goes
 * unnoticed: two unanswered pings close the connection.
 */
import { connect, credsAuthenticator, type ConnectionOptions, type NatsConnection } from 'nats';
import type { NatsConnectionConfig } from '../../config/protocols/nats-schema.js';
import { parseNatsUrl, type NatsServer } from '../../config/protocols/nats-address.js';
import { tlsConnectionOptions } from '../../config/tls.js';
import { ConfigError, TransientError, type BridgeError } from '../../shared/errors.js';
import type { Logger } from '../../shared/log.js';
import { connectFirst } from '../failover.js';

export interface NatsSession {
  nc: NatsConnection;
  /** `host:port` of the server it reached (never credentials). */
  peer: string;
}

/** Connects to the first URL of the connection that answers. Rejects with TransientError or ConfigError (see natsFailure). */
export function connectNats(conn: NatsConnectionConfig, clientName: string, log: Logger): Promise<NatsSession> {
  return connectFirst(conn.urls, (url) => connectOne(conn, parseNatsUrl(url), clientName), {
    noUrl: `connection '${conn.name}' has no URL`,
    allFailed: (reasons) => `no server of connection '${conn.name}' could be reached: ${reasons}`,
    peer: (s) => s.peer,
  }, log);
}

async function connectOne(conn: NatsConnectionConfig, server: NatsServer, clientName: string): Promise<NatsSession> {
  const options: ConnectionOptions = {
    servers: server.hostPort,
    name: clientName,
    reconnect: false,
    timeout: conn.connectTimeout,
    pingInterval: conn.pingInterval,
    maxPingOut: 2,
    // Servers a cluster announces are not ours to connect to: the configured URLs are the failover list.
    ignoreClusterUpdates: true,
    // nats.js builds an Error per request for its stack (measured: 12% of the bridge's CPU on AMQP → JetStream); our
    // errors say what failed without it.
    noAsyncTraces: true,
  };
  if (server.user !== undefined && server.pass !== undefined) {
    options.user = server.user;
    options.pass = server.pass;
  } else if (server.user !== undefined) {
    options.token = server.user;
  }
  if (conn.credentials !== undefined) options.authenticator = credsAuthenticator(new TextEncoder().encode(conn.credentials));
  // nats.js hands the `tls` object to tls.connect: Node's options (CA, client certificate, name check) pass through.
  if (server.tls) options.tls = tlsConnectionOptions(conn.tls) as ConnectionOptions['tls'];
  const where = `${conn.name} (${server.hostPort})`;
  try {
    const nc = await connect(options);
    return { nc, peer: server.hostPort };
  } catch (err) {
    throw natsFailure(err, where, conn.connectTimeout);
  }
}

/** A NatsError's code ('CONNECTION_REFUSED', '503', …); undefined for anything else. */
export function natsCode(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}

const LOGIN_CODES = new Set(['AUTHORIZATION_VIOLATION', 'BAD_AUTHENTICATION', 'BAD_CREDS', 'AUTHENTICATION_EXPIRED', 'AUTHENTICATION_TIMEOUT', 'ACCOUNT_EXPIRED']);

/** A failure to connect (or of the connection) as a sentence: a login or TLS problem is the configuration's, the rest transient. */
export function natsFailure(err: unknown, where: string, timeoutMs: number): BridgeError {
  const code = natsCode(err);
  const reason = err instanceof Error ? err.message : String(err);
  if (code === 'CONNECTION_REFUSED') return new TransientError(`connection to ${where} was refused`, { cause: err });
  if (code === 'TIMEOUT' || code === 'CONNECTION_TIMEOUT') return new TransientError(`${where} did not answer within ${timeoutMs} ms`, { cause: err });
  if (code !== undefined && LOGIN_CODES.has(code)) return new ConfigError(`${where} refused the login (${reason})`, { cause: err });
  if (code === 'TLS' || code === 'SERVER_OPT_NA' || /certificate|self.signed|handshake|SSL/i.test(reason)) {
    return new ConfigError(`TLS with ${where} failed: ${reason}`, { cause: err });
  }
  return new TransientError(`connection to ${where} failed: ${reason}`, { cause: err });
}

/** JetStream is not enabled on the server (its API has no responder), as a sentence. */
export function jetStreamMissing(where: string, err: unknown): TransientError {
  return new TransientError(`JetStream is not enabled on ${where} (start nats-server with -js, or enable it for this account); retrying`, { cause: err });
}
