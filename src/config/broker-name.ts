/**
 * The name of the broker a connection reaches, as a bridge's loop path records it (src/routing/bridge-path.ts,
 * docs/design.md §11 "No loops"): scheme, host and port of the connection's first URL, plus the virtual host where the
 * protocol has one (each protocol's record, ./protocols/, says how) — exactly the prefix of the credential-free
 * addresses that `x-bridge-source` and the caches use (each protocol's ./<protocol>-address.ts). So two vhosts of one
 * RabbitMQ are two brokers, and two bridges that reach one broker through the same first URL name it alike.
 *
 * A name is at most BROKER_NAME_MAX_BYTES of printable ASCII without a comma (the path's separator): a longer one (a
 * long host or vhost) keeps its start and ends in a hash of the whole, so it stays one name per broker.
 */
import { createHash } from 'node:crypto';
import type { ConnectionConfig } from './types.js';
import { configProtocolOf } from './protocols.js';
import { BROKER_NAME_MAX_BYTES } from '../routing/bridge-path.js';

export function brokerName(conn: ConnectionConfig): string {
  const first = conn.urls[0];
  if (first === undefined) throw new TypeError(`connection '${conn.name}' has no URL`);
  return bounded(configProtocolOf(conn.type).brokerName(conn, first));
}

function bounded(name: string): string {
  // encodeURIComponent leaves only printable ASCII; a host is ASCII once the URL parser has punycoded it. A comma (legal
  // in a host of a non-special scheme) is escaped so that it cannot split the path.
  const safe = name.replace(/[^\x21-\x7e]|,/g, (c) => encodeURIComponent(c));
  if (safe.length <= BROKER_NAME_MAX_BYTES) return safe;
  const hash = createHash('sha256').update(name).digest('hex').slice(0, 16);
  return `${safe.slice(0, BROKER_NAME_MAX_BYTES - hash.length - 1)}~${hash}`;
}
