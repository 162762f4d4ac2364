/**
 * NATS URLs and the stable addresses that key the duplicate-ID cache (a target subject) and the stamp records (a
 * source stream's consumer).
 */
import type { NatsConnectionConfig } from './nats-schema.js';

/** What a connect needs from one URL of a connection's failover list. */
export interface NatsServer {
  /** `host:port`, as nats.js takes a server (IPv6 in brackets). */
  hostPort: string;
  tls: boolean;
  user?: string;
  pass?: string;
}

const DEFAULT_PORT = 4222;

/**
 * Parses `nats://[user:password@]host[:port]` or `tls://…` (TLS from the first byte). A URL with a user and no password
 * names a token (the nats.js reading of `nats://token@host`). Throws TypeError on another scheme: the schema has checked.
 */
export function parseNatsUrl(url: string): NatsServer {
  const u = new URL(url);
  const scheme = u.protocol.replace(/:$/, '').toLowerCase();
  if (scheme !== 'nats' && scheme !== 'tls') throw new TypeError(`unsupported NATS URL scheme '${scheme}' (expected nats:// or tls://)`);
  const host = u.hostname || 'localhost';
  const port = u.port ? Number(u.port) : DEFAULT_PORT;
  const server: NatsServer = { hostPort: `${host}:${port}`, tls: scheme === 'tls' };
  if (u.username) server.user = decodeURIComponent(u.username);
  if (u.password) server.pass = decodeURIComponent(u.password);
  return server;
}

function firstServer(conn: NatsConnectionConfig): NatsServer {
  const first = conn.urls[0];
  if (first === undefined) throw new TypeError(`NATS connection '${conn.name}' has no URL`);
  return parseNatsUrl(first);
}

/**
 * The cache address of a subject published to: `nats://<host>:<port>/<subject>` for the connection's first URL,
 * without credentials (e.g. `nats://127.0.0.1:4222/orders.eu`).
 */
export function natsSubjectAddress(conn: NatsConnectionConfig, subject: string): string {
  return `nats://${firstServer(conn).hostPort}/${subject}`;
}

/** The address of a source: `nats://<host>:<port>/<stream>/<consumer>`; replicas sharing the consumer share it. */
export function natsConsumerAddress(conn: NatsConnectionConfig, stream: string, consumer: string): string {
  return `nats://${firstServer(conn).hostPort}/${stream}/${consumer}`;
}
