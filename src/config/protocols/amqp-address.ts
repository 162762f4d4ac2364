/**
 * Credential-free names of AMQP endpoints, shared by the source and the target.
 *
 * `address` keys duplicate-ID caches and stamp records, so it must be the same for every bridge that reads or writes
 * the same broker destination: it is built from the *first* URL of the connection (not the one a session happened to
 * reach through failover), with the port and vhost made explicit. Names are percent-encoded so that a `/` inside a
 * queue, exchange or routing key cannot make two different destinations look alike.
 */
import type { AmqpConnectionConfig } from './amqp-schema.js';
import { redactUrl } from '../../shared/errors.js';

/** What a target publishes to: an exchange and routing key (a queue alone means the default exchange). */
export interface AmqpTargetSpec {
  queue?: string;
  exchange?: string;
  routingKey?: string;
}

/** host, port and vhost of one AMQP URL. */
export interface AmqpBroker {
  scheme: 'amqp' | 'amqps';
  host: string;
  port: number;
  vhost: string;
}

export function parseBroker(url: string): AmqpBroker {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new TypeError(`not a valid AMQP URL: ${redactUrl(url)}`);
  }
  const scheme = u.protocol === 'amqps:' ? 'amqps' : 'amqp';
  const host = u.hostname.replace(/^\[(.*)\]$/, '$1') || 'localhost';
  const port = u.port ? Number(u.port) : scheme === 'amqps' ? 5671 : 5672;
  // amqplib's rule: an empty path means the default vhost '/'.
  const vhost = u.pathname.length > 1 ? decodeURIComponent(u.pathname.slice(1)) : '/';
  return { scheme, host, port, vhost };
}

/** `host:port/vhost` for messages ("connection to rabbit (127.0.0.1:5672) was refused"); the default vhost is left out. */
export function describeBroker(b: AmqpBroker): string {
  const host = b.host.includes(':') ? `[${b.host}]` : b.host;
  return b.vhost === '/' ? `${host}:${b.port}` : `${host}:${b.port}/${b.vhost}`;
}

function brokerPrefix(conn: AmqpConnectionConfig): string {
  const first = conn.urls[0];
  if (first === undefined) throw new TypeError(`connection '${conn.name}' has no URL`);
  const b = parseBroker(first);
  const host = b.host.includes(':') ? `[${b.host}]` : b.host;
  return `${b.scheme}://${host}:${b.port}/${encodeURIComponent(b.vhost)}`;
}

/** The exchange and routing key a target spec resolves to. */
export function resolveTarget(spec: AmqpTargetSpec): { exchange: string; routingKey: string } {
  const exchange = spec.exchange ?? '';
  const routingKey = spec.routingKey ?? spec.queue ?? '';
  return { exchange, routingKey };
}

/** `amqp://<host>:<port>/<vhost>/queue/<queue>` */
export function sourceAddress(conn: AmqpConnectionConfig, queue: string): string {
  return `${brokerPrefix(conn)}/queue/${encodeURIComponent(queue)}`;
}

/** `amqp://<host>:<port>/<vhost>/exchange/<exchange>/<routingKey>`; the default exchange is the empty segment. */
export function targetAddress(conn: AmqpConnectionConfig, spec: AmqpTargetSpec): string {
  const { exchange, routingKey } = resolveTarget(spec);
  return `${brokerPrefix(conn)}/exchange/${encodeURIComponent(exchange)}/${encodeURIComponent(routingKey)}`;
}

/** For logs: `amqp rabbit queue 'orders'`. */
export function describeSource(conn: AmqpConnectionConfig, queue: string): string {
  return `amqp ${conn.name} queue '${queue}'`;
}

/** For logs: `amqp rabbit exchange 'events' routing key 'a.b'` or `amqp rabbit queue 'orders' (default exchange)`. */
export function describeTarget(conn: AmqpConnectionConfig, spec: AmqpTargetSpec): string {
  const { exchange, routingKey } = resolveTarget(spec);
  if (exchange === '') return `amqp ${conn.name} queue '${routingKey}' (default exchange)`;
  return `amqp ${conn.name} exchange '${exchange}' routing key '${routingKey}'`;
}
