/**
 * `check` for an MQTT connection (src/service/check.ts runs it through the record, ./mqtt-protocol.ts): reachable, the
 * protocol version, the login; per bridge what can be known without subscribing or publishing.
 */
import { randomBytes } from 'node:crypto';
import type { BridgeConfig, ConnectionConfig } from '../../config/types.js';
import type { MqttConnectionConfig } from '../../config/protocols/mqtt-schema.js';
import { subscriptionFilter } from '../../config/protocols/mqtt-address.js';
import type { Finding } from '../../core/finding.js';
import { silentLogger } from '../../shared/log.js';
import type { CheckContext } from '../protocol-check.js';
import { connectMqtt } from './mqtt-connect.js';
import type { MqttSession } from './mqtt-session.js';

/**
 * An MQTT peer: reachable, the protocol version it speaks (a version 5 connection against a 3.1.1-only broker is the
 * error the bridge would stop with), the login. It connects with a client id of its own and a clean session, never
 * with a bridge's: that would take a running bridge's session over. Subscriptions and topics are not checkable without
 * subscribing or publishing.
 */
export async function checkMqtt(conn: MqttConnectionConfig, { bridges }: CheckContext): Promise<Finding[]> {
  const subject = `connection ${conn.name}`;
  let session: MqttSession;
  try {
    session = await connectMqtt(conn, { clientId: `bb-check-${randomBytes(6).toString('hex')}`, clean: true }, silentLogger);
  } catch (err) {
    return [{ level: 'error', subject, message: (err as Error).message }];
  }
  try {
    const info = session.serverInfo;
    const login = session.username !== undefined ? `logged in as ${session.username}` : 'anonymous (no user name in the URL)';
    const findings: Finding[] = [{ level: 'ok', subject, message: `reachable: ${conn.name} (${session.peer}), MQTT ${session.version === 5 ? '5' : '3.1.1'}, ${login}` }];
    if (session.version === 4) {
      findings.push({
        level: 'info',
        subject,
        message: 'MQTT 3.1.1 carries no headers: messages from it are stamped by fingerprint, and the duplicate ID and the possible-duplicate flag cannot travel to it (docs/delivery.md#mqtt)',
      });
    }
    for (const use of mqttUsesOf(conn, bridges)) {
      const b = use.bridge;
      if (use.role === 'source') {
        const s = b.source;
        const shared = s.sharedGroup;
        if (shared !== undefined && !info.sharedSubscriptionAvailable) {
          findings.push({ level: 'error', subject: `bridge ${b.name}`, message: `source: ${conn.name} does not support shared subscriptions (shared-group '${shared}')` });
        }
        findings.push({
          level: 'info',
          subject: `bridge ${b.name}`,
          message: `source '${subscriptionFilter(s.topic ?? '', shared)}' on ${conn.name} as client id '${s.clientId ?? ''}': not checkable without subscribing (its persistent session is the broker's)`,
        });
      } else {
        const t = use.role === 'target' ? b.target : b.deadLetter;
        if (t?.retain === true && !info.retainAvailable) {
          findings.push({ level: 'error', subject: `bridge ${b.name}`, message: `${use.role}: ${conn.name} does not support retained messages (retain: true)` });
        }
        findings.push({ level: 'info', subject: `bridge ${b.name}`, message: `${use.role} topic '${t?.template ?? t?.topic ?? ''}' on ${conn.name}: not checkable without publishing` });
      }
    }
    return findings;
  } finally {
    await session.disconnect(2000);
  }
}

function mqttUsesOf(conn: ConnectionConfig, bridges: readonly BridgeConfig[]): { bridge: BridgeConfig; role: 'source' | 'target' | 'dead-letter' }[] {
  const uses: { bridge: BridgeConfig; role: 'source' | 'target' | 'dead-letter' }[] = [];
  for (const b of bridges) {
    if (b.source.connection.name === conn.name) uses.push({ bridge: b, role: 'source' });
    if (b.target.connection.name === conn.name) uses.push({ bridge: b, role: 'target' });
    if (b.deadLetter?.connection.name === conn.name) uses.push({ bridge: b, role: 'dead-letter' });
  }
  return uses;
}
