/** The MQTT handshake's two halves that need no socket: the CONNECT a session writes, and what its CONNACK means. */
import type { IConnackPacket, Packet } from 'mqtt-packet';
import type { MqttConnectionConfig } from '../../config/protocols/mqtt-schema.js';
import type { MqttServer } from '../../config/protocols/mqtt-address.js';
import { ConfigError, TransientError } from '../../shared/errors.js';
import { connackSentence } from './mqtt-reasons.js';

export type MqttVersion = 4 | 5;

/** What a CONNECT carries besides the connection's settings. */
export interface ConnectOptions {
  clientId: string;
  /** Clean start (MQTT 5) / clean session (3.1.1): false keeps the broker's session (subscriptions, unacked messages). */
  clean: boolean;
  /** MQTT 5: seconds the broker keeps the session after a disconnect. */
  sessionExpiry?: number;
  /** MQTT 5: the most QoS 1 PUBLISHes the broker may have unacknowledged towards us. */
  receiveMaximum?: number;
}

/** An MQTT 5 CONNECT the broker answered by closing, or by refusing the protocol version. */
export class VersionRefused extends Error {
  constructor(
    readonly what: string,
    /** "closed the connection on" / "refused" */
    readonly how: string,
  ) {
    super(`${what}: the broker ${how} the MQTT 5 CONNECT`);
  }

  asTransient(): TransientError {
    return new TransientError(`${this.message} (if it speaks only MQTT 3.1.1, set protocol-version: 4)`);
  }
}

/** The CONNECT packet of a session: its client id, clean start, keep-alive, login, and (MQTT 5) expiry and receive maximum. */
export function connectPacket(conn: MqttConnectionConfig, srv: MqttServer, version: MqttVersion, options: ConnectOptions): Packet {
  const properties: Record<string, number> = {};
  if (version === 5) {
    if (options.sessionExpiry !== undefined && options.sessionExpiry > 0) properties.sessionExpiryInterval = options.sessionExpiry;
    if (options.receiveMaximum !== undefined) properties.receiveMaximum = options.receiveMaximum;
  }
  return {
    cmd: 'connect',
    protocolId: 'MQTT',
    protocolVersion: version,
    clean: options.clean,
    clientId: options.clientId,
    keepalive: conn.keepalive,
    ...(srv.username !== undefined ? { username: srv.username } : {}),
    ...(srv.password !== undefined ? { password: Buffer.from(srv.password, 'utf8') } : {}),
    ...(Object.keys(properties).length > 0 ? { properties } : {}),
  };
}

/** Why a CONNACK refuses us (a ConfigError for what no retry fixes), or undefined when it accepts. `what`: the session. */
export function connackRefusal(version: MqttVersion, connack: IConnackPacket, what: string): Error | undefined {
  const code = version === 5 ? (connack.reasonCode ?? 0) : (connack.returnCode ?? 0);
  if (code === 0) return undefined;
  // 1: a 3.1.1 broker's "unacceptable protocol version", in the 3.1.1 form it answers a version 5 CONNECT with.
  if (version === 5 && (code === 0x84 || code === 1)) return new VersionRefused(what, 'refused');
  const { sentence, permanent } = connackSentence(version, code, connack.properties?.reasonString);
  const message = `${what}: the broker refused the connection: ${sentence}`;
  return permanent ? new ConfigError(message) : new TransientError(message);
}
