/** What an MQTT broker tells about itself in CONNACK, with MQTT's defaults for what it leaves out (3.1.1 says nothing). */
import type { IConnackPacket } from 'mqtt-packet';

/** What the broker said in CONNACK (MQTT 5 properties; 3.1.1 brokers announce none, and the defaults apply). */
export interface MqttServerInfo {
  sessionPresent: boolean;
  /** QoS 1 PUBLISHes the broker takes unacknowledged from us (MQTT 5 receive maximum; 65,535 when not announced). */
  receiveMaximum: number;
  maximumQoS: 0 | 1 | 2;
  retainAvailable: boolean;
  sharedSubscriptionAvailable: boolean;
  wildcardSubscriptionAvailable: boolean;
  /** The largest packet the broker takes from us; undefined = no limit but MQTT's. */
  maximumPacketSize?: number;
  /** The keep-alive the broker asks for, overriding ours (MQTT 5). */
  serverKeepAlive?: number;
  assignedClientIdentifier?: string;
}

/** When the server announces no receive maximum (MQTT 5 default, and any 3.1.1 broker). */
const DEFAULT_RECEIVE_MAXIMUM = 65_535;

export function serverInfo(connack: IConnackPacket): MqttServerInfo {
  const p = connack.properties ?? {};
  const info: MqttServerInfo = {
    sessionPresent: connack.sessionPresent,
    receiveMaximum: p.receiveMaximum ?? DEFAULT_RECEIVE_MAXIMUM,
    maximumQoS: (p.maximumQoS ?? 2) as 0 | 1 | 2,
    retainAvailable: p.retainAvailable ?? true,
    sharedSubscriptionAvailable: p.sharedSubscriptionAvailable ?? true,
    wildcardSubscriptionAvailable: p.wildcardSubscriptionAvailable ?? true,
  };
  if (p.maximumPacketSize !== undefined) info.maximumPacketSize = p.maximumPacketSize;
  if (p.serverKeepAlive !== undefined) info.serverKeepAlive = p.serverKeepAlive;
  if (p.assignedClientIdentifier !== undefined) info.assignedClientIdentifier = p.assignedClientIdentifier;
  return info;
}
