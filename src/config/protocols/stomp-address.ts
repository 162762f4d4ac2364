/**
 * STOMP URLs, destinations and the stable addresses that key the duplicate-ID cache and the stamp records.
 */
import type { StompConnectionConfig } from './stomp-schema.js';

/** What a connect needs from one URL of a connection's failover list. */
export interface StompServer {
  host: string;
  port: number;
  tls: boolean;
  login?: string;
  passcode?: string;
}

const DEFAULT_PORT = 61613;
const DEFAULT_TLS_PORT = 61614;

/**
 * Parses `stomp://[login:passcode@]host[:port]`, `stomp+ssl://…` (TLS) or `tcp://…` (ActiveMQ's spelling of plain
 * TCP). Throws TypeError on anything else: the configuration schema has already checked the scheme.
 */
export function parseStompUrl(url: string): StompServer {
  const u = new URL(url);
  const scheme = u.protocol.replace(/:$/, '').toLowerCase();
  if (scheme !== 'stomp' && scheme !== 'stomp+ssl' && scheme !== 'tcp') {
    throw new TypeError(`unsupported STOMP URL scheme '${scheme}' (expected stomp://, stomp+ssl:// or tcp://)`);
  }
  const tls = scheme === 'stomp+ssl';
  // Non-special schemes keep IPv6 brackets in hostname; net.connect wants them off.
  const host = u.hostname.replace(/^\[(.*)\]$/, '$1') || 'localhost';
  const port = u.port ? Number(u.port) : tls ? DEFAULT_TLS_PORT : DEFAULT_PORT;
  const server: StompServer = { host, port, tls };
  if (u.username) server.login = decodeURIComponent(u.username);
  if (u.password) server.passcode = decodeURIComponent(u.password);
  return server;
}

/** `host:port` of a server, for messages (never credentials). */
export function describeServer(server: StompServer): string {
  const host = server.host.includes(':') ? `[${server.host}]` : server.host;
  return `${host}:${server.port}`;
}

/** The STOMP destination of a configured queue: `/queue/<queue>`, or the queue itself when it starts with `/`. */
export function stompDestination(queue: string): string {
  if (queue === '') throw new TypeError('a STOMP destination needs a queue name');
  return queue.startsWith('/') ? queue : `/queue/${queue}`;
}

/**
 * The address of a destination: `stomp://<host>:<port><destination>` for the connection's first URL, without
 * credentials (e.g. `stomp://127.0.0.1:61613/queue/orders`); `?host=<vhost>` is appended when a `host` header
 * (virtual host) is configured. Two bridges that reach the same destination through the same first URL share it.
 */
export function stompAddress(conn: StompConnectionConfig, destination: string): string {
  const first = conn.urls[0];
  if (first === undefined) throw new TypeError(`STOMP connection '${conn.name}' has no URL`);
  const server = parseStompUrl(first);
  const vhost = conn.host !== undefined && conn.host !== server.host ? `?host=${encodeURIComponent(conn.host)}` : '';
  return `stomp://${describeServer(server)}${destination}${vhost}`;
}
