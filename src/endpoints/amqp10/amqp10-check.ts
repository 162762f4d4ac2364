/**
 * `check` for an AMQP 1.0 connection (src/service/check.ts runs it through the record, ./amqp10-protocol.ts): reachable
 * (TCP, TLS, SASL, open), and per bridge whether its node answers an attach, asked as the endpoints ask it
 * (./amqp10-probe.ts: a receiver without credit on an existing-queue node, whose sender attach would prove nothing on
 * RabbitMQ; a sender elsewhere), on a session of the probe's own. Nothing is sent or received.
 */
import type { BridgeConfig } from '../../config/types.js';
import type { Amqp10ConnectionConfig } from '../../config/protocols/amqp10-schema.js';
import type { Finding } from '../../core/finding.js';
import { silentLogger } from '../../shared/log.js';
import { connectionName } from '../connection-share.js';
import type { CheckContext, ConnectionCount, CountContext } from '../protocol-check.js';
import { connectAmqp10, type Amqp10Session } from './amqp10-connect.js';
import { probeNode } from './amqp10-probe.js';

export async function checkAmqp10(conn: Amqp10ConnectionConfig, { bridges }: CheckContext): Promise<Finding[]> {
  const subject = `connection ${conn.name}`;
  let session: Amqp10Session;
  try {
    session = await connectAmqp10(conn, connectionName(conn.name, 'check'), silentLogger);
  } catch (err) {
    return [{ level: 'error', subject, message: (err as Error).message }];
  }
  try {
    const user = new URL(conn.urls[0] ?? 'amqp://x').username;
    const findings: Finding[] = [{ level: 'ok', subject, message: `reachable: ${conn.name} (${session.peer}), AMQP 1.0, ${user !== '' ? `logged in as ${decodeURIComponent(user)}` : 'anonymous (no user name in the URL)'}` }];
    for (const { bridge, role, node } of nodesOf(conn, bridges)) {
      const label = `${role} node '${node}' on ${conn.name}`;
      if (node.includes('${')) {
        findings.push({ level: 'info', subject: `bridge ${bridge}`, message: `${label}: an address template, not checkable (its nodes are named per message)` });
        continue;
      }
      const probe = await probeNode(session.connection, node, conn.connectTimeout);
      findings.push(
        probe.exists === true
          ? { level: 'ok', subject: `bridge ${bridge}`, message: `${label} answers an attach` }
          : probe.exists === false
            ? { level: 'error', subject: `bridge ${bridge}`, message: `${label} refused an attach${probe.condition !== undefined ? ` (${probe.condition})` : ''}: ${probe.reason}` }
            : { level: 'warning', subject: `bridge ${bridge}`, message: `${label} could not be checked: ${probe.reason}` },
      );
    }
    return findings;
  } finally {
    try {
      session.connection.close();
    } catch {
      // Gone already.
    }
  }
}

function nodesOf(conn: Amqp10ConnectionConfig, bridges: readonly BridgeConfig[]): { bridge: string; role: 'source' | 'target' | 'dead-letter'; node: string }[] {
  const out: { bridge: string; role: 'source' | 'target' | 'dead-letter'; node: string }[] = [];
  for (const b of bridges) {
    if (b.source.connection.name === conn.name) out.push({ bridge: b.name, role: 'source', node: b.source.address ?? b.source.queue });
    if (b.target.connection.name === conn.name) out.push({ bridge: b.name, role: 'target', node: b.target.template ?? b.target.address ?? '' });
    if (b.deadLetter?.connection.name === conn.name) out.push({ bridge: b.name, role: 'dead-letter', node: b.deadLetter.address ?? '' });
  }
  return out;
}

/** AMQP 1.0 endpoints do not share connections: the count is one per endpoint. */
export function countAmqp10({ planned }: CountContext): ConnectionCount {
  return { count: planned.reduce((n, p) => n + p.endpoints, 0), how: 'one per endpoint: AMQP 1.0 endpoints do not share connections' };
}
