/**
 * AMQP 1.0 URLs and the stable addresses that key the duplicate-ID cache (a target node) and the stamp records (a
 * source node). "Address" here is the cache's word; AMQP 1.0 calls what a link attaches to a node, named by its node
 * address (`/amq/queue/orders` on RabbitMQ's plugin, `orders` on Artemis).
 */
import type { Amqp10ConnectionConfig } from './amqp10-schema.js';

/** What a connect needs from one URL of a connection's failover list. */
export interface Amqp10Server {
  host: string;
  port: number;
  tls: boolean;
  /** SASL PLAIN when set; ANONYMOUS otherwise. */
  username?: string;
  password?: string;
  /** The URL's path without its leading '/', decoded, when given: the virtual host (sent as `vhost:<name>` in the open frame's hostname, RabbitMQ's form). */
  vhost?: string;
}

const DEFAULT_PORT = 5672;
const DEFAULT_TLS_PORT = 5671;

/** Parses `amqp://[user:password@]host[:port][/vhost]` or `amqps://…` (TLS). Throws TypeError on another scheme. */
export function parseAmqp10Url(url: string): Amqp10Server {
  const u = new URL(url);
  const scheme = u.protocol.replace(/:$/, '').toLowerCase();
  if (scheme !== 'amqp' && scheme !== 'amqps') throw new TypeError(`unsupported AMQP 1.0 URL scheme '${scheme}' (expected amqp:// or amqps://)`);
  const tls = scheme === 'amqps';
  const host = u.hostname.replace(/^\[(.*)\]$/, '$1') || 'localhost';
  const port = u.port ? Number(u.port) : tls ? DEFAULT_TLS_PORT : DEFAULT_PORT;
  const server: Amqp10Server = { host, port, tls };
  if (u.username) server.username = decodeURIComponent(u.username);
  if (u.password) server.password = decodeURIComponent(u.password);
  const path = u.pathname.replace(/^\//, '');
  if (path !== '') server.vhost = decodeURIComponent(path);
  return server;
}

/** `host:port` (IPv6 in brackets), for messages and addresses (never credentials). */
export function describeAmqp10Server(server: Amqp10Server): string {
  return `${server.host.includes(':') ? `[${server.host}]` : server.host}:${server.port}`;
}

function firstServer(conn: Amqp10ConnectionConfig): Amqp10Server {
  const first = conn.urls[0];
  if (first === undefined) throw new TypeError(`AMQP 1.0 connection '${conn.name}' has no URL`);
  return parseAmqp10Url(first);
}

/**
 * The broker a connection reaches, as addresses and the loop path name it: `amqp10://<host>:<port>`, plus
 * `/<vhost>` (URL-encoded) when the URL names a virtual host, for the connection's first URL.
 */
export function amqp10Broker(conn: Amqp10ConnectionConfig): string {
  const server = firstServer(conn);
  return `amqp10://${describeAmqp10Server(server)}${server.vhost !== undefined ? `/${encodeURIComponent(server.vhost)}` : ''}`;
}

/**
 * The address of a node for the cache (a target's) and the stamp records (a source's): amqp10Broker, then `/` and the
 * node address, without credentials (e.g. `amqp10://127.0.0.1:5672//amq/queue/orders`).
 * The scheme is the connection's type, not the URL's: a RabbitMQ queue reached over 0-9-1 by one bridge and over 1.0
 * (/amq/queue/<queue>) by another has two addresses, hence two caches (docs/mapping.md says so).
 */
export function amqp10NodeAddress(conn: Amqp10ConnectionConfig, node: string): string {
  return `${amqp10Broker(conn)}/${node}`;
}
