/**
 * The registry: every protocol the bridge speaks, one record each (./protocol.ts). A new protocol is one line here.
 */
import type { BridgeConfig, ConnectionConfig } from '../config/types.js';
import type { BridgeDescription } from '../core/supervisor/status.js';
import type { Protocol } from './protocol.js';
import { amqpProtocol } from './amqp/amqp-protocol.js';
import { stompProtocol } from './stomp/stomp-protocol.js';
import { natsProtocol } from './nats/nats-protocol.js';
import { mqttProtocol } from './mqtt/mqtt-protocol.js';
import { amqp10Protocol } from './amqp10/amqp10-protocol.js';

const PROTOCOLS = [amqpProtocol, stompProtocol, natsProtocol, mqttProtocol, amqp10Protocol] as const;

const byType = new Map<string, Protocol>(PROTOCOLS.map((p) => [p.type, p as unknown as Protocol]));

/**
 * The record of `conn`'s protocol. Its factories take any connection: they are only ever called with a connection of
 * their own type, since the record is looked up by that type (the one cast of the registry, in `byType`).
 */
export function protocolOf(conn: ConnectionConfig): Protocol {
  const protocol = byType.get(conn.type);
  // The schema admits only registered types (src/config/schema-connections.ts), so this is a bug, not a bad file.
  if (protocol === undefined) throw new TypeError(`no protocol registered for connection type '${conn.type}'`);
  return protocol;
}

/** How /bridges and the page name a bridge's ends, from its protocols' records (handed to each supervisor). */
export function describeBridge(bridge: BridgeConfig): BridgeDescription {
  const { source, target } = bridge;
  const depth = protocolOf(source.connection).sourceDepth;
  return {
    source: `${source.connection.type} ${source.connection.name} ${protocolOf(source.connection).describeSource(source)}`,
    target: `${target.connection.type} ${target.connection.name} ${protocolOf(target.connection).describeTarget(target)}`,
    ...(depth === true ? {} : { sourceDepthUnavailable: depth }),
  };
}
