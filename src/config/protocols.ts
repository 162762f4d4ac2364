/**
 * The configuration's registry: every protocol's record (./protocol.ts), one each, in the order of the schema's
 * CONNECTION_TYPES. A new protocol is one line here; the mapped type below refuses to compile without it.
 */
import { CONNECTION_TYPES } from './schema-connections.js';
import type { ConfigProtocol, ConnectionType } from './protocol.js';
import { amqpConfigProtocol } from './protocols/amqp.js';
import { stompConfigProtocol } from './protocols/stomp.js';
import { natsConfigProtocol } from './protocols/nats.js';
import { mqttConfigProtocol } from './protocols/mqtt.js';
import { amqp10ConfigProtocol } from './protocols/amqp10.js';

const BY_TYPE: { readonly [T in ConnectionType]: ConfigProtocol<T> } = {
  amqp: amqpConfigProtocol,
  stomp: stompConfigProtocol,
  nats: natsConfigProtocol,
  mqtt: mqttConfigProtocol,
  amqp10: amqp10ConfigProtocol,
};

/**
 * The record of a connection's type. Its functions take any connection: they are only ever called with a connection of
 * their own type, since the record is looked up by that type (the one cast of the registry).
 */
export function configProtocolOf(type: ConnectionType): ConfigProtocol {
  return BY_TYPE[type] as ConfigProtocol;
}

export const CONFIG_PROTOCOLS: readonly ConfigProtocol[] = CONNECTION_TYPES.map(configProtocolOf);

/** The record of a `type:` read from the plain data (./raw-data.ts); undefined for one the schema refuses. */
export function findConfigProtocol(type: unknown): ConfigProtocol | undefined {
  return CONFIG_PROTOCOLS.find((p) => p.type === type);
}
