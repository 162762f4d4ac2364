/** Opening an MQTT session: the failover over a connection's URLs, and the protocol version a broker speaks. */
import { randomBytes } from 'node:crypto';
import type { MqttConnectionConfig } from '../../config/protocols/mqtt-schema.js';
import { ConfigError } from '../../shared/errors.js';
import type { Logger } from '../../shared/log.js';
import { describeMqttServer, parseMqttUrl, type MqttServer } from '../../config/protocols/mqtt-address.js';
import { connectFirst } from '../failover.js';
import { VersionRefused } from './mqtt-handshake.js';
import { MqttSession, type MqttSessionOptions } from './mqtt-session.js';

/**
 * Connects to the first URL of `conn.urls` that answers (../failover.ts). Resolves with an open session; rejects with
 * TransientError when none answered, ConfigError when the broker refused the client for good (login, client id,
 * banned, TLS) or speaks only MQTT 3.1.1 while the connection asks for 5 (found by a second, 3.1.1 CONNECT with a
 * throw-away client id: a sentence, never a hang).
 */
export function connectMqtt(conn: MqttConnectionConfig, options: MqttSessionOptions, log: Logger): Promise<MqttSession> {
  return connectFirst(conn.urls, (url) => connectOne(conn, parseMqttUrl(url), options, log), {
    noUrl: `MQTT connection '${conn.name}' has no URL`,
    allFailed: (reasons) => `no broker of MQTT connection '${conn.name}' could be reached: ${reasons}`,
    peer: (session) => session.peer,
  }, log);
}

async function connectOne(conn: MqttConnectionConfig, server: MqttServer, options: MqttSessionOptions, log: Logger): Promise<MqttSession> {
  const version = conn.protocolVersion;
  try {
    return await MqttSession.open(conn, server, version, options, log);
  } catch (err) {
    if (!(version === 5 && err instanceof VersionRefused)) throw err;
    // Asked for 5 and closed, or refused the version: does it speak 3.1.1? A throw-away client id with a clean
    // session, so that no session of ours is touched. Then 5 once more, so that a broker that merely closed one
    // connection (restarting, a proxy) is never taken for a 3.1.1-only one: that is a configuration error, final.
    const probe = await MqttSession.open(conn, server, 4, { clientId: `bb-version-probe-${randomBytes(6).toString('hex')}`, clean: true }, log).catch(
      () => undefined,
    );
    if (probe === undefined) throw err.asTransient();
    await probe.disconnect();
    const again = await MqttSession.open(conn, server, version, options, log).catch((e: unknown) => e);
    if (again instanceof MqttSession) return again;
    if (!(again instanceof VersionRefused)) throw again;
    throw new ConfigError(
      `MQTT connection '${conn.name}' (${describeMqttServer(server)}): the broker speaks MQTT 3.1.1 only (it ${err.how} a version 5 CONNECT and accepted a 3.1.1 one); set protocol-version: 4 on connection '${conn.name}' (3.1.1 carries no headers: see docs/delivery.md)`,
    );
  }
}
