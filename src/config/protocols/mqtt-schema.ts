/**
 * An MQTT connection's keys (`type: mqtt`), for the schema's union of connections (../schema-connections.ts).
 */
import { z } from 'zod';
import type { ResolvedConnectionOf } from '../connection-types.js';
import { passwordFile, tlsSchema } from '../schema-connection-parts.js';
import { MQTT_MAX_PACKET_BYTES, MQTT_SCHEMES, clientId, intRange, millis, urlList, urlOf } from '../schema-leaves.js';

const mqttUrl = urlOf(MQTT_SCHEMES, 'mqtt://localhost:1883');

export const mqttConnectionSchema = z
  .strictObject({
    type: z.literal('mqtt'),
    url: mqttUrl.optional().describe('Broker URL (mqtt:// or mqtts://; user and password in the URL). Give url or urls, not both.'),
    urls: urlList(MQTT_SCHEMES, 'mqtt://localhost:1883')
      .optional()
      .describe('Failover list of broker URLs, tried in order on each connect.'),
    'protocol-version': z
      .union([z.literal(5), z.literal(4)], { error: 'expected 5 (MQTT 5.0) or 4 (MQTT 3.1.1)' })
      .default(5)
      .describe(
        'MQTT protocol level: 5 (MQTT 5.0: user properties carry the duplicate ID and the possible-duplicate flag) or 4 (MQTT 3.1.1: no headers at all; RabbitMQ 3.10 and ActiveMQ 5.17 speak only this). A broker that does not speak the version asked for stops the bridge with a sentence saying which one it speaks.',
      ),
    'client-id': clientId()
      .optional()
      .describe(
        "Prefix of the client identifiers of the bridges' endpoints on this connection: each connects as <client-id>-<bridge>-<role> (role source, target or dead-letter; default prefix bb), stable across restarts so that a source's persistent session survives them. A source or target may set its own client-id instead. Two processes must never connect with the same id (the broker hands the session to the newer one): give each replica its own, e.g. \"bb-${HOSTNAME}\".",
      ),
    keepalive: intRange(0, 65535).default(30).describe('MQTT keep-alive in seconds (0 = off): a broker silent for 1.5 times this is taken as gone.'),
    'connect-timeout': millis().default(10000).describe('TCP connect + CONNECT/CONNACK timeout, ms.'),
    'session-expiry': millis(0)
      .default(604_800_000)
      .describe(
        "MQTT 5 sources: how long the broker keeps the source's session (its subscription and the QoS 1 messages that arrive meanwhile) after the bridge disconnects, ms, sent in whole seconds (default 7 days; MQTT 3.1.1: the broker's own setting, e.g. Mosquitto's persistent_client_expiration).",
      ),
    'max-packet-size': intRange(1024, MQTT_MAX_PACKET_BYTES)
      .default(64 * 1024 * 1024)
      .describe(
        "Largest packet the bridge reads from or writes to this broker, bytes (default 64 MiB). One read closes the connection with a sentence (the message stays unacked at the broker; the limit is not announced, or the broker would drop larger messages for us instead); a message to publish is refused (reason too-large, dead-lettered) before it is written: set it to the broker's own limit (Mosquitto's message_size_limit, RabbitMQ's max_message_size).",
      ),
    'password-file': passwordFile,
    tls: tlsSchema.optional(),
  })
  .describe("An MQTT 5 or 3.1.1 broker (tested: Mosquitto, both versions; RabbitMQ's MQTT plugin and ActiveMQ's MQTT transport, 3.1.1).");

/** The connection as resolved (../types.ts ConnectionConfig): keys in camelCase, url/urls, password-file and tls resolved. */
export type MqttConnectionConfig = ResolvedConnectionOf<typeof mqttConnectionSchema>;

declare module '../connection-types.js' {
  interface ConnectionConfigs {
    mqtt: MqttConnectionConfig;
  }
}
